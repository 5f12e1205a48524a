"""Parsing stored objects with shared-part caches gives exactly what the plain parsers give."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import errors, fields, meta, quantity, stored
from karpy.api import node as node_mod
from karpy.api import nodeclaim as nodeclaim_mod


def _claim(name: str, cpu: str = "4", zone: str = "z-1", status: str = "True") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "7",
                     "labels": {"karpenter.sh/nodepool": "default"}, "annotations": {"a": "b"},
                     "finalizers": ["karpenter.sh/termination"], "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone], "minValues": 1}],
            "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}},
            "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "init", "effect": "NoExecute"}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": f"aws:///{name}", "nodeName": f"node-{name}",
                   "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
                   "conditions": [{"type": "Launched", "status": status, "reason": "Launched", "message": "",
                                   "lastTransitionTime": "2026-01-01T00:00:05Z"}]},
    }


def _node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "resourceVersion": "3"},
        "spec": {"providerID": f"aws:///{name}", "taints": [{"key": "t", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": cpu, "memory": "16Gi"}, "allocatable": {"cpu": "3920m", "memory": "15Gi"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_a_stored_nodeclaim_parses_to_what_from_manifest_gives() -> None:
    obj = _claim("a")
    assert nodeclaim_mod.NodeClaim.from_stored(obj) == nodeclaim_mod.NodeClaim.from_manifest(obj)
    assert nodeclaim_mod.NodeClaim.from_stored(obj) == nodeclaim_mod.NodeClaim.from_manifest(obj)  # cached


def test_a_stored_node_parses_to_what_from_manifest_gives() -> None:
    obj = _node("n")
    assert node_mod.Node.from_stored(obj) == node_mod.Node.from_manifest(obj)
    assert node_mod.Node.from_stored(obj) == node_mod.Node.from_manifest(obj)


def test_claims_holding_the_same_parts_share_one_parse_of_each() -> None:
    a = _claim("a")
    b = _claim("b")
    b["spec"]["requirements"] = a["spec"]["requirements"]  # as the store shares equal parts
    b["status"]["capacity"] = a["status"]["capacity"]
    pa, pb = nodeclaim_mod.NodeClaim.from_stored(a), nodeclaim_mod.NodeClaim.from_stored(b)
    assert pa.spec.requirements is pb.spec.requirements
    assert pa.status.capacity is pb.status.capacity
    assert pb == nodeclaim_mod.NodeClaim.from_manifest(b)


def test_a_new_part_is_parsed_again_and_an_old_one_is_not_confused_with_it() -> None:
    a = _claim("a")
    first = nodeclaim_mod.NodeClaim.from_stored(a)
    changed = dict(a)
    changed["status"] = dict(a["status"], capacity={"cpu": "8", "memory": "16Gi", "pods": "110"},
                             conditions=[dict(a["status"]["conditions"][0], status="False")])
    second = nodeclaim_mod.NodeClaim.from_stored(changed)
    assert second.status.capacity["cpu"] == 8000 and first.status.capacity["cpu"] == 4000
    assert second.status.conditions[0].status == "False"
    assert second == nodeclaim_mod.NodeClaim.from_manifest(changed)


def test_a_bad_part_raises_every_time_and_is_never_remembered() -> None:
    bad = _claim("bad")
    bad["status"]["capacity"] = {"cpu": "lots"}
    for _ in range(2):
        with pytest.raises(errors.ValidationError):
            nodeclaim_mod.NodeClaim.from_stored(bad)
    bad_req = _claim("bad-req")
    bad_req["spec"]["requirements"] = [{"key": "k", "operator": "Sometimes"}]
    for _ in range(2):
        with pytest.raises(errors.ValidationError):
            nodeclaim_mod.NodeClaim.from_stored(bad_req)


def test_a_full_cache_starts_afresh_and_still_answers() -> None:
    cache: stored.ByIdentity[int] = stored.ByIdentity(size=2)
    parts = [{"i": i} for i in range(5)]
    for p in parts:
        assert cache.get(p, lambda p=p: p["i"]) == p["i"]  # type: ignore[misc]
    assert len(cache) <= 2
    assert [cache.get(p, lambda p=p: p["i"]) for p in parts] == [0, 1, 2, 3, 4]  # type: ignore[misc]


def test_metadata_with_another_resource_version_equals_dataclasses_replace() -> None:
    m = meta.ObjectMeta(name="n", namespace="ns", uid="u", labels={"a": "b"}, annotations={"c": "d"},
                        finalizers=("f",), owner_references=(meta.OwnerReference("v1", "Pod", "p", "u2", True),),
                        resource_version="1", generation=3, creation_timestamp=1.0, deletion_timestamp=2.0)
    assert m.with_resource_version("9") == dataclasses.replace(m, resource_version="9")
    assert len(dataclasses.fields(meta.ObjectMeta)) == 11  # with_resource_version passes every field


_QUANTITY = st.one_of(
    st.integers(min_value=0, max_value=10**6).map(str),
    st.builds(lambda n, s: f"{n}{s}", st.integers(min_value=0, max_value=4096),
              st.sampled_from(["m", "Ki", "Mi", "Gi", "k", "M", "G", ""])),
    st.sampled_from(["-1", "1.5.5", "lots", "", " 2 ", "1e3", "0.1m"]),
)


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # compare failures by type and message
        return (type(exc), str(exc))


@settings(max_examples=200, deadline=None)
@given(st.lists(_QUANTITY, min_size=1, max_size=4))
def test_quantity_texts_read_again_give_what_the_first_read_gave(texts: list[str]) -> None:
    for text in texts:
        quantity._MILLI_CACHE.pop(text, None)
        fresh = _outcome(quantity.parse_milli, text)
        assert _outcome(quantity.parse_milli, text) == fresh


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none()), max_size=5))
def test_a_string_list_reads_as_the_element_by_element_path_does(values: list[Any]) -> None:
    f = fields.Fields({"v": values}, "obj")
    expected: Any
    try:
        expected = []
        for i, v in enumerate(values):
            if v is None or isinstance(v, bool):
                raise errors.ValidationError.single("obj", f"v[{i}]", "a string", v)
            expected.append(str(v))
    except errors.ValidationError as exc:
        expected = str(exc)
    got: Any
    try:
        got = f.str_list("v")
    except errors.ValidationError as exc:
        got = str(exc)
    assert got == expected


@settings(max_examples=100, deadline=None)
@given(cpu=st.sampled_from(["1", "2", "4", "bad"]), zone=st.sampled_from(["z-1", "z-2"]),
       status=st.sampled_from(["True", "False", "Maybe"]), share=st.booleans())
def test_any_mix_of_shared_and_new_parts_parses_as_from_manifest(cpu: str, zone: str, status: str,
                                                                 share: bool) -> None:
    base = _claim("base")
    other = _claim("other", cpu=cpu, zone=zone, status=status)
    if share:
        other["spec"]["requirements"] = base["spec"]["requirements"] if zone == "z-1" else other["spec"][
            "requirements"]
    nodeclaim_mod.NodeClaim.from_stored(base)
    expected = _outcome(nodeclaim_mod.NodeClaim.from_manifest, copy.deepcopy(other))
    assert _outcome(nodeclaim_mod.NodeClaim.from_stored, other) == expected
    assert _outcome(nodeclaim_mod.NodeClaim.from_stored, other) == expected


def test_the_labels_requirements_decide_are_the_same_from_the_cache_and_fresh() -> None:
    from karpy.controllers import inflight
    from karpy.scheduling import requirements as reqs_mod

    claim = nodeclaim_mod.NodeClaim.from_stored(_claim("d"))
    fresh = reqs_mod.Requirements.from_node_selector_requirements(claim.spec.requirements).labels()
    assert inflight.decided_labels(claim.spec.requirements) == fresh
    assert inflight.decided_labels(claim.spec.requirements) == fresh  # remembered
    assert inflight.claim_labels(claim) == {**fresh, **claim.labels}
    as_list = list(claim.spec.requirements)  # mutable: never remembered by identity
    assert inflight.decided_labels(as_list) == fresh  # type: ignore[arg-type]


def test_an_expire_after_text_reads_the_same_every_time_and_a_bad_one_always_fails() -> None:
    for text, seconds in (("720h", 720 * 3600.0), ("Never", None), ("30m", 1800.0)):
        f = fields.Fields({"expireAfter": text}, "NodeClaim x", "spec")
        assert nodeclaim_mod.read_expire_after(f) == seconds
        assert nodeclaim_mod.read_expire_after(f) == seconds
    bad = fields.Fields({"expireAfter": "soon"}, "NodeClaim x", "spec")
    for _ in range(2):
        with pytest.raises(errors.ValidationError):
            nodeclaim_mod.read_expire_after(bad)


def test_metadata_timestamps_and_shared_labels_read_again_as_the_first_time() -> None:
    md = {"name": "a", "labels": {"app": "web"}, "creationTimestamp": "2026-01-01T00:00:07Z"}
    first = meta.ObjectMeta.parse(fields.Fields(md, "Pod a", "metadata"), namespaced=True, shared=True)
    again = meta.ObjectMeta.parse(fields.Fields(md, "Pod a", "metadata"), namespaced=True, shared=True)
    plain = meta.ObjectMeta.parse(fields.Fields(copy.deepcopy(md), "Pod a", "metadata"), namespaced=True)
    assert first == again == plain and again.labels is md["labels"]
    bad = {"name": "b", "creationTimestamp": "yesterday"}
    for _ in range(2):
        with pytest.raises(errors.ValidationError):
            meta.ObjectMeta.parse(fields.Fields(bad, "Pod b", "metadata"), namespaced=True)
    numbers = {"name": "c", "labels": {"n": 1}}  # not only strings: converted, never handed out as is
    got = meta.ObjectMeta.parse(fields.Fields(numbers, "Pod c", "metadata"), namespaced=True, shared=True)
    assert got.labels == {"n": "1"} and got.labels is not numbers["labels"]


def test_a_reader_names_its_object_only_when_a_message_needs_it() -> None:
    calls: list[int] = []

    def name() -> str:
        calls.append(1)
        return "NodeClaim lazy"

    f = fields.Fields({"spec": {"expireAfter": "720h", "n": "x"}}, name)
    assert f.sub("spec").str("expireAfter") == "720h" and calls == []
    with pytest.raises(errors.ValidationError, match="NodeClaim lazy"):
        f.sub("spec").int("n")
    named = len(calls)
    assert named >= 1 and f.obj == "NodeClaim lazy" and f.obj == "NodeClaim lazy"
    assert len(calls) == named + 1  # each reader names it at most once
    assert meta.reader("Pod", {"metadata": {"name": "a", "namespace": "b"}}).obj == "Pod b/a"
