"""Parallel launches under the real-time driver: N NodeClaims against a cloud with per-call latency.

karpy's controllers run on the wall clock (:mod:`karpy.controllers.realtime`) over the in-memory
cluster with adapter-like watch threading; each ``create`` of the simulated cloud sleeps
``--latency`` seconds (as CreateFleet takes ~1-3 s). N pending pods of 7 cpu each need N 8-vCPU
nodes. Prints, for the pool sizes given (1 = one launch at a time), the seconds from the pods'
creation until every NodeClaim is launched, the most launches in flight at once, and the speed-up
over the serial run.

Run: ``python bench/parallel_launch.py [--claims 100] [--latency 1.0] [--workers 1 100]``.
"""

from __future__ import annotations

import argparse
import random
import threading
import time

from karpy import clock, operator, settings
from karpy.api import nodeclaim
from karpy.cloudprovider.fake import instancetypes
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.controllers import cloudcalls, realtime, runtime
from karpy.kube import deferred, memory
from karpy.simulator import cloud_bridge


class SlowCloud(cloud_bridge.CloudBridge):
    def __init__(self, cloud: fake_provider.SimulatedCloud, latency: float) -> None:
        super().__init__(cloud, None)
        self.latency = latency
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(self.latency)
        with self.lock:
            self.in_flight -= 1
            return super().create(claim)


def run(claims: int, latency: float, workers: int) -> tuple[float, int]:
    wall = clock.WallClock()
    inner = memory.InMemoryCluster(wall, rng=random.Random(1))
    cluster = deferred.DeferredWatches(inner)
    box: list[realtime.Driver] = []
    pool = cloudcalls.Pool(workers, wake=lambda: box[0].wake() if box else None)
    manager = runtime.Manager(cluster, wall, calls=pool)
    cloud = SlowCloud(fake_provider.SimulatedCloud(wall, random.Random(1), catalog=instancetypes.benchmark(8),
                                                   cluster_name="bench"), latency)
    operator.register_all(manager, cluster, cloud, wall, settings.Settings(
        cluster_name="bench", batch_idle_duration=0.05, batch_max_duration=0.2))
    driver = realtime.Driver(manager, wall, pool=pool, pump=cluster)
    box.append(driver)
    loop = threading.Thread(target=driver.run, daemon=True)
    loop.start()
    inner.create({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                  "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
                      "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})
    start = time.perf_counter()
    for i in range(claims):
        inner.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
                      "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "7"}}}]},
                      "status": {"phase": "Pending", "conditions": [
                          {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    while sum(1 for c in inner.list("NodeClaim") if (c.get("status") or {}).get("providerID")) < claims:
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    driver.stop()
    loop.join(30)
    return elapsed, cloud.max_in_flight


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=100)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 100])
    args = ap.parse_args()
    serial: float | None = None
    print(f"{args.claims} NodeClaims, {args.latency:g}s per launch")
    for workers in args.workers:
        elapsed, peak = run(args.claims, args.latency, workers)
        if workers == 1:
            serial = elapsed
        speedup = f", {serial / elapsed:.1f}x the serial run" if serial and workers != 1 else ""
        print(f"pool of {workers:>3}: all launched in {elapsed:6.2f}s, at most {peak} in flight{speedup}")


if __name__ == "__main__":
    main()
