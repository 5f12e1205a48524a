"""karpy against Karpenter itself: the same real control plane, the same KWOK instance types, the same workload.

Each run starts a fresh cluster (upstream kube-apiserver, etcd, kube-controller-manager, kube-scheduler
and KWOK built by scripts/realcluster/build.sh), installs **Karpenter's own CRDs** (from its Go module,
so karpy runs on the CRDs a cluster with Karpenter already has), one KWOKNodeClass and one NodePool,
starts one autoscaler as a process outside the cluster (Karpenter's KWOK provider ``karpenter-kwok``, or
``karpy controller --cloud-provider kwok``) and then:

1. **burst**: Deployments of Karpenter's scheduling-benchmark mix (generic, zonal and hostname topology
   spread, zonal pod affinity, hostname pod anti-affinity; varied shapes) applied at once, until every
   pod is Running;
2. **scale-down**: every Deployment to 30 %, until the node set has not changed for ``--settle`` seconds;
3. **drift**: a NodePool template label change, until every node carries it and every pod is Running.

Per autoscaler and phase it reports the time, pod pending p50/p95 (creation to Ready), NodeClaims
launched, nodes and $/h (KWOK prices from Karpenter's instance_types.json), the controller's CPU seconds
and peak resident memory (from /proc), and the API requests it made (the apiserver's audit log, counted
by user agent). One autoscaler at a time, same seed, same manifests.

    python bench/vs_karpenter.py                   # 1,000 and 5,000 pods, 3 repeats
    python bench/vs_karpenter.py --sizes 1000 --repeats 1 --json out.json --report DIR
    python bench/vs_karpenter.py --sizes 1000 --repeats 1 --phases burst --json out.json   # a few minutes

``--phases`` runs the burst alone or with the later phases (``burst,drift`` drifts the burst's nodes).
The JSON has, per run, every NodeClaim after the burst (``burst_nodeclaims``: type, zone, when it was
created, the requests it was launched for, its allocatable, the bench pods bound to its node by class),
the path of the autoscaler's log, and a timeline (pods, pending, Unschedulable pods, nodes, $/h).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

sys.path.insert(0, str(REPO / "bench"))

from support import realcluster  # noqa: E402
from vs_karpenter_output import (  # noqa: E402
    AUTOSCALERS,
    _count,
    _ts,
    api_requests,
    claim_records,
    print_api_breakdown,
    print_table,
    report,
    summarise,
)

NODEPOOL = "bench"
NAMESPACE = "bench"
AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                "rules": [{"level": "Metadata"}]}
CLASSES = (("generic", 0.40), ("zonal-spread", 0.20), ("hostname-spread", 0.15), ("zonal-affinity", 0.15),
           ("hostname-anti-affinity", 0.10))
CPUS = ("100m", "250m", "500m", "1", "2")
MEMORIES = ("128Mi", "512Mi", "1Gi", "2Gi")
CONSOLIDATE_AFTER_S = 30.0


def karpenter_version() -> str:
    for line in (REPO / "scripts" / "realcluster" / "build.sh").read_text().splitlines():
        if line.startswith("KARPENTER_VERSION="):
            return line.split(":-", 1)[1].rstrip("}")
    raise SystemExit("KARPENTER_VERSION not found in build.sh")


def karpenter_module() -> Path:
    """Karpenter's Go module source, which build.sh brought into the module cache."""
    env = {**os.environ, "GOTOOLCHAIN": "go1.27.3", "GOFLAGS": "-mod=mod"}
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True,
                                env=env).stdout.strip()
    path = Path(gomodcache) / f"sigs.k8s.io/karpenter@{karpenter_version()}"
    if not path.is_dir():
        raise SystemExit(f"{path} is missing: run scripts/realcluster/build.sh karpenter")
    return path


def karpenter_crds(module: Path) -> str:
    files = sorted((module / "kwok" / "charts" / "crds").glob("*.yaml")) + sorted(
        (module / "kwok" / "apis" / "crds").glob("*.yaml"))
    return "\n---\n".join(f.read_text() for f in files)


