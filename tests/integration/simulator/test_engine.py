"""The simulation engine: scenario loading, the simulated kube-scheduler, steps, determinism.

The seed scenario (``examples/eks-scale-out-v1alpha5.yaml``, from the field report): three
pre-existing m5.large nodes, a v1alpha5 Provisioner that only allows on-demand r5.large, and a
deployment of 1-CPU / 2Gi pods scaled from 1 to 5 at 3m and back to 1 at 8m.
"""

from __future__ import annotations

import functools
import itertools
import pathlib
from typing import Any

import pytest

from karpy.api import errors
from karpy.simulator import engine, kube_scheduler, output, scenario, scenario_steps

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"
SEED_SCENARIO = EXAMPLES / "eks-scale-out-v1alpha5.yaml"
PRE_EXISTING = {"ip-10-99-13-40.ec2.internal", "ip-10-99-17-198.ec2.internal", "ip-10-99-22-103.ec2.internal"}


@functools.cache
def seed_scenario() -> scenario.Scenario:
    return scenario.load(SEED_SCENARIO)


@functools.cache
def seed_run(until: float, karpy: bool = True) -> engine.Result:
    return engine.Simulation(seed_scenario(), until=until, karpy=karpy).run()


def app_pods(result: engine.Result) -> list[dict[str, Any]]:
    return [p for p in result.objects["pods"] if p["metadata"]["name"].startswith("app-")]


def phase(p: dict[str, Any]) -> str:
    return str((p.get("status") or {}).get("phase"))


