"""DaemonSets, Deployments, ReplicaSets and PodDisruptionBudgets, and the PDB arithmetic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.api import errors, meta, pod, workloads

SCENARIO = Path(__file__).resolve().parents[3].parent / "shared" / "scenarios/eks-scale-out-v1alpha5.yaml"


def scenario_doc(kind: str) -> dict[str, Any]:
    if not SCENARIO.exists():
        pytest.skip(f"{SCENARIO} is not available")
    with SCENARIO.open() as fh:
        for d in yaml.safe_load_all(fh):
            if d and d.get("kind") == kind:
                return dict(d)
    raise AssertionError(f"no {kind} in {SCENARIO}")


def pdb(spec: dict[str, Any]) -> workloads.PodDisruptionBudget:
    return workloads.PodDisruptionBudget.from_manifest(
        {"kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"}, "spec": spec}
    )


def test_the_scenario_daemonset_has_a_template_pod_owned_by_it() -> None:
    ds = workloads.DaemonSet.from_manifest(scenario_doc("DaemonSet"))
    assert (ds.namespace, ds.name) == ("default", "datadog-agent")
    assert ds.selector.matches({"app": "datadog-agent"})
    p = ds.template_pod
    assert p.key == "default/datadog-agent-template"
    assert p.is_daemonset_pod and p.owner_kind == "DaemonSet"
    assert p.requests == {"cpu": 200, "memory": 256 * 2**20 * 1000, "pods": 1000}
    assert ds.selector.matches(p.labels)


def test_the_scenario_deployment_parses_with_replicas_and_template() -> None:
    dep = workloads.Deployment.from_manifest(scenario_doc("Deployment"))
    assert dep.replicas == 1
    assert dep.template["metadata"]["name"] == "app"
    assert dep.template_pod.requests["cpu"] == 1000
    assert dep.template_pod.requests["memory"] == 2 * 2**30 * 1000
    assert dep.template_pod.owner_kind == "Deployment"
    assert dep.selector.matches(dep.template_pod.labels)
    again = workloads.Deployment.from_manifest(dep.to_manifest())
    assert (again.replicas, again.selector) == (dep.replicas, dep.selector)
    assert again.template_pod == dep.template_pod


def test_a_replicaset_has_the_deployment_shape_but_its_own_kind() -> None:
    d = scenario_doc("Deployment")
    d["kind"] = "ReplicaSet"
    d["spec"]["replicas"] = 3
    rs = workloads.ReplicaSet.from_manifest(d)
    assert isinstance(rs, workloads.ReplicaSet)
    assert not isinstance(rs, workloads.Deployment)
    assert rs.replicas == 3
    assert rs.template_pod.owner_kind == "ReplicaSet"
    assert rs.to_manifest()["kind"] == "ReplicaSet"


def test_a_deployment_without_replicas_wants_one() -> None:
    d = scenario_doc("Deployment")
    del d["spec"]["replicas"]
    assert workloads.Deployment.from_manifest(d).replicas == 1


def test_a_bad_template_quantity_names_the_workload_and_the_template_path() -> None:
    d = scenario_doc("DaemonSet")
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "lots"
    with pytest.raises(errors.ValidationError) as info:
        workloads.DaemonSet.from_manifest(d)
    err = info.value.errors[0]
    assert err.obj == "DaemonSet default/datadog-agent"
    assert err.path == "spec.template.spec.containers[0].resources.requests.memory"


def test_a_pdb_parses_its_selector_and_budget() -> None:
    b = pdb({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": "50%",
             "unhealthyPodEvictionPolicy": "AlwaysAllow"})
    assert b.min_available == "50%" and b.max_unavailable is None
    assert b.unhealthy_pod_eviction_policy == "AlwaysAllow"
    web = pod.build("w", labels={"app": "web"})
    other_ns = pod.build("w", namespace="other", labels={"app": "web"})
    assert b.selects(web) and not b.selects(other_ns)
    assert workloads.PodDisruptionBudget.from_manifest(b.to_manifest()) == b


def test_a_pdb_without_a_selector_selects_no_pods_but_an_empty_one_selects_all() -> None:
    p = pod.build("w", labels={"app": "web"})
    assert not pdb({"maxUnavailable": 1}).selects(p)
    assert pdb({"selector": {}, "maxUnavailable": 1}).selects(p)


@pytest.mark.parametrize("bad", ["50", "half", -1, True, "150 %x"])
def test_a_bad_budget_value_is_rejected_with_its_path(bad: object) -> None:
    with pytest.raises(errors.ValidationError) as info:
        pdb({"minAvailable": bad})
    assert info.value.errors[0].path == "spec.minAvailable"


@pytest.mark.parametrize(
    ("spec", "healthy", "expected", "allowed"),
    [
        ({"minAvailable": 2}, 3, 3, 1),
        ({"minAvailable": 3}, 3, 3, 0),
        ({"minAvailable": 3}, 2, 3, 0),
        ({"minAvailable": "50%"}, 7, 7, 3),  # 50% of 7 rounds up to 4 that must stay
        ({"minAvailable": "100%"}, 5, 5, 0),
        ({"maxUnavailable": 1}, 5, 5, 1),
        ({"maxUnavailable": 1}, 4, 5, 0),  # one already unhealthy
        ({"maxUnavailable": "30%"}, 10, 10, 3),
        ({"maxUnavailable": "25%"}, 7, 7, 2),  # 25% of 7 = 1.75 rounds up to 2
        ({"maxUnavailable": "0%"}, 5, 5, 0),
        ({"maxUnavailable": 10}, 3, 3, 3),
        ({"maxUnavailable": 1}, 0, 0, 0),  # nothing expected, nothing allowed
        ({}, 5, 5, 0),
    ],
)
def test_pdb_allowed_disruptions_follow_the_disruption_controller(
    spec: dict[str, Any], healthy: int, expected: int, allowed: int
) -> None:
    assert pdb({"selector": {}, **spec}).allowed_disruptions(healthy, expected) == allowed


def test_percentages_round_up_for_both_fields() -> None:
    assert workloads.scaled_value("50%", 7) == 4
    assert workloads.scaled_value("25%", 7) == 2
    assert workloads.scaled_value("20%", 10) == 2
    assert workloads.scaled_value(3, 100) == 3


def test_object_names_for_errors_never_raise() -> None:
    web = {"metadata": {"name": "web-1", "namespace": "default"}}
    assert meta.object_name("Pod", web) == "Pod default/web-1"
    assert meta.object_name("NodePool", {"metadata": {"name": "default"}}) == "NodePool default"
    assert meta.object_name("Pod", {"metadata": "garbage"}) == "Pod (unnamed)"
    assert meta.object_name("", {"kind": "Node", "metadata": {"name": 7}}) == "Node 7"
    assert meta.object_name("Pod", None) == "Pod (unnamed)"  # type: ignore[arg-type]
