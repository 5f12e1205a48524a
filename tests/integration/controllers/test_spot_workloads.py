"""The watch-fed spot-share workloads: what ``spot_share.read`` finds, without listing every workload."""

from __future__ import annotations

import random
from typing import Any

from karpy import clock
from karpy.controllers import spot_workloads
from karpy.kube import memory
from karpy.provisioning import spot_share


def _workload(kind: str, name: str, share: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if share is not None:
        meta["annotations"] = {spot_share.ANNOTATION: share}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
            "spec": {"replicas": 10, "selector": {"matchLabels": {"app": name}}}}


def _same(a: spot_share.Workloads, b: spot_share.Workloads) -> None:
    assert a.shares == b.shares
    assert sorted(i.message() for i in a.invalid) == sorted(i.message() for i in b.invalid)


def test_the_watched_workloads_are_what_a_full_read_finds_as_they_change() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock(), rng=random.Random(1))
    for i in range(50):
        cluster.create(_workload("Deployment", f"plain-{i}", None))
    cluster.create(_workload("Deployment", "web", "30"))
    cluster.create(_workload("StatefulSet", "db", "bad"))
    watched = spot_workloads.SpotWorkloads(cluster).start()
    _same(watched.read(), spot_share.read(cluster))
    assert set(watched.read().shares) == {("Deployment", "default", "web")}
    cluster.patch("Deployment", "plain-3", {"metadata": {"annotations": {spot_share.ANNOTATION: "50"}}}, "default")
    cluster.patch("Deployment", "web", {"metadata": {"annotations": {spot_share.ANNOTATION: None}}}, "default")
    cluster.delete("StatefulSet", "db", "default")
    _same(watched.read(), spot_share.read(cluster))
    assert set(watched.read().shares) == {("Deployment", "default", "plain-3")}


def test_reading_the_watched_workloads_lists_no_unannotated_one() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock(), rng=random.Random(1))
    for i in range(200):
        cluster.create(_workload("Deployment", f"plain-{i}", None))
    watched = spot_workloads.SpotWorkloads(cluster).start()
    before = cluster.scanned
    assert not watched.read()
    assert cluster.scanned == before
