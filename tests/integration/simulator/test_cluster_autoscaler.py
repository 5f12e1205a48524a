"""The Cluster Autoscaler model: node groups, expanders, scale-down rules (virtual time)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from karpy.api import errors
from karpy.simulator import ca_config, engine, scenario

BASE = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: ca}
spec:
  cloud: {provider: aws, region: us-east-1, zones: [us-east-1a, us-east-1b]}
  until: 5m
  clusterAutoscaler: CA
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - name: app
        image: busybox
        resources: {requests: {cpu: 1500m, memory: 1Gi}}
"""


def run(ca: dict[str, Any], extra: str = "", until: str = "5m") -> engine.Result:
    text = BASE.replace("CA", yaml.safe_dump(ca, default_flow_style=True).strip()).replace("5m", until, 1) + extra
    sim = engine.Simulation(scenario.load_text(text), autoscaler="cluster-autoscaler")
    return sim.run()


def group_counts(result: engine.Result) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in result.objects["nodes"]:
        g = n["metadata"]["labels"].get(ca_config.GROUP_LABEL, "")
        out[g] = out.get(g, 0) + 1
    return out


GROUPS = [{"name": "small", "instanceType": "m5.large", "maxSize": 10},
          {"name": "big", "instanceType": "m5.4xlarge", "maxSize": 10}]


def test_least_waste_picks_the_group_that_leaves_least_idle_capacity() -> None:
    result = run({"expander": "least-waste", "nodeGroups": GROUPS})
    # 4 pods of 1.5 cpu: 4 m5.large waste ~0.4 cpu each; one m5.4xlarge (16 cpu) wastes 10
    assert group_counts(result) == {"small": 4}
    assert all(p["status"]["phase"] == "Running" for p in result.objects["pods"])


def test_priority_expander_follows_the_priorities_even_when_wasteful() -> None:
    result = run({"expander": "priority", "priorities": {10: ["big"], 1: [".*"]}, "nodeGroups": GROUPS})
    assert group_counts(result) == {"big": 1}


def test_a_group_at_its_max_size_is_not_scaled_and_pods_say_why() -> None:
    result = run({"nodeGroups": [{"name": "small", "instanceType": "m5.large", "maxSize": 2}]})
    assert group_counts(result) == {"small": 2}
    pending = [p for p in result.objects["pods"] if p["status"].get("phase") != "Running"]
    assert len(pending) == 2
    assert any(e["reason"] == "NotTriggerScaleUp" for e in result.events)


def test_nodes_are_removed_only_after_ten_minutes_unneeded() -> None:
    scale_down = """
  steps:
  - at: 3m
    scale: {kind: Deployment, namespace: default, name: app, replicas: 1}
"""
    ca = {"nodeGroups": [{"name": "small", "instanceType": "m5.large", "maxSize": 10}]}
    text_until = "12m"
    early = run(ca, until=text_until, extra="")
    assert group_counts(early) == {"small": 4}
    later = engine.Simulation(scenario.load_text(
        BASE.replace("CA", yaml.safe_dump(ca, default_flow_style=True).strip()).replace("5m", "25m", 1)
        .replace("  clusterAutoscaler:", scale_down.strip("\n") + "\n  clusterAutoscaler:")),
        autoscaler="cluster-autoscaler").run()
    removals = [e for e in later.events if e["reason"] == "ScaleDown"]
    assert len(removals) == 3
    assert min(e["t"] for e in removals) >= 180 + 600  # scaleDownUnneededTime after the scale-down at 3m
    assert group_counts(later) == {"small": 1}


def test_an_unknown_expander_is_an_error_naming_the_field() -> None:
    with pytest.raises(errors.ValidationError) as err:
        run({"expander": "cheapest", "nodeGroups": GROUPS})
    assert "spec.clusterAutoscaler: expander" in str(err.value)


def test_groups_are_derived_from_node_groups_and_nodepools_when_not_given() -> None:
    config = ca_config.read(None, pools=[], nodes=[{"metadata": {"labels": {
        "eks.amazonaws.com/nodegroup": "ng-1", "node.kubernetes.io/instance-type": "m5.large",
        "topology.kubernetes.io/zone": "us-east-1a"}}}], types=[])
    assert [(g.name, g.instance_type, g.min_size, g.max_size) for g in config.node_groups] == \
        [("ng-1", "m5.large", 1, 10)]


def _deployment(name: str, replicas: int) -> str:
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}, tier: web}}}}
    spec:
      containers:
      - {{name: c, image: busybox, resources: {{requests: {{cpu: 900m, memory: 512Mi}}}}}}
"""


def _two_half_nodes(pdb: bool) -> engine.Result:
    """a and z land on different m5.large (first-fit in name order, m's 6 pods between them); m goes at 3m,
    leaving two nodes at 47 % that Cluster Autoscaler would merge into one."""
    text = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: ca-pdb}
spec:
  cloud: {provider: aws, region: us-east-1, zones: [us-east-1a]}
  until: 30m
  steps:
  - at: 3m
    scale: {kind: Deployment, namespace: default, name: m, replicas: 0}
  clusterAutoscaler: {nodeGroups: [{name: small, instanceType: m5.large, maxSize: 10}]}
""" + _deployment("a", 1) + _deployment("m", 6) + _deployment("z", 1)
    if pdb:
        text += ("---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: az, namespace: default}\n"
                 "spec: {minAvailable: 2, selector: {matchExpressions: [{key: app, operator: In, values: [a, z]}]}}\n")
    return engine.Simulation(scenario.load_text(text), autoscaler="cluster-autoscaler").run()


def test_a_pod_disruption_budget_that_refuses_eviction_keeps_an_underused_node() -> None:
    free = _two_half_nodes(pdb=False)
    guarded = _two_half_nodes(pdb=True)
    assert group_counts(free) == {"small": 1}  # a and z end up together on one m5.large
    assert group_counts(guarded) == {"small": 2}  # the budget forbids moving either
    for result in (free, guarded):
        assert sum(1 for p in result.objects["pods"] if p["status"].get("phase") == "Running") == 2
