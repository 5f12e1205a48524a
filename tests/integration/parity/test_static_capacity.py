"""Static NodePools (``spec.replicas``) in ``karpy simulate`` scenarios, virtual time.

Expectations from Karpenter v1.14: ``pkg/controllers/static/provisioning/suite_test.go`` (replicas kept
without pods; limits.nodes), ``static/deprovisioning/suite_test.go`` (scale down), the NodePool CRD's
CEL rules (``nodepools.yaml``: only limits.nodes and no weight on static NodePools; no switch between
static and dynamic) and ``provisioner.go`` (static NodePools launch nothing for pods).
"""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import errors
from karpy.simulator import engine, scenario

from . import scenarios as sc

GATE = "featureGates: StaticCapacity=true"


def _pool(name: str, replicas: int, extra: str = "") -> str:
    return sc.nodepool(name, extra_spec=f"replicas: {replicas}\n{extra}")


def _nodes(result: engine.Result, pool: str) -> list[dict[str, Any]]:
    return [n for n in sc.karpy_nodes(result)
            if (n["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]


def test_a_static_nodepool_keeps_its_replicas_and_follows_scale_steps() -> None:
    steps = """
    - at: 5m
      scale: {kind: NodePool, name: warm, replicas: 4}
    - at: 10m
      scale: {kind: NodePool, name: warm, replicas: 1}
    """
    result = sc.run(sc.docs(_pool("warm", 2)), until="4m", settings=GATE)
    assert len(_nodes(result, "warm")) == 2
    pool = next(p for p in result.objects["nodepools"] if p["metadata"]["name"] == "warm")
    assert pool["status"]["nodes"] == 2
    scaled = sc.run(sc.docs(_pool("warm", 2)), until="9m", steps=steps, settings=GATE)
    assert len(_nodes(scaled, "warm")) == 4
    down = sc.run(sc.docs(_pool("warm", 2)), until="15m", steps=steps, settings=GATE)
    assert len(_nodes(down, "warm")) == 1


def test_pods_run_on_static_nodes_but_never_get_a_node_launched_from_a_static_pool() -> None:
    documents = sc.docs(_pool("warm", 1), sc.deployment("web", 40, cpu="100m", memory="64Mi"))
    result = sc.run(documents, until="5m", settings=GATE)
    assert len(_nodes(result, "warm")) == 1
    assert sc.running(result, "web") and sc.pending(result, "web")


def test_limits_nodes_bounds_a_static_nodepool_in_a_scenario() -> None:
    result = sc.run(sc.docs(_pool("warm", 5, 'limits: {nodes: "3"}')), until="5m", settings=GATE)
    assert len(_nodes(result, "warm")) == 3


def test_the_gate_off_launches_nothing_for_a_static_nodepool_and_the_loader_says_so() -> None:
    """Karpenter registers the static controllers only under StaticCapacity=true; the provisioner skips
    static NodePools whatever the gate."""
    result = sc.run(sc.docs(_pool("warm", 2)), until="5m")
    assert _nodes(result, "warm") == []
    loaded = scenario.load_text(sc.text(sc.docs(_pool("warm", 2))), source="parity.yaml")
    assert any("NodePool warm: spec.replicas has no effect while the StaticCapacity feature gate is off" in w
               for w in loaded.warnings)
    gated = scenario.load_text(sc.text(sc.docs(_pool("warm", 2)), settings=GATE), source="parity.yaml")
    assert not any("StaticCapacity" in w for w in gated.warnings)


def test_static_nodes_are_kept_although_empty_and_consolidation_is_on() -> None:
    pool = sc.nodepool("warm", extra_spec="replicas: 3", disruption="{consolidationPolicy: WhenEmpty, "
                                                                     "consolidateAfter: 0s}")
    result = sc.run(sc.docs(pool), until="20m", settings=GATE)
    assert len(_nodes(result, "warm")) == 3
    assert sc.terminated(result) == 0


@pytest.mark.parametrize(("extra", "path"), [
    ("weight: 10", "spec.weight"),
    ("limits: {cpu: \"100\"}", "spec.limits"),
])
def test_a_static_nodepool_refuses_what_karpenters_crd_refuses(extra: str, path: str) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        scenario.load_text(sc.text(sc.docs(_pool("warm", 2, extra)), settings=GATE), source="parity.yaml")
    assert any(e.path == path for e in caught.value.errors)


def test_a_scale_step_may_not_turn_a_dynamic_nodepool_static() -> None:
    steps = """
    - at: 1m
      scale: {kind: NodePool, name: default, replicas: 2}
    """
    with pytest.raises(errors.ValidationError) as caught:
        scenario.load_text(sc.text(sc.docs(sc.nodepool()), steps=steps, settings=GATE), source="parity.yaml")
    assert "Cannot transition NodePool between static" in str(caught.value)
