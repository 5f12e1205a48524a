"""Consolidation benchmark: Karpenter's performance "basic" shape on the AWS catalog, scaled down.

Two Deployments, 500 pods of 900m / 3100Mi and 500 pods of 3500m / 28Gi, are provisioned by
karpy in the simulator (virtual time); then both are scaled to 350 and the simulation runs until
it is quiet (no disruption command for ``--quiet`` simulated seconds and nothing pending). Prints:

* $/h after provisioning (before the scale-down) and at the end;
* $/h of a fresh provisioning of the 700 remaining pods by the scheduling core alone, on an empty
  cluster, and the ratio end / fresh (target: <= 1.05);
* the simulated time from the scale-down to the last disruption (target: < 10 min) and the
  number of nodes disrupted.

``--shape do-not-disrupt`` adds 100 pods of 900m / 3100Mi annotated ``karpenter.sh/do-not-disrupt``
(never scaled) and checks that no node running one of them is ever disrupted.

Run: ``python bench/consolidation.py [--shape basic|do-not-disrupt] [--budget 10%] [--seed 1]``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from karpy import clock
from karpy.api import labels, nodepool, pod
from karpy.disruption import controller as disruption
from karpy.kube import interface
from karpy.provisioning import scheduler
from karpy.simulator import engine, scenario

SMALL = ("900m", "3100Mi")
LARGE = ("3500m", "28Gi")


def scenario_text(shape: str, budget: str, seed: int) -> str:
    deployments = [("small", 500, SMALL, False), ("large", 500, LARGE, False)]
    if shape == "do-not-disrupt":
        deployments.append(("protected", 100, SMALL, True))
    docs: list[dict[str, Any]] = [
        {"apiVersion": "karpy.io/v1alpha1", "kind": "Scenario", "metadata": {"name": f"consolidation-{shape}"},
         "spec": {"cloud": {"provider": "aws", "region": "us-east-1",
                            "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
                  "settings": {"clusterName": "bench"}, "until": "24h", "seed": seed, "steps": []}},
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-bench",
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
         "spec": {"template": {"spec": {
             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
             "requirements": [
                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                 {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                 {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                 {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]}]}},
             "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                            "budgets": [{"nodes": budget}]}}},
    ]
    for name, replicas, (cpu, memory), protected in deployments:
        meta: dict[str, Any] = {"labels": {"app": name}}
        if protected:
            meta["annotations"] = {labels.DO_NOT_DISRUPT: "true"}
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": name, "namespace": "default"},
                     "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                              "template": {"metadata": meta, "spec": {"containers": [
                                  {"name": "app", "image": "app:1",
                                   "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}})
    return yaml.safe_dump_all(docs, sort_keys=False)


class Driver:
    """The engine's loop, run to a condition instead of a fixed end."""

    def __init__(self, text: str) -> None:
        self.sim = engine.Simulation(scenario.load_text(text), sample_interval=86400)
        self.sim.wire()
        ctrl = disruption.registered(self.sim.manager)
        assert ctrl is not None
        self.ctrl = ctrl

    @property
    def t(self) -> float:
        return self.sim.clock.now() - self.sim.start

    def step(self, limit: float) -> None:
        due = self.sim.manager.next_due()
        nxt = self.sim.start + limit if due is None else min(due, self.sim.start + limit)
        if nxt > self.sim.clock.now():
            self.sim.clock.set(nxt)
        self.sim.bridge.settle()
        self.sim.manager.run_due()
        self.sim.bridge.settle()

    def pending(self) -> int:
        return sum(1 for p in self.sim.cluster.objects("Pod")
                   if not (p.get("spec") or {}).get("nodeName") or (p.get("status") or {}).get("phase") != "Running")

    def last_disruption(self) -> float:
        times = [e.started for e in self.ctrl.orchestrator.history.executed]
        times += [e.started for e, _ in self.ctrl.orchestrator.history.failed]
        return max(times, default=0.0) - self.sim.start

    def run_until_quiet(self, quiet: float, limit: float) -> None:
        while self.t < limit:
            self.step(limit)
            busy = self.ctrl.pending is not None or self.ctrl.orchestrator.busy() or self.pending() > 0
            if not busy and self.t - max(self.last_disruption(), self.mark) >= quiet:
                return

    mark = 0.0

    def cost(self) -> float:
        return self.sim.bridge.cost_per_hour()

    def nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.sim.cluster.objects("Node") if interface.labels_of(n).get(labels.NODEPOOL)]

    def nodes_running(self, app: str) -> set[str]:
        return {str(p["spec"]["nodeName"]) for p in self.sim.cluster.objects("Pod")
                if interface.labels_of(p).get("app") == app and (p.get("spec") or {}).get("nodeName")}