def scheduled_condition(p: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled")


def expect_scenario_error(text: str, *fragments: str) -> errors.ValidationError:
    with pytest.raises(errors.ValidationError) as info:
        scenario.load_text(text, source="test.yaml")
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def minimal(spec: str, extra: str = "") -> str:
    return ("apiVersion: karpy.io/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nspec:\n"
            "  cloud: {provider: kwok}\n  until: 5m\n" + spec + extra)


DEPLOYMENT = """---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx, resources: {requests: {cpu: 100m}}}]}
"""


# ------------------------------------------------------------------------------- scenario loading


def test_the_seed_scenario_loads_with_its_provisioner_converted_to_a_nodepool() -> None:
    s = seed_scenario()
    kinds = [o["kind"] for o in s.objects]
    assert kinds.count("Node") == 3
    assert "NodePool" in kinds and "EC2NodeClass" in kinds and "Provisioner" not in kinds
    assert s.until == 900.0
    assert [(st.at, st.action) for st in s.steps] == [
        (180.0, scenario_steps.Scale("Deployment", "default", "app", 5)),
        (480.0, scenario_steps.Scale("Deployment", "default", "app", 1)),
    ]
    assert s.cluster_name == "sample-1-22"
    assert s.settings.batch_max_duration == 10.0


def test_a_file_without_a_scenario_document_is_rejected() -> None:
    expect_scenario_error(DEPLOYMENT, "test.yaml", "exactly one document with apiVersion: karpy.io/v1alpha1")


def test_a_step_with_a_bad_time_names_the_document_and_the_field() -> None:
    err = expect_scenario_error(
        minimal("  steps:\n  - at: soon\n    scale: {kind: Deployment, name: web, replicas: 2}\n", DEPLOYMENT),
        "document 1 (Scenario/t)", "spec.steps[0].at", "'soon'")
    assert len(err.errors) == 1


def test_scaling_a_deployment_the_scenario_never_creates_is_rejected_before_running() -> None:
    expect_scenario_error(minimal("  steps:\n  - at: 1m\n    scale: {kind: Deployment, name: nope, replicas: 2}\n"),
                          "spec.steps[0].scale.name", "'nope'")


def test_every_problem_of_every_document_is_reported_at_once() -> None:
    bad_pool = """---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}
      requirements: [{key: karpenter.sh/capacity-type, operator: Sometimes, values: [spot]}]
"""
    err = expect_scenario_error(
        minimal("  steps:\n  - at: 1m\n    insufficientCapacity: {instanceType: no.such, zone: z, for: 1m}\n",
                bad_pool),
        "document 2 (NodePool/p)", "operator", "spec.steps[0].insufficientCapacity.instanceType")
    assert len(err.errors) >= 2


def test_an_applied_manifest_is_validated_with_the_step_path() -> None:
    spec = ("  steps:\n  - at: 1m\n    apply:\n    - apiVersion: karpenter.sh/v1\n      kind: NodePool\n"
            "      metadata: {name: later}\n      spec: {template: {spec: {requirements: "
            "[{key: k, operator: Sometimes}]}}}\n")
    expect_scenario_error(minimal(spec), "document 1 (Scenario/t)", "spec.steps[0].apply[0]", "operator")


def test_settings_are_read_as_karpy_settings_and_bad_ones_name_the_field() -> None:
    expect_scenario_error(minimal("  settings: {batchIdleDuration: often}\n"),
                          "spec.settings.batchIdleDuration", "'often'")


# ------------------------------------------------------------------------------ the kube-scheduler


def test_the_kube_scheduler_places_pods_on_existing_nodes_and_explains_the_rest() -> None:
    result = seed_run(240.0, karpy=False)
    pods = app_pods(result)
    assert len(pods) == 5
    running = [p for p in pods if phase(p) == "Running"]
    pending = [p for p in pods if phase(p) == "Pending"]
    assert len(running) == 2
    assert {p["spec"]["nodeName"] for p in running} <= PRE_EXISTING
    assert len(pending) == 3
    for p in pending:
        cond = scheduled_condition(p)
        assert cond["status"] == "False"
        assert cond["reason"] == kube_scheduler.UNSCHEDULABLE
        assert cond["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    failed = [e for e in result.events if e["reason"] == "FailedScheduling" and e["source"] == "default-scheduler"]
    assert len(failed) == 3


def test_pods_given_with_a_node_name_run_there() -> None:
    result = seed_run(240.0, karpy=False)
    coredns = next(p for p in result.objects["pods"] if p["metadata"]["name"].startswith("coredns"))
    assert coredns["spec"]["nodeName"] == "ip-10-99-22-103.ec2.internal"
    assert phase(coredns) == "Running"
    datadog = [p for p in result.objects["pods"] if p["metadata"]["name"].startswith("datadog-agent-")
               and "cluster-agent" not in p["metadata"]["name"] and "kube-state" not in p["metadata"]["name"]]
    assert sorted(p["spec"]["nodeName"] for p in datadog) == sorted(PRE_EXISTING)


# ---------------------------------------------------------------------------------- the seed run


def test_three_r5_large_on_demand_nodeclaims_are_launched_for_the_replicas_that_do_not_fit() -> None:
    result = seed_run(420.0)
    claims = result.objects["nodeclaims"]
    assert len(claims) == 3
    for c in claims:
        lb = c["metadata"]["labels"]
        assert lb["node.kubernetes.io/instance-type"] == "r5.large"
        assert lb["karpenter.sh/capacity-type"] == "on-demand"
    pods = app_pods(result)
    assert len(pods) == 5
    assert all(phase(p) == "Running" for p in pods)
    on_existing = [p for p in pods if p["spec"]["nodeName"] in PRE_EXISTING]
    assert len(on_existing) == 2
    karpy_nodes = {n["metadata"]["name"] for n in result.objects["nodes"]} - PRE_EXISTING
    assert len(karpy_nodes) == 3
    assert {p["spec"]["nodeName"] for p in pods} - PRE_EXISTING == karpy_nodes


def test_karpenter_events_tell_which_nodeclaim_each_pod_should_schedule_on() -> None:
    result = seed_run(420.0)
    nominated = [e for e in result.events if e["source"] == "karpenter" and e["reason"] == "Nominated"]
    assert {e["involvedObject"]["name"] for e in nominated} >= {
        p["metadata"]["name"] for p in app_pods(result) if p["spec"]["nodeName"] not in PRE_EXISTING}
    assert all("nodeclaim/" in e["message"] for e in nominated)


def test_scaled_back_to_one_a_single_replica_keeps_running() -> None:
    result = seed_run(900.0)
    pods = app_pods(result)
    assert len(pods) == 1
    assert phase(pods[0]) == "Running"
    assert result.timeline[-1].pending_pods == 0


def test_nodes_emptied_by_the_scale_down_are_removed_about_thirty_seconds_later() -> None:
    result = seed_run(900.0)
    karpy_nodes = [n for n in result.objects["nodes"] if n["metadata"]["name"] not in PRE_EXISTING]
    pods_on = {p["spec"].get("nodeName") for p in result.objects["pods"] if p["metadata"]["name"].startswith("app-")}
    assert all(n["metadata"]["name"] in pods_on for n in karpy_nodes)
    by_t = {round(s.t): s for s in result.timeline}
    def managed(t: int) -> int:
        return sum(v for k, v in by_t[t].nodes_by_nodepool.items() if k != engine.UNMANAGED)

    # the scale-down is at 8m: the three emptied nodes stay for ttlSecondsAfterEmpty (30 s), then all
    # go together (v1alpha5 had no disruption budgets; the conversion keeps that with nodes: 100%)
    assert managed(500) == 3
    assert managed(540) == 0


# ------------------------------------------------------------------------------ timeline, steps


def test_the_timeline_is_sampled_every_ten_seconds_to_the_end() -> None:
    result = seed_run(900.0)
    ts = [s.t for s in result.timeline]
    assert ts[0] == 0.0 and ts[-1] == 900.0
    assert all(b - a == pytest.approx(10.0) for a, b in itertools.pairwise(ts))
    assert result.timeline[0].nodes_by_nodepool == {engine.UNMANAGED: 3}
    assert max(s.pending_pods for s in result.timeline) >= 3


def test_steps_delete_apply_and_mark_offerings_out_of_capacity_at_their_times() -> None:
    steps = """  steps:
  - at: 1m
    delete: {kind: Deployment, namespace: default, name: web}
  - at: 2m
    apply:
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: api, namespace: default}
      spec:
        replicas: 2
        selector: {matchLabels: {app: api}}
        template:
          metadata: {labels: {app: api}}
          spec: {containers: [{name: api, image: nginx}]}
  - at: 3m
    insufficientCapacity: {instanceType: c-2x-amd64-linux, zone: test-zone-a, capacityType: spot, for: 10m}
  - at: 4m
    interrupt: {node: no-such-node}
"""
    sim = engine.Simulation(scenario.load_text(minimal(steps, DEPLOYMENT)), karpy=False)
    result = sim.run()
    assert not sim.cluster.list("Deployment", "default", field_selector="metadata.name=web")
    assert len(sim.cluster.list("Pod", "default", label_selector={"app": "api"})) == 2
    offering = next(o for t in sim.cloud.get_instance_types(None) if t.name == "c-2x-amd64-linux"
                    for o in t.offerings if o.zone == "test-zone-a" and o.capacity_type == "spot")
    assert offering.available is False
    assert any("node no-such-node does not exist" in n["message"] and n["t"] == 240.0 for n in result.notes)


def test_the_same_seed_gives_byte_identical_output() -> None:
    a = output.render_json(engine.Simulation(seed_scenario(), until=420.0, seed=9).run())
    b = output.render_json(engine.Simulation(seed_scenario(), until=420.0, seed=9).run())
    assert a == b
    assert '"FailedScheduling"' in a
