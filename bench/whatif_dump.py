"""``karpy whatif`` on a big cluster dump: how long and how much memory loading it and answering take.

Generates (seeded) a dump as ``kubectl get nodes,pods,nodepools,ec2nodeclasses,nodeclaims -A -o yaml``
writes it: one ``kind: List``, ``--nodes`` nodes (default 3,000: a third unmanaged m5.xlarge, the rest
Karpenter's NodeClaims of c/m/r types over three zones) and ``--pods`` pods (default 30,000: Running on
the nodes, owned by ReplicaSets of 300 Deployments, with the server's metadata - uid, resourceVersion,
managedFields - statuses and conditions a real dump carries), about 50 MB. Then, in this process:

* ``load``: :func:`karpy.simulator.whatif_state.read` of the file's text (what ``karpy whatif`` does
  before it simulates): wall seconds and peak resident memory;
* ``whatif``: the whole :func:`karpy.simulator.whatif.run` for ``--for`` (default 15m) and its JSON
  answer: wall seconds and peak memory.

Issue 27's targets: a 50 MB dump loads in <= 10 s and <= 500 MB, whatif ends in <= 60 s.

Measured (``--dump`` of the default 64.6 MB dump, 2 cores, ``nice -n 10``, load average 11 to 17
from other work, so compare CPU seconds): load 9.6 CPU s (65.9 s wall), peak 370 MB; the whole
whatif 31.8 CPU s (253 s wall), peak 492 MB. Before (the same command on the branch point, load
average 11 to 14): load 69.9 CPU s (545 s wall), 2,673 MB; whatif 105.9 CPU s (646 s wall), 2,722 MB.
What changed: :mod:`karpy.api.yaml_events` (YAML built from libyaml's events, not PyYAML's node
graph), :func:`karpy.simulator.whatif_state.prune` (what the simulator never reads dropped as each
object is read), no deep copies, no garbage collection while reading.

Run: ``python bench/whatif_dump.py [--nodes 3000] [--pods 30000] [--keep FILE | --dump FILE] [--load-only]``
(``--dump`` reuses a dump an earlier ``--keep`` wrote; the counts printed are then the file's).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
from typing import Any

import yaml

from karpy import clock

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
TYPES = (("m5.xlarge", "4", "16Gi", "58"), ("c5.2xlarge", "8", "16Gi", "58"), ("r5.xlarge", "4", "32Gi", "58"),
         ("m5.2xlarge", "8", "32Gi", "58"))
T0 = "2026-01-01T00:00:00Z"


def _managed_fields(manager: str) -> list[dict[str, Any]]:
    return [{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {}}}}]


def _node(i: int, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any] | None]:
    managed = i % 3 != 0
    itype, cpu, mem, pods = TYPES[0] if not managed else rng.choice(TYPES)
    zone = ZONES[i % 3]
    name = f"ip-10-{i // 250}-{i % 250}-{rng.randint(1, 254)}.ec2.internal"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": itype, "topology.kubernetes.io/zone": zone,
              "topology.kubernetes.io/region": "us-east-1"}
    claim = None
    if managed:
        claim_name = f"default-{i:05d}"
        labels.update({"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
                       "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"})
        claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                 "metadata": {"name": claim_name, "labels": dict(labels), "uid": f"c-{i:08d}",
                              "creationTimestamp": T0, "resourceVersion": str(10_000 + i)},
                 "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                          "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                            "values": [itype]}]},
                 "status": {"nodeName": name, "providerID": f"aws:///{zone}/i-{i:017x}",
                            "capacity": {"cpu": cpu, "memory": mem, "pods": pods},
                            "conditions": [{"type": t, "status": "True", "lastTransitionTime": T0}
                                           for t in ("Launched", "Registered", "Initialized", "Ready")]}}
    else:
        labels["eks.amazonaws.com/nodegroup"] = "ng-1"
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "uid": f"n-{i:08d}", "creationTimestamp": T0,
                         "resourceVersion": str(20_000 + i), "annotations": {
                             "node.alpha.kubernetes.io/ttl": "0",
                             "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
                         "managedFields": _managed_fields("kubelet")},
            "spec": {"providerID": f"aws:///{zone}/i-{i:017x}"},
            "status": {"capacity": {"cpu": cpu, "memory": mem, "pods": pods, "ephemeral-storage": "20Gi"},
                       "allocatable": {"cpu": f"{int(cpu) * 1000 - 80}m", "memory": mem, "pods": pods,
                                       "ephemeral-storage": "18Gi"},
                       "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                                       "lastHeartbeatTime": T0, "lastTransitionTime": T0, "reason": f"Kubelet{t}",
                                       "message": f"kubelet reports {t}"}
                                      for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
                       "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                    "kubeletVersion": "v1.31.0", "containerRuntimeVersion": "containerd://1.7.0"}}}
    return node, claim


def _pod(i: int, node: str, rng: random.Random) -> dict[str, Any]:
    dep = f"svc-{i % 300:03d}"
    rs = f"{dep}-6d9f8b7c5d"
    name = f"{rs}-{rng.randrange(36 ** 5):05x}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": f"team-{i % 20}", "uid": f"p-{i:08d}",
                         "creationTimestamp": T0, "resourceVersion": str(100_000 + i),
                         "labels": {"app": dep, "pod-template-hash": "6d9f8b7c5d", "tier": "backend"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                              "uid": f"rs-{i % 300:06d}", "controller": True,
                                              "blockOwnerDeletion": True}],
                         "managedFields": _managed_fields("kube-controller-manager")},
            "spec": {"nodeName": node, "containers": [{
                "name": "app", "image": f"registry.example/{dep}:1.2.3", "ports": [{"containerPort": 8080}],
                "resources": {"requests": {"cpu": rng.choice(("100m", "250m", "500m")),
                                           "memory": rng.choice(("128Mi", "256Mi", "512Mi"))}}}],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]},
            "status": {"phase": "Running", "podIP": f"10.1.{i // 250 % 250}.{i % 250}", "startTime": T0,
                       "conditions": [{"type": t, "status": "True", "lastTransitionTime": T0}
                                      for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                       "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0,
                                              "image": f"registry.example/{dep}:1.2.3",
                                              "state": {"running": {"startedAt": T0}}}]}}


def dump_text(nodes: int, pods: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-big",
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "big"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "big"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
         "spec": {"template": {"spec": {
             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
             "requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                               "values": ["c", "m", "r"]}]}}}}]
    names = []
    for i in range(nodes):
        node, claim = _node(i, rng)
        items.append(node)
        names.append(node["metadata"]["name"])
        if claim is not None:
            items.append(claim)
    items.extend(_pod(i, names[i % nodes], rng) for i in range(pods))
    return yaml.dump({"apiVersion": "v1", "kind": "List", "items": items}, Dumper=yaml.CSafeDumper,
                     sort_keys=False)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """CPU seconds (user + system) this process has used: on a shared machine the wall time is not the cost."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _machine() -> str:
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.2f} (1 min) {five:.2f} (5 min)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--pods", type=int, default=30000)
    ap.add_argument("--for", dest="for_", default="15m")
    ap.add_argument("--keep", help="also keep the generated dump in this file")
    ap.add_argument("--dump", help="use this dump (written by an earlier --keep) instead of generating one")
    ap.add_argument("--load-only", action="store_true", help="time the load only")
    ap.add_argument("--generate-only", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.generate_only:  # in a child process: generating costs memory the measurement must not see
        with open(args.generate_only, "w", encoding="utf-8") as f:
            f.write(dump_text(args.nodes, args.pods))
        return 0
    path = args.dump or args.keep or os.path.join(tempfile.mkdtemp(prefix="whatif-dump-"), "cluster.yaml")
    if not args.dump:
        subprocess.run([sys.executable, __file__, "--nodes", str(args.nodes), "--pods", str(args.pods),
                        "--generate-only", path], check=True)
    size_mb = os.path.getsize(path) / 1e6
    base = _peak_mb()
    counts = "" if args.dump else f"{args.nodes} nodes, {args.pods} pods, "
    print(f"dump: {counts}{size_mb:.1f} MB ({path}); peak before loading {base:.0f} MB", flush=True)
    from karpy.api import duration
    from karpy.simulator import whatif, whatif_state

    print(f"machine: {_machine()}", flush=True)
    start, cpu = clock.perf_counter(), _cpu_s()
    with open(path, encoding="utf-8") as f:
        state = whatif_state.read([(path, f.read())])
    load_s = clock.perf_counter() - start
    print(f"load:   {load_s:6.1f} s  {_cpu_s() - cpu:6.1f} CPU s  peak {_peak_mb():6.0f} MB  "
          f"({len(state.nodes)} nodes, "
          f"{len(state.bound_pods) + len(state.pending_pods)} pods)  targets: <= 10 s "
          f"{'ok' if load_s <= 10 else 'MISS'}, <= 500 MB {'ok' if _peak_mb() <= 500 else 'MISS'}", flush=True)
    if args.load_only:
        return 0
    del state
    start, cpu = clock.perf_counter(), _cpu_s()
    with open(path, encoding="utf-8") as f:
        answer = whatif.run([(path, f.read())], for_seconds=duration.parse_duration(args.for_) or 900.0)
    with open(os.devnull, "w", encoding="utf-8") as sink:
        whatif.write_json(answer, sink)
    total = clock.perf_counter() - start
    print(f"whatif: {total:6.1f} s  {_cpu_s() - cpu:6.1f} CPU s  peak {_peak_mb():6.0f} MB  "
          f"(load, {args.for_} simulated, JSON answer)  "
          f"target: <= 60 s {'ok' if total <= 60 else 'MISS'}", flush=True)
    print(f"machine: {_machine()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