def kwok_prices(module: Path) -> dict[tuple[str, str], float]:
    """(instance type, capacity type) -> $/h, from Karpenter's KWOK instance-type file."""
    prices: dict[tuple[str, str], float] = {}
    for it in json.loads((module / "kwok" / "cloudprovider" / "instance_types.json").read_text()):
        for off in it["offerings"]:
            ct = next(r["values"][0] for r in off["Requirements"] if r["key"] == "karpenter.sh/capacity-type")
            prices[(it["name"], ct)] = float(off["Price"])
    return prices


def nodepool(version: str = "1", budget: str = "10%") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": NODEPOOL},
        "spec": {
            "template": {
                "metadata": {"labels": {"bench/version": version}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                    "requirements": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    ],
                    "expireAfter": "Never",
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                           "consolidateAfter": f"{CONSOLIDATE_AFTER_S:.0f}s", "budgets": [{"nodes": budget}]},
        },
    }


def workload(total: int, seed: int) -> list[dict[str, Any]]:
    """Deployments of the benchmark mix, ~10-40 replicas each, shapes drawn with ``seed``."""
    rng = random.Random(seed)
    deployments: list[dict[str, Any]] = []
    for cls, share in CLASSES:
        left = round(total * share)
        while left > 0:
            replicas = min(left, rng.randint(10, 40))
            left -= replicas
            name = f"{cls}-{len(deployments)}"
            labels = {"app": name, "class": cls}
            spec: dict[str, Any] = {
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "app", "image": "registry.invalid/app:1", "resources": {
                    "requests": {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}}}],
            }
            selector = {"matchLabels": {"app": name}}
            if cls.endswith("spread"):
                key = "topology.kubernetes.io/zone" if cls.startswith("zonal") else "kubernetes.io/hostname"
                spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": key,
                                                      "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]
            elif cls == "zonal-affinity":
                spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": selector}]}}
            elif cls == "hostname-anti-affinity":
                spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}]}}
            deployments.append({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"replicas": replicas, "selector": selector,
                         "template": {"metadata": {"labels": labels}, "spec": spec}}})
    return deployments


