"""The real-time driver: the same Manager on the wall clock, cloud calls on a bounded pool, leader-only.

These run on the in-memory cluster behind :class:`karpy.kube.deferred.DeferredWatches` (watch handlers run
only on the loop thread that pumps, as with the Kubernetes adapter: a launch's NodeClaim writes are made on
the pool's threads).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from karpy import clock, operator, settings
from karpy.api import nodeclaim
from karpy.cloudprovider.fake import instancetypes
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.controllers import cloudcalls, leader, realtime, runtime
from karpy.kube import deferred, interface, memory

from . import builders as b


class SlowCloud(b.Bridge):
    """The simulated cloud behind a latency: each create/delete sleeps, then runs serialized."""

    def __init__(self, cloud: fake_provider.SimulatedCloud, latency: float) -> None:
        super().__init__(cloud, None)
        self.latency = latency
        self.lock = threading.Lock()
        self.concurrent = 0
        self.max_concurrent = 0
        self.threads: set[str] = set()

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        with self.lock:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
            self.threads.add(threading.current_thread().name)
        time.sleep(self.latency)
        with self.lock:
            self.concurrent -= 1
            return super().create(claim)

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        time.sleep(self.latency)
        with self.lock:
            super().delete(claim)


def wall_world(latency: float, workers: int = cloudcalls.DEFAULT_WORKERS) -> tuple[
        memory.InMemoryCluster, runtime.Manager, SlowCloud, cloudcalls.Pool, realtime.Driver]:
    wall = clock.WallClock()
    cluster = memory.InMemoryCluster(wall, rng=random.Random(1))
    pumped = deferred.DeferredWatches(cluster)
    driver_box: list[realtime.Driver] = []
    pool = cloudcalls.Pool(workers, wake=lambda: driver_box[0].wake() if driver_box else None)
    manager = runtime.Manager(pumped, wall, calls=pool)
    cloud = SlowCloud(fake_provider.SimulatedCloud(wall, random.Random(1), catalog=instancetypes.benchmark(8),
                                                   cluster_name="test"), latency)
    operator.register_all(manager, pumped, cloud, wall, settings.Settings(
        cluster_name="test", batch_idle_duration=0.05, batch_max_duration=0.2))
    driver = realtime.Driver(manager, wall, pool=pool, pump=pumped)
    driver_box.append(driver)
    return cluster, manager, cloud, pool, driver


def wait_for(predicate: Any, timeout: float) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not reached within {timeout}s")
        time.sleep(0.02)
    return time.monotonic() - start


def launched(cluster: memory.InMemoryCluster) -> int:
    return sum(1 for c in cluster.list("NodeClaim") if (c.get("status") or {}).get("providerID"))


def test_a_hundred_nodeclaims_launch_in_parallel_and_the_loop_applies_every_result() -> None:
    cluster, _manager, cloud, pool, driver = wall_world(latency=1.0)
    cluster.create(b.nodeclass_manifest())
    cluster.create(b.nodepool_manifest())
    for i in range(100):  # 7 cpu each: one 8-vCPU node per pod
        cluster.create(b.pending_pod(f"big-{i}", cpu="7"))
    loop = threading.Thread(target=driver.run, daemon=True)
    loop.start()
    try:
        elapsed = wait_for(lambda: launched(cluster) == 100, timeout=30)
    finally:
        driver.stop()
        loop.join(10)
    assert not loop.is_alive()
    assert cloud.max_concurrent >= 50, cloud.max_concurrent  # launched side by side, not one after another
    assert pool.max_in_flight >= 50
    assert elapsed < 100 * 1.0 / 4  # serial launches would take 100 s
    assert all(t.startswith("karpy-cloud") for t in cloud.threads)
    claims = cluster.list("NodeClaim")
    assert len({c["status"]["providerID"] for c in claims}) == 100
    assert all(b.condition(c, "Launched") == "True" for c in claims)
    assert cloud.creates == 100  # each NodeClaim launched exactly once


def test_sigterm_waits_for_in_flight_launches_and_writes_their_results() -> None:
    cluster, _manager, cloud, pool, driver = wall_world(latency=1.0)
    cluster.create(b.nodeclass_manifest())
    cluster.create(b.nodepool_manifest())
    for i in range(3):
        cluster.create(b.pending_pod(f"big-{i}", cpu="7"))
    loop = threading.Thread(target=driver.run, daemon=True)
    loop.start()
    wait_for(lambda: pool.in_flight() == 3, timeout=10)
    driver.stop()  # what the SIGTERM handler does
    loop.join(10)
    assert not loop.is_alive()
    assert launched(cluster) == 3  # finished and written, not abandoned
    assert cloud.creates == 3


def test_only_the_leader_reconciles_and_the_follower_takes_over_when_the_leader_dies() -> None:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock, rng=random.Random(1))
    cloud = b.Bridge(fake_provider.SimulatedCloud(vclock, random.Random(1), catalog=instancetypes.benchmark(4),
                                                  cluster_name="test"), None)
    drivers = []
    for identity in ("a", "b"):
        manager = runtime.Manager(cluster, vclock)
        operator.register_all(manager, cluster, cloud, vclock, settings.Settings(cluster_name="test"))
        elector = leader.LeaderElector(cluster, vclock, leader.Config(namespace="kube-system", identity=identity))
        drivers.append(realtime.Driver(manager, vclock, elector=elector))
    a, b_ = drivers
    cluster.create(b.nodeclass_manifest())
    cluster.create(b.nodepool_manifest())

    def run(seconds: float, *ds: realtime.Driver) -> None:
        end = vclock.now() + seconds
        while vclock.now() < end:
            for d in ds:
                d.step()
            vclock.advance(0.25)

    run(5, a, b_)
    assert a.is_leader() and not b_.is_leader()
    cluster.create(b.pending_pod("web"))
    run(5, a, b_)
    assert len(cluster.list("NodeClaim")) == 1
    assert b_.reconciles == 0 and a.reconciles > 0
    assert b_.manager.pending() > 0  # the follower keeps its queue warm, but does not run it

    died = vclock.now()  # a stops: the process was killed
    cluster.create(b.pending_pod("api", cpu="3"))
    while not b_.is_leader():
        run(0.25, b_)
    assert vclock.now() - died <= leader.LEASE_DURATION + leader.RETRY_PERIOD + 0.5
    run(3, b_)
    assert b_.reconciles > 0
    assert len(cluster.list("NodeClaim")) == 2
    assert not a.is_leader()
    assert a.status().state == "leading" and b_.status().leader
    names = sorted(interface.name_of(c) for c in cluster.list("NodeClaim"))
    assert len(set(names)) == 2
