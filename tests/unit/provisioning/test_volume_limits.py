"""CSI volume attach limits on new, in-flight and existing bins (issue 23 section 7;
kubernetes-sigs/karpenter#1748): a driver's attach count is a scheduling dimension."""

from __future__ import annotations

import dataclasses
from typing import Any

from karpy.api import pod, quantity
from karpy.provisioning import scheduler, volume_limits
from karpy.scheduling import volumetopology

from . import builders as b

EBS = "ebs.csi.aws.com"
OTHER = "example.csi.io"


def _db(i: int, *claims: str) -> pod.Pod:
    names = claims or (f"data-db-{i}",)
    return pod.Pod.from_manifest({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"db-{i}", "namespace": "default"},
        "spec": {"containers": [{"name": "db", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                 "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in names]}})


def _vols(claims: list[str], provisioner: str = EBS) -> volumetopology.Volumes:
    pvcs = [{"metadata": {"name": c, "namespace": "default"}, "spec": {"storageClassName": "disk"}} for c in claims]
    return volumetopology.Volumes.of(pvcs, [], [{"metadata": {"name": "disk"}, "provisioner": provisioner,
                                                 "volumeBindingMode": "WaitForFirstConsumer"}])


def _typed(name: str, limit: int | None, *, cpu: float = 16, price: float | None = None) -> Any:
    t = b.make_type(name, cpu=cpu, memory_gi=64, price=price)
    return dataclasses.replace(t, volume_limits={} if limit is None else {EBS: limit})


def _solve(pods: list[pod.Pod], vols: volumetopology.Volumes, types: list[Any],
           existing: list[Any] | None = None, csinodes: dict[str, dict[str, int]] | None = None) -> Any:
    pods = volume_limits.with_requests(pods, vols)
    drivers = volume_limits.requested_drivers(pods)
    limited = volume_limits.TypeLimits().apply({"default": types}, drivers)
    nodes = volume_limits.with_node_limits(existing or [], drivers, vols, csinodes or {}, types)
    return scheduler.Scheduler([b.make_nodepool()], limited, nodes).solve(pods)


def _volumes_on(res: Any) -> list[int]:
    return sorted(len(c.pods) for c in res.new_claims)


def test_forty_one_volume_pods_need_several_new_nodeclaims_when_the_type_attaches_six() -> None:
    pods = [_db(i) for i in range(40)]
    res = _solve(pods, _vols([f"data-db-{i}" for i in range(40)]), [_typed("big", 6)])
    b.expect_all_placed(res, pods)
    assert len(res.new_claims) == 7
    assert max(_volumes_on(res)) <= 6


def test_without_a_limit_the_same_pods_share_one_nodeclaim() -> None:
    pods = [_db(i) for i in range(40)]
    res = _solve(pods, _vols([f"data-db-{i}" for i in range(40)]), [_typed("big", None)])
    assert len(res.new_claims) == 1


def test_a_nodeclaims_types_are_narrowed_to_those_whose_limit_holds_its_volumes() -> None:
    pods = [_db(i) for i in range(8)]
    cheap = _typed("cheap-few-slots", 2, price=0.1)
    roomy = _typed("roomy", 8, price=0.5)
    res = _solve(pods, _vols([f"data-db-{i}" for i in range(8)]), [cheap, roomy])
    b.expect_all_placed(res, pods)
    for c in res.new_claims:
        assert all((volume_limits.type_limit(t, EBS) or 0) >= len(c.pods) for t in c.instance_types)
        if len(c.pods) > 2:
            assert c.instance_type_names() == ["roomy"]


def test_a_nodeclaims_requests_leave_the_attach_count_out_when_stripped() -> None:
    pods = [_db(0)]
    res = _solve(pods, _vols(["data-db-0"]), [_typed("big", 6)])
    (claim,) = res.new_claims
    assert volume_limits.resource(EBS) in claim.requests
    assert volume_limits.without(claim.requests).keys() == {"cpu", "memory", "pods"}


def test_an_existing_node_takes_only_what_its_csinode_count_leaves() -> None:
    running = [dataclasses.replace(_db(90), node_name="n1"), dataclasses.replace(_db(91), node_name="n1")]
    node = b.existing_node("n1", cpu=16, memory_gi=64, running=running)
    claims = [f"data-db-{i}" for i in (*range(5), 90, 91)]
    pods = [_db(i) for i in range(5)]
    res = _solve(pods, _vols(claims), [_typed("big", 30)], [node], {"n1": {EBS: 3}})
    b.expect_all_placed(res, pods)
    assert len(res.existing.get("n1", [])) == 1  # 3 slots, 2 held by its running pods
    assert sum(len(c.pods) for c in res.new_claims) == 4


def test_a_node_without_a_csinode_uses_its_instance_types_limit() -> None:
    node = b.existing_node("n1", cpu=16, memory_gi=64, labels={"node.kubernetes.io/instance-type": "big"})
    pods = [_db(i) for i in range(5)]
    res = _solve(pods, _vols([f"data-db-{i}" for i in range(5)]), [_typed("big", 2)], [node])
    assert len(res.existing.get("n1", [])) == 2


def test_an_in_flight_nodeclaim_not_launched_yet_holds_the_smallest_limit_of_its_allowed_types() -> None:
    flight = b.existing_node("claim-1", cpu=16, memory_gi=64, in_flight=True)
    pods = volume_limits.with_requests([_db(i) for i in range(6)], _vols([f"data-db-{i}" for i in range(6)]))
    types = [_typed("a", 3), _typed("b", 5), _typed("c", 1)]
    (bin_,) = volume_limits.with_node_limits([flight], (EBS,), _vols([]), {}, types, {"claim-1": ["a", "b"]})
    assert bin_.allocatable[volume_limits.resource(EBS)] == 3 * quantity.MILLI
    res = scheduler.Scheduler([b.make_nodepool()], volume_limits.TypeLimits().apply({"default": types}, (EBS,)),
                              [bin_]).solve(pods)
    assert len(res.existing["claim-1"]) == 3


def test_a_pod_counts_each_distinct_claim_once_per_driver() -> None:
    vols = volumetopology.Volumes.of(
        [{"metadata": {"name": n, "namespace": "default"}, "spec": {"storageClassName": cls}}
         for n, cls in (("a", "ebs"), ("b", "ebs"), ("c", "other"))]
        + [{"metadata": {"name": "bound", "namespace": "default"}, "spec": {"volumeName": "pv-1"}}],
        [{"metadata": {"name": "pv-1"}, "spec": {"csi": {"driver": EBS, "volumeHandle": "vol-1"}}}],
        [{"metadata": {"name": "ebs"}, "provisioner": EBS}, {"metadata": {"name": "other"}, "provisioner": OTHER}])
    (p,) = volume_limits.with_requests([_db(0, "a", "b", "c", "bound", "missing")], vols)
    assert p.requests[volume_limits.resource(EBS)] == 3 * quantity.MILLI
    assert p.requests[volume_limits.resource(OTHER)] == 1 * quantity.MILLI


def test_pods_without_csi_volumes_are_returned_as_they_are() -> None:
    plain = b.make_pod("web")
    assert volume_limits.with_requests([plain], _vols([]))[0] is plain


def test_type_copies_are_kept_between_runs_so_type_tables_are_reused() -> None:
    limits = volume_limits.TypeLimits()
    types = {"default": [_typed("big", 6)]}
    first = limits.apply(types, (EBS,))
    again = limits.apply(types, (EBS,))
    assert first["default"][0] is again["default"][0]
    assert first["default"][0].allocatable[volume_limits.resource(EBS)] == 6 * quantity.MILLI


def test_a_wildcard_limit_applies_to_any_driver_not_named() -> None:
    t = dataclasses.replace(b.make_type("k", cpu=4, memory_gi=8), volume_limits={"*": 32, EBS: 4})
    assert volume_limits.type_limit(t, EBS) == 4
    assert volume_limits.type_limit(t, OTHER) == 32


def test_csinode_counts_are_read_per_driver() -> None:
    out = volume_limits.csinode_limits([{"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": EBS, "nodeID": "i-1", "allocatable": {"count": 25}}, {"name": OTHER, "nodeID": "i-1"}]}}])
    assert out == {"n1": {EBS: 25}}
