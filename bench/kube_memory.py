"""Speed of the in-memory cluster at simulator scale: create, list per node, patch, GC.

Creates N pods over N/100 nodes (one ReplicaSet per 100 pods), lists every node's pods through
the ``spec.nodeName`` index, lists pending pods, patches every pod's status, and deletes the
ReplicaSets so ownerReference collection removes the pods. Prints seconds per phase.

Run: ``python bench/kube_memory.py [--pods 30000]``.
"""

from __future__ import annotations

import argparse
from typing import Any

from karpy import clock
from karpy.kube import interface, memory


def pod(name: str, node: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [interface.owner_reference(owner)],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=30_000)
    args = parser.parse_args()
    cluster = memory.InMemoryCluster(clock.VirtualClock())
    nodes = max(1, args.pods // 100)
    timings: list[tuple[str, float]] = []

    start = clock.perf_counter()
    owners = [
        cluster.create({"kind": "ReplicaSet", "metadata": {"name": f"rs-{i}"}, "spec": {"replicas": 100}})
        for i in range(nodes)
    ]
    for i in range(args.pods):
        cluster.create(pod(f"p-{i}", f"node-{i % nodes}", owners[i // 100 % nodes]))
    timings.append((f"create {args.pods} pods", clock.perf_counter() - start))

    start = clock.perf_counter()
    total = sum(len(cluster.list("Pod", field_selector=f"spec.nodeName=node-{n}")) for n in range(nodes))
    timings.append((f"list pods of each of {nodes} nodes ({total} pods)", clock.perf_counter() - start))

    start = clock.perf_counter()
    for _ in range(100):
        cluster.list("Pod", field_selector="spec.nodeName=")
    timings.append(("list pending pods x100", clock.perf_counter() - start))

    start = clock.perf_counter()
    for i in range(args.pods):
        cluster.patch_status("Pod", f"p-{i}", {"status": {"podIP": f"10.0.{i // 256 % 256}.{i % 256}"}})
    timings.append((f"patch_status {args.pods} pods", clock.perf_counter() - start))

    start = clock.perf_counter()
    for i in range(nodes):
        cluster.delete("ReplicaSet", f"rs-{i}", "default")
    timings.append((f"delete {nodes} ReplicaSets, collect pods", clock.perf_counter() - start))
    assert cluster.list("Pod") == []

    for label, seconds in timings:
        print(f"{label:<55} {seconds:8.3f} s")


if __name__ == "__main__":
    main()
