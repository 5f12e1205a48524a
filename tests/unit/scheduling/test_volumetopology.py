"""Volume topology (issue 12 item 6): a pod's claims become node requirements, as Karpenter's
VolumeTopology does, or a reason the pod cannot be scheduled."""

from __future__ import annotations

from typing import Any

from karpy.api import pod
from karpy.provisioning import podgroups
from karpy.scheduling import volumetopology as vt

ZONE = "topology.kubernetes.io/zone"


def _pod(*claims: str, node_selector: dict[str, str] | None = None) -> pod.Pod:
    spec: dict[str, Any] = {"containers": [{"name": "app"}],
                            "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return pod.Pod.from_manifest({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": "db-0", "namespace": "default"}, "spec": spec})


def _pvc(name: str, *, volume: str = "", storage_class: str = "", bound: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume and bound:
        meta["annotations"] = {vt.BIND_COMPLETED: "yes"}
    spec: dict[str, Any] = {"storageClassName": storage_class}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def _pv(name: str, *terms: list[dict[str, Any]], local: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": t} for t in terms]}}}
    if local:
        spec["local"] = {"path": "/mnt/disk"}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def _class(name: str, mode: str, *zones: list[str]) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "volumeBindingMode": mode,
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": z}]} for z in zones]}


def _zone(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _zones_allowed(p: pod.Pod) -> list[set[str]]:
    """Per required term of the pod, the zones it admits."""
    out = []
    for term in p.node_affinity.required if p.node_affinity else ():
        allowed: set[str] | None = None
        for e in term.match_expressions:
            if e.key == ZONE:
                allowed = set(e.values) if allowed is None else allowed & set(e.values)
        out.append(allowed if allowed is not None else {"*"})
    return out


def test_a_bound_volumes_node_affinity_terms_become_alternatives() -> None:
    vols = vt.Volumes.of([_pvc("data", volume="pv-1")],
                         [_pv("pv-1", [_zone(ZONE, "a")], [_zone(ZONE, "b")])], [])
    (out,), errors = vt.apply([_pod("data")], vols)
    assert not errors
    assert _zones_allowed(out) == [{"a"}, {"b"}]


def test_two_volumes_keep_only_the_combinations_that_can_meet() -> None:
    vols = vt.Volumes.of([_pvc("one", volume="pv-1"), _pvc("two", storage_class="wffc")],
                         [_pv("pv-1", [_zone(ZONE, "a")], [_zone(ZONE, "b")])],
                         [_class("wffc", vt.WAIT_FOR_FIRST_CONSUMER, ["b", "c"])])
    (out,), _ = vt.apply([_pod("one", "two")], vols)
    assert _zones_allowed(out) == [{"b"}]


def test_the_pods_own_selector_stays_and_a_conflict_leaves_no_zone() -> None:
    vols = vt.Volumes.of([_pvc("data", volume="pv-1")], [_pv("pv-1", [_zone(ZONE, "b")])], [])
    (out,), _ = vt.apply([_pod("data", node_selector={ZONE: "a"})], vols)
    group = podgroups.make_group([out])
    assert group.strict_requirements()[ZONE].is_empty()


def test_a_local_volumes_hostname_is_ignored() -> None:
    vols = vt.Volumes.of([_pvc("data", volume="pv-1")],
                         [_pv("pv-1", [_zone("kubernetes.io/hostname", "old-node"), _zone(ZONE, "a")]),
                          ], [])
    vols_local = vt.Volumes.of([_pvc("data", volume="pv-1")],
                               [_pv("pv-1", [_zone("kubernetes.io/hostname", "old-node"), _zone(ZONE, "a")],
                                    local=True)], [])
    (kept,), _ = vt.apply([_pod("data")], vols)
    (local,), _ = vt.apply([_pod("data")], vols_local)
    assert any(e.key == "kubernetes.io/hostname" for e in kept.node_affinity.required[0].match_expressions)  # type: ignore[union-attr]
    assert [e.key for e in local.node_affinity.required[0].match_expressions] == [ZONE]  # type: ignore[union-attr]


def test_claims_that_cannot_be_used_give_karpenters_reason() -> None:
    classes = [_class("immediate", vt.IMMEDIATE, ["a"])]
    cases = {
        "missing": ([], "persistentvolumeclaim default/missing not found"),
        "unbound-immediate": ([_pvc("unbound-immediate", storage_class="immediate")], vt.UNBOUND_IMMEDIATE),
        "no-class": ([_pvc("no-class")], "must define a storage class"),
        "half-bound": ([_pvc("half-bound", volume="pv-1", bound=False)], vt.BIND_COMPLETED),
        "lost-pv": ([_pvc("lost-pv", volume="pv-gone")], "persistentvolume pv-gone not found"),
    }
    for claim, (pvcs, reason) in cases.items():
        out, errors = vt.apply([_pod(claim)], vt.Volumes.of(pvcs, [_pv("pv-1", [_zone(ZONE, "a")])], classes))
        assert out == []
        assert reason in errors["default/db-0"], (claim, errors)


def test_pods_without_claims_are_returned_unchanged() -> None:
    p = pod.Pod.from_manifest({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                               "spec": {"containers": [{"name": "app"}]}})
    out, errors = vt.apply([p], vt.Volumes())
    assert out == [p] and not errors
    assert not vt.needs_volumes([p])