def fresh_cost(d: Driver, counts: dict[str, tuple[int, tuple[str, str]]]) -> tuple[float, int]:
    """$/h and node count of the scheduling core placing the pods on an empty cluster."""
    pool = nodepool.NodePool.from_manifest(d.sim.cluster.get("NodePool", "default"))
    types = {pool.name: d.sim.cloud.get_instance_types(pool)}
    pods = [pod.build(f"{app}-{i}", namespace="default", requests={"cpu": cpu, "memory": memory})
            for app, (n, (cpu, memory)) in counts.items() for i in range(n)]
    res = scheduler.Scheduler([pool], types).solve(pods)
    assert not res.errors, res.errors
    return res.cost(), len(res.new_claims)


def run(shape: str, budget: str, seed: int, quiet: float) -> bool:
    start = clock.perf_counter()
    d = Driver(scenario_text(shape, budget, seed))
    d.run_until_quiet(quiet, 3 * 3600)
    before, nodes_before = d.cost(), len(d.nodes())
    provisioned_at = d.t
    protected = d.nodes_running("protected") if shape == "do-not-disrupt" else set()
    commands_before = len(d.ctrl.orchestrator.history.executed)
    disrupted_before = sum(len(e.candidate_names) for e in d.ctrl.orchestrator.history.executed)
    for name in ("small", "large"):
        d.sim.cluster.patch("Deployment", name, {"spec": {"replicas": 350}}, "default")
    d.mark = d.t
    d.run_until_quiet(quiet, provisioned_at + 6 * 3600)
    after, nodes_after = d.cost(), len(d.nodes())
    executed = d.ctrl.orchestrator.history.executed[commands_before:]
    disrupted = [name for e in executed for name in e.candidate_names]
    kinds: dict[str, int] = {}
    for e in executed:
        key = f"{e.command.reason}/{e.command.method}/{e.consolidation_type or '-'}"
        kinds[key] = kinds.get(key, 0) + len(e.candidate_names)
    counts = {"small": (350, SMALL), "large": (350, LARGE)}
    if shape == "do-not-disrupt":
        counts["protected"] = (100, SMALL)
    fresh, fresh_nodes = fresh_cost(d, counts)
    converge = max(0.0, d.last_disruption() - d.mark)
    ratio = after / fresh if fresh else float("inf")
    print(f"shape={shape} budget={budget} seed={seed}")
    print(f"  provisioned: {nodes_before} nodes, ${before:.3f}/h (at {provisioned_at / 60:.1f} min simulated; "
          f"{disrupted_before} nodes disrupted while provisioning)")
    print(f"  after scale-down to 350+350: {nodes_after} nodes, ${after:.3f}/h")
    print(f"  fresh provisioning of the remaining pods: {fresh_nodes} nodes, ${fresh:.3f}/h")
    print(f"  ratio after/fresh: {ratio:.3f} (target <= 1.05)")
    print(f"  converged {converge / 60:.1f} simulated min after the scale-down (target < 10 min); "
          f"{len(disrupted)} nodes disrupted in {len(executed)} commands {kinds} "
          f"({len(d.ctrl.orchestrator.history.failed)} failed, {len(d.ctrl.dropped)} dropped at validation)")
    ok = converge < 600 and (ratio <= 1.05 or shape != "basic")  # protected nodes cannot be re-packed
    if shape == "do-not-disrupt":
        hit = sorted(protected & set(disrupted))
        still = protected <= {interface.name_of(n) for n in d.nodes()}
        print(f"  nodes running protected pods: {len(protected)}; disrupted: {len(hit)}; all still there: {still}")
        ok = ok and not hit and still
    print(f"  wall time {clock.perf_counter() - start:.1f}s")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=("basic", "do-not-disrupt", "both"), default="both")
    parser.add_argument("--budget", default="10%")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quiet", type=float, default=300.0, help="simulated seconds without disruption")
    args = parser.parse_args()
    shapes = ("basic", "do-not-disrupt") if args.shape == "both" else (args.shape,)
    ok = all([run(s, args.budget, args.seed, args.quiet) for s in shapes])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
