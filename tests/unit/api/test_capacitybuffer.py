"""The CapacityBuffer API: parsing, Karpenter's CRD rules, replicas resolution, virtual pods.

Expected values come from Karpenter v1.14.3's tests: ``pkg/controllers/capacitybuffer/helpers_test.go``
(calculatePercentageReplicas, calculateLimitReplicas), ``suite_test.go`` (computeReplicas: replicas and
percentage combine by max, limits bound them) and ``pkg/state/virtualpods/utilities_test.go``
(BuildVirtualPods names, annotations, priority, sanitized volumes).
"""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import capacitybuffer as cb
from karpy.api import errors, manifest

TEMPLATE: dict[str, Any] = {"metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "c", "image": "x",
                                                     "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}


def _buffer(**spec: Any) -> cb.CapacityBuffer:
    return cb.CapacityBuffer.from_manifest({"apiVersion": cb.API_VERSION, "kind": cb.KIND,
                                            "metadata": {"name": "b", "namespace": "ns", "uid": "u"},
                                            "spec": spec})


def test_a_buffer_reads_its_refs_replicas_percentage_and_limits() -> None:
    b = _buffer(scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"}, percentage=20,
                limits={"cpu": "4"})
    assert b.scalable_ref == cb.ScalableRef("Deployment", "web", "apps")
    assert (b.percentage, b.replicas, b.limits["cpu"]) == (20, None, 4000)
    assert b.provisioning_strategy == cb.ACTIVE_STRATEGY


def test_both_refs_and_a_template_without_replicas_or_limits_are_refused_as_the_crd_rules_do() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        _buffer(podTemplateRef={"name": "t"}, scalableRef={"kind": "Deployment", "name": "web"})
    text = str(exc.value)
    assert "CapacityBuffer ns/b: spec: expected podTemplateRef or scalableRef, not both" in text
    assert "spec.replicas: expected replicas or limits set when podTemplateRef is set" in text


def test_a_negative_percentage_and_an_empty_ref_name_name_the_field_expected_and_found() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        _buffer(scalableRef={"kind": "Deployment", "name": ""}, percentage=-5)
    text = str(exc.value)
    assert "spec.percentage: expected an integer >= 0, found -5" in text
    assert "spec.scalableRef.name: expected a non-empty name" in text


def test_the_manifest_loader_validates_capacity_buffers() -> None:
    text = ("apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {name: b}\n"
            "spec: {podTemplateRef: {name: t}, replicas: -1}\n")
    with pytest.raises(errors.ValidationError) as exc:
        manifest.load_documents(text)
    assert "spec.replicas: expected an integer >= 0, found -1" in str(exc.value)


def test_percentage_rounds_up_with_a_floor_of_one_as_calculate_percentage_replicas() -> None:
    # helpers_test.go: 10 replicas at 20 % -> 2, 3 at 10 % -> 1 (ceil 0.3), 1 at 1 % -> 1, 0 % -> 0
    assert [cb.percentage_replicas(r, p) for r, p in ((10, 20), (3, 10), (1, 1), (10, 0), (7, 50))] == [2, 1, 1, 0, 4]


def test_limits_bound_by_the_scarcest_resource_as_calculate_limit_replicas() -> None:
    # helpers_test.go: cpu 10 / 1 = 10, memory 8Gi / 2Gi = 4 -> 4; no shared resource -> not limited
    gib = 2 ** 30 * 1000  # milli-bytes
    assert cb.limit_replicas({"cpu": 10_000, "memory": 8 * gib}, {"cpu": 1000, "memory": 2 * gib}) == 4
    assert cb.limit_replicas({"nvidia.com/gpu": 1000}, {"cpu": 1000}) is None


def test_replicas_and_percentage_combine_by_max_and_limits_bound_them_as_compute_replicas() -> None:
    requests = {"cpu": 1000}
    assert cb.compute_replicas(_buffer(scalableRef={"kind": "Deployment", "name": "w"}, replicas=3, percentage=50),
                               requests, scalable_replicas=10) == 5
    assert cb.compute_replicas(_buffer(scalableRef={"kind": "Deployment", "name": "w"}, replicas=3, percentage=10),
                               requests, scalable_replicas=10) == 3
    assert cb.compute_replicas(_buffer(podTemplateRef={"name": "t"}, replicas=8, limits={"cpu": "5"}), requests) == 5
    assert cb.compute_replicas(_buffer(podTemplateRef={"name": "t"}, limits={"cpu": "3500m"}), requests) == 3


def test_virtual_pods_carry_the_buffer_annotations_and_the_lowest_priority() -> None:
    b = _buffer(podTemplateRef={"name": "t"}, replicas=2)
    pods = cb.virtual_pods(b, TEMPLATE, 2)
    assert [p.key for p in pods] == ["ns/capacity-buffer-b-1", "ns/capacity-buffer-b-2"]
    assert [p.metadata.uid for p in pods] == ["u-1", "u-2"]
    assert all(p.priority == cb.VIRTUAL_POD_PRIORITY == -(2 ** 31) for p in pods)
    assert all(cb.is_virtual(p) and cb.buffer_key_of(p) == "ns/b" for p in pods)
    assert pods[0].metadata.labels == {"app": "web"}
    assert pods[0].requests["cpu"] == 1000
    assert cb.virtual_pods(b, TEMPLATE, 0) == []


def test_virtual_pods_drop_claim_backed_volumes_and_their_mounts() -> None:
    template = {"spec": {"nodeName": "n1", "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
                                                       {"name": "cfg", "configMap": {"name": "c"}}],
                         "containers": [{"name": "c", "image": "x", "volumeMounts": [
                             {"name": "data", "mountPath": "/d"}, {"name": "cfg", "mountPath": "/c"}]}]}}
    clean = cb.sanitize_template(template)
    assert "nodeName" not in clean["spec"]
    assert [v["name"] for v in clean["spec"]["volumes"]] == ["cfg"]
    assert [m["name"] for m in clean["spec"]["containers"][0]["volumeMounts"]] == ["cfg"]
