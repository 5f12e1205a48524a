"""``Deployment.from_manifest(d, known=...)``: a scale (only ``spec.replicas`` changed) keeps the
template pod already parsed; anything that could parse apart is parsed again."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy.api import errors, workloads


def deployment(replicas: int = 1, port: Any = 80, uid: str = "u1", name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "1"}},
                          "ports": [{"containerPort": port}]}]}}}}


def test_a_scaled_deployment_keeps_the_template_pod_it_had() -> None:
    before = workloads.Deployment.from_manifest(deployment(1))
    after = workloads.Deployment.from_manifest(copy.deepcopy(deployment(5)), known=before)
    assert after.replicas == 5
    assert after.template_pod is before.template_pod
    assert after == workloads.Deployment.from_manifest(deployment(5))


def test_a_changed_template_another_owner_or_kind_is_parsed_again() -> None:
    before = workloads.Deployment.from_manifest(deployment(1))
    for changed in (deployment(1, port=81), deployment(1, uid="u2"), deployment(1, name="api")):
        again = workloads.Deployment.from_manifest(changed, known=before)
        assert again.template_pod is not before.template_pod
        assert again == workloads.Deployment.from_manifest(changed)
    rs = {**deployment(1), "kind": "ReplicaSet"}
    assert workloads.ReplicaSet.from_manifest(rs, known=before).template_pod is not before.template_pod


def test_a_template_equal_only_across_types_is_parsed_again_and_refused() -> None:
    before = workloads.Deployment.from_manifest(deployment(1, port=80))
    changed = deployment(1, port=80.0)  # equal to 80 in Python, not the same input: a port must be an integer
    assert changed["spec"]["template"] == before.template
    with pytest.raises(errors.ValidationError, match=r"containerPort: expected an integer, found 80\.0"):
        workloads.Deployment.from_manifest(changed, known=before)
