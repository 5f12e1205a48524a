"""The unimplemented controller: an Event and a log line per object generation naming the field."""

from __future__ import annotations

import logging

import pytest

from karpy.api import unimplemented

from . import builders as b


def _events(w: b.World, name: str) -> list[str]:
    return [e["message"] for e in w.events("Unimplemented", name)]


def _ec2(name: str, rate: int) -> dict[str, object]:
    nc = b.nodeclass_manifest(name)
    nc["spec"]["blockDeviceMappings"] = [{"deviceName": "/dev/xvda", "rootVolume": True,
                                          "ebs": {"volumeSize": "20Gi", "snapshotID": "snap-0123456789abcdef0",
                                                  "volumeInitializationRate": rate}}]
    return nc


def test_an_unimplemented_field_gets_one_warning_event_per_generation(caplog: pytest.LogCaptureFixture) -> None:
    w = b.make_world()
    field = "spec.blockDeviceMappings[].ebs.volumeInitializationRate"
    with caplog.at_level(logging.WARNING, logger="karpy.unimplemented"):
        w.cluster.create(_ec2("fast", 200))
        w.run_for(1.0)
    (message,) = _events(w, "fast")
    assert message.startswith(f"EC2NodeClass fast: {field} is accepted but " + unimplemented.MESSAGE)
    assert any(field in r.getMessage() and unimplemented.MESSAGE in r.getMessage() for r in caplog.records)
    obj = w.cluster.get("EC2NodeClass", "fast")
    obj["metadata"].setdefault("labels", {})["team"] = "a"  # no new generation: no new event
    w.cluster.update(obj)
    w.run_for(60.0)
    assert sum(e.get("count", 1) for e in w.events("Unimplemented", "fast")) == 1
    obj = w.cluster.get("EC2NodeClass", "fast")
    obj["spec"]["blockDeviceMappings"][0]["ebs"]["volumeInitializationRate"] = 300
    w.cluster.update(obj)
    w.run_for(1.0)
    assert sum(e.get("count", 1) for e in w.events("Unimplemented", "fast")) == 2


def test_a_static_nodepool_gets_no_unimplemented_event_now_that_karpy_implements_it() -> None:
    w = b.make_world()
    pool = b.nodepool_manifest("static")
    pool["spec"]["replicas"] = 3
    w.cluster.create(pool)
    w.run_for(1.0)
    assert _events(w, "static") == []


def test_a_nodepool_without_such_fields_and_an_ordinary_pod_get_none() -> None:
    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.run_for(30.0)
    assert w.events("Unimplemented") == []
    assert w.karpy.unimplemented is not None and w.karpy.unimplemented.reported == []


def test_neither_a_capacity_buffer_nor_a_pod_claiming_dra_resources_is_named_unimplemented() -> None:
    """Both are implemented: buffers by karpy.controllers.capacitybuffer, DRA pods refused by the scheduler."""
    w = b.make_world()
    w.cluster.create(b.pending_pod("gpu", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpu"}]))
    w.cluster.create({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                      "metadata": {"name": "headroom", "namespace": "default"},
                      "spec": {"podTemplateRef": {"name": "t"}, "replicas": 2}})
    w.run_for(301.0)
    assert w.karpy.unimplemented is not None
    reported = w.karpy.unimplemented.reported
    assert not [r for r in reported if r[0] == "CapacityBuffer"]
    assert [r for r in reported if r[1] == "default/gpu"] == []
    assert _events(w, "headroom") == []


def test_an_ec2nodeclass_field_is_named_in_the_event() -> None:
    w = b.make_world()
    nc = w.cluster.get("EC2NodeClass", "default")
    nc["spec"]["blockDeviceMappings"] = [{"deviceName": "/dev/xvda", "rootVolume": True,
                                           "ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 300}}]
    w.cluster.update(nc)
    w.run_for(1.0)
    (message,) = _events(w, "default")
    assert "EC2NodeClass default: spec.blockDeviceMappings[].ebs.volumeInitializationRate" in message


def test_pods_sharing_one_stored_affinity_have_its_terms_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from karpy.controllers import unimplemented as ctl_mod

    w = b.make_world()
    ctl = ctl_mod.Unimplemented(w.cluster, None)  # type: ignore[arg-type]
    walked: list[str] = []
    real = unimplemented.set_fields

    def counting(kind: str, manifest: dict[str, object]) -> list[unimplemented.Field]:
        walked.append(kind)
        return real(kind, manifest)

    monkeypatch.setattr(unimplemented, "set_fields", counting)
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}},
         "matchLabelKeys": ["pod-template-hash"]}]}}
    pods = [{"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
             "spec": {"affinity": affinity, "containers": []}} for i in range(50)]
    keys = [list(ctl._map("ADDED", p)) for p in pods]
    assert keys == [[f"Pod|default|p{i}"] for i in range(50)]  # each pod is still checked (reported once per uid)
    assert walked == ["Pod"]
    other = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "b"}}}]}}
    assert list(ctl._map("MODIFIED", {"kind": "Pod", "metadata": {"name": "q", "namespace": "default"},
                                      "spec": {"affinity": other}})) == []
    assert walked == ["Pod", "Pod"]