class Autoscaler:
    """One autoscaler process outside the cluster, with its CPU time and peak RSS read from /proc."""

    def __init__(self, kind: str, cluster: realcluster.RealCluster, workdir: Path) -> None:
        self.kind = kind
        self.health_port, self.metrics_port = realcluster._free_ports(2)
        self.log_path = workdir / f"{kind}.log"
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "SYSTEM_NAMESPACE": "kube-system"}
        if kind == "karpenter":
            argv = [str(cluster.bin / "karpenter-kwok"), "--leader-election-namespace", "kube-system",
                    "--health-probe-port", str(self.health_port), "--metrics-port", str(self.metrics_port),
                    "--batch-idle-duration", "1s", "--batch-max-duration", "10s", "--log-level", "info",
                    "--disable-cluster-state-observability=false"]
        else:
            argv = [sys.executable, "-m", "karpy.cli", "controller", "--cloud-provider", "kwok",
                    "--kubeconfig", str(cluster.kubeconfig), "--cluster-name", "bench",
                    "--leader-election-namespace", "kube-system", "--bind-address", "127.0.0.1",
                    "--health-probe-port", str(self.health_port), "--metrics-port", str(self.metrics_port),
                    "--batch-idle-duration", "1s", "--batch-max-duration", "10s"]
        self.argv, self.env = argv, env
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.restarts = 0
        self._cpu_done = 0.0  # CPU seconds of processes that exited (restarted as kubelet would)
        self._cpu_last = 0.0
        self._rss_peak = 0.0

    def alive(self) -> None:
        """Sample the figures; if the process exited, count it and start it again, as the kubelet restarts a
        crashed controller pod."""
        if self.proc.poll() is None:
            self._cpu_last = self._cpu_now()
            self._rss_peak = max(self._rss_peak, self._rss_now())
            return
        self.restarts += 1
        self._cpu_done += self._cpu_last
        self._cpu_last = 0.0
        self.log.write(f"\n[bench] {self.kind} exited {self.proc.returncode}; restart {self.restarts}\n")
        self.log.flush()
        if self.restarts > 5:
            raise SystemExit(f"{self.kind} exited {self.restarts} times: {self.log_path}")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT, env=self.env)

    def ready(self, timeout: float = 120.0) -> None:
        import urllib.request
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.kind} exited {self.proc.returncode}: {self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"{self.kind} not ready in {timeout}s: {self.log_path.read_text()[-3000:]}")

    def _cpu_now(self) -> float:
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return self._cpu_last
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _rss_now(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def cpu_seconds(self) -> float:
        """CPU seconds of every process of this autoscaler so far (user + system, from /proc)."""
        self.alive()
        return self._cpu_done + self._cpu_last

    def rss_peak_mb(self) -> float:
        """The highest resident set (VmHWM) of any process of this autoscaler so far."""
        self.alive()
        return self._rss_peak

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()



class Observer:
    """Polls pods, nodes and NodeClaims; keeps a timeline and every NodeClaim name seen."""

    def __init__(self, cluster: realcluster.RealCluster, prices: dict[tuple[str, str], float]) -> None:
        self.cluster = cluster
        self.prices = prices
        self.t0 = time.time()
        self.timeline: list[dict[str, float]] = []
        self.claims_seen: set[str] = set()
        self.nodes: list[dict[str, Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.deleting = 0

    def sample(self, phase: str) -> None:
        self.pods = self.cluster.get_json("pods", "-n", NAMESPACE)["items"]
        self.nodes = [n for n in self.cluster.get_json("nodes")["items"]
                      if n["metadata"].get("labels", {}).get("karpenter.sh/nodepool") == NODEPOOL]
        claims = self.cluster.get_json("nodeclaims")["items"]
        self.claims_seen |= {c["metadata"]["name"] for c in claims}
        self.deleting = sum(1 for c in claims if c["metadata"].get("deletionTimestamp"))
        pending = sum(1 for p in self.pods if p.get("status", {}).get("phase") != "Running")
        unschedulable = sum(1 for p in self.pods if not p.get("spec", {}).get("nodeName") and any(
            c.get("reason") == "Unschedulable" for c in p.get("status", {}).get("conditions", [])))
        self.timeline.append({"t": round(time.time() - self.t0, 1), "pods": len(self.pods), "pending": pending,
                              "unschedulable": unschedulable, "nodes": len(self.nodes),
                              "cost": round(self.cost(), 4), "phase": ["burst", "scale-down", "drift"].index(phase)})

    def cost(self) -> float:
        total = 0.0
        for n in self.nodes:
            labels = n["metadata"].get("labels", {})
            total += self.prices.get((labels.get("node.kubernetes.io/instance-type", ""),
                                      labels.get("karpenter.sh/capacity-type", "")), 0.0)
        return total

    def all_running(self, count: int) -> bool:
        live = [p for p in self.pods if not p["metadata"].get("deletionTimestamp")]
        return len(live) == count and all(p.get("status", {}).get("phase") == "Running" for p in live)

    def pending_seconds(self) -> list[float]:
        out = []
        for p in self.pods:
            created = _ts(p["metadata"].get("creationTimestamp"))
            ready = next((_ts(c.get("lastTransitionTime")) for c in p.get("status", {}).get("conditions", [])
                          if c.get("type") == "Ready" and c.get("status") == "True"), None)
            if created is not None and ready is not None:
                out.append(max(0.0, ready - created))
        return out


def _quantile(xs: Sequence[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def wait(observer: Observer, auto: Autoscaler, phase: str, done: Callable[[], bool], timeout: float,
         interval: float = 2.0) -> float:
    start = time.time()
    while True:
        auto.alive()
        observer.sample(phase)
        if done():
            return time.time() - start
        if time.time() - start > timeout:
            return float("nan")
        time.sleep(interval)


def within(timeline: list[dict[str, float]], phase: int, start: float, cost: float) -> float:
    """Seconds from ``start`` until the $/h of ``phase`` first came down to ``cost`` (NaN: never)."""
    for point in timeline:
        if point["phase"] == phase and point["cost"] <= cost + 1e-9:
            return round(max(0.0, point["t"] - start), 1)
    return float("nan")


@contextmanager
def fresh_cluster(name: str, workdir: Path) -> Iterator[realcluster.RealCluster]:
    policy = workdir / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    cluster = realcluster.start(name, workdir, extra_args=["--kube-audit-policy", str(policy)])
    try:
        yield cluster
    finally:
        cluster.stop()


PHASES = ("burst", "scale-down", "drift")


def run_one(kind: str, size: int, seed: int, module: Path, prices: dict[tuple[str, str], float],
            settle: float, timeout: float, budget: str = "10%",
            phases: Sequence[str] = PHASES) -> dict[str, Any]:
    """One autoscaler through ``phases`` (in order, burst always first) on a fresh cluster; ``budget``: the
    NodePool's disruption budget (``nodes``), 10% as Karpenter's default."""
    workdir = Path(tempfile.mkdtemp(prefix=f"vs-{kind}-"))
    with fresh_cluster(f"vs-{kind}", workdir) as cluster:
        cluster.apply(karpenter_crds(module))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/nodepools.karpenter.sh",
                        "crd/nodeclaims.karpenter.sh", "crd/kwoknodeclasses.karpenter.kwok.sh")
        cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                       {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                        "metadata": {"name": "default"}}, nodepool(budget=budget)])
        auto = Autoscaler(kind, cluster, workdir)
        try:
            auto.ready()
            deployments = workload(size, seed)
            obs = Observer(cluster, prices)
            cpu0 = auto.cpu_seconds()
            cluster.apply(deployments)
            result: dict[str, Any] = {"autoscaler": kind, "pods": size, "seed": seed,
                                      "deployments": len(deployments)}
            result["burst_s"] = wait(obs, auto, "burst", lambda: obs.all_running(size), timeout)
            pend = obs.pending_seconds()
            result.update(pending_p50_s=_quantile(pend, 0.5), pending_p95_s=_quantile(pend, 0.95),
                          burst_nodes=len(obs.nodes), burst_cost=round(obs.cost(), 4),
                          burst_claims=len(obs.claims_seen),
                          burst_nodeclaims=claim_records(cluster, obs.t0))
            remaining = size
            if "scale-down" in phases:
                remaining = scale_down(cluster, obs, auto, deployments, result, settle, timeout)
            if "drift" in phases:
                drift(cluster, obs, auto, remaining, result, budget, timeout)
            result.update(claims_launched=len(obs.claims_seen))
            result.update(cpu_s=round(auto.cpu_seconds() - cpu0, 1), peak_rss_mb=round(auto.rss_peak_mb(), 1),
                          restarts=auto.restarts)
        finally:
            auto.stop()
        agent = "karpenter" if kind == "karpenter" else "karpy"
        result["api_requests"], result["api_requests_by"] = api_requests(cluster, agent)
        result["timeline"] = obs.timeline
        events = cluster.get_json("events", "-A")["items"]
        result["events_by_reason"] = _count(e.get("reason", "") for e in events
                                            if (e.get("source", {}).get("component") or e.get("reportingComponent")
                                                or "") in ("karpenter", "karpy"))
        result["log"] = str(auto.log_path)
    return result


def scale_down(cluster: realcluster.RealCluster, obs: Observer, auto: Autoscaler, deployments: list[dict[str, Any]],
               result: dict[str, Any], settle: float, timeout: float) -> int:
    """Every Deployment to 30 %, until the node set settles; the pods left."""
    scaled = [{**d, "spec": {**d["spec"], "replicas": max(1, round(d["spec"]["replicas"] * 0.3))}}
              for d in deployments]
    remaining = sum(int(d["spec"]["replicas"]) for d in scaled)
    cluster.apply(scaled)
    scaled_at = time.time()
    last: dict[str, Any] = {"names": None, "since": scaled_at}

    def settled() -> bool:
        # Converged: every pod Running, no NodeClaim being deleted, and the node set unchanged for
        # ``settle`` seconds, counted from no earlier than consolidateAfter after the scale-down.
        names = tuple(sorted(n["metadata"]["name"] for n in obs.nodes))
        if names != last["names"] or obs.deleting:
            last.update(names=names, since=time.time())
        quiet_from = max(last["since"], scaled_at + CONSOLIDATE_AFTER_S)
        return obs.all_running(remaining) and time.time() - quiet_from >= settle

    t = wait(obs, auto, "scale-down", settled, timeout)
    result.update(scale_down_s=round(last["since"] - scaled_at, 1) if not math.isnan(t) else t,
                  scale_down_nodes=len(obs.nodes),
                  scale_down_cost=round(obs.cost(), 4),
                  scale_down_within_5pct_s=within(obs.timeline, 1, scaled_at - obs.t0, obs.cost() * 1.05),
                  scale_down_all_running=obs.all_running(remaining))
    return remaining


def drift(cluster: realcluster.RealCluster, obs: Observer, auto: Autoscaler, remaining: int,
          result: dict[str, Any], budget: str, timeout: float) -> None:
    """A NodePool template label change, until every node carries it and every pod is Running."""
    claims_before_drift = len(obs.claims_seen)
    cluster.apply([nodepool(version="2", budget=budget)])

    def drifted() -> bool:
        return (bool(obs.nodes) and all(n["metadata"]["labels"].get("bench/version") == "2" for n in obs.nodes)
                and obs.all_running(remaining))

    result.update(drift_s=wait(obs, auto, "drift", drifted, timeout), drift_nodes=len(obs.nodes),
                  drift_cost=round(obs.cost(), 4), drift_claims=len(obs.claims_seen) - claims_before_drift)



def parse_phases(text: str) -> tuple[str, ...]:
    """``--phases``: a comma list of PHASES; burst is always run (the others start from its cluster)."""
    asked = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in asked if p not in PHASES]
    if unknown:
        raise SystemExit(f"--phases: expected some of {', '.join(PHASES)}, found {', '.join(unknown)}")
    return tuple(p for p in PHASES if p in asked or p == "burst")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,5000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", choices=AUTOSCALERS)
    ap.add_argument("--settle", type=float, default=60.0, help="seconds without a node change that end scale-down")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds each phase may take")
    ap.add_argument("--budget", default="10%", help="the NodePool's disruption budget (nodes), 10%% by default")
    ap.add_argument("--phases", default=",".join(PHASES),
                    help="the phases to run, burst always first: burst, burst,scale-down or burst,scale-down,drift")
    ap.add_argument("--json", dest="json_path")
    ap.add_argument("--report")
    args = ap.parse_args(argv)
    phases = parse_phases(args.phases)
    missing = realcluster.missing_binaries((*realcluster.BINARIES, "karpenter-kwok"))
    if missing:
        realcluster.build()
    module = karpenter_module()
    prices = kwok_prices(module)
    runs = []
    for size in (int(s) for s in args.sizes.split(",")):
        for rep in range(args.repeats):
            for kind in AUTOSCALERS if args.only is None else (args.only,):
                r = run_one(kind, size, args.seed, module, prices, args.settle, args.timeout, args.budget,
                            phases)
                r["repeat"] = rep
                runs.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "timeline"}), flush=True)
    table = summarise(runs)
    print_table(table, args.repeats, karpenter_version())
    print_api_breakdown(runs)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"runs": runs, "medians": table}, indent=1))
    if args.report:
        report(runs, Path(args.report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
