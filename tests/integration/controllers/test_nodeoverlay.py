"""The ``nodeoverlay`` controller under :func:`karpy.operator.register_all`, as ``karpy controller`` runs it
(in-memory cluster, virtual clock). Expectations from Karpenter v1.14's ``pkg/controllers/nodeoverlay``:
only with the ``NodeOverlay`` gate (``controllers.go``), status conditions ``ValidationSucceeded`` / ``Ready``
(``suite_test.go``), re-evaluation on NodeOverlay and NodePool spec changes (``GenerationChangedPredicate``)."""

from __future__ import annotations

from typing import Any

from karpy import settings
from karpy.cloudprovider import overlay_provider
from karpy.controllers import nodeoverlay as controller_mod

from . import builders

GATE_ON = settings.Settings(cluster_name="test", feature_gates=(("NodeOverlay", True),))


def _touched(gates: settings.Settings) -> tuple[set[str], Any]:
    kinds, built = builders.register_recording(gates)
    return kinds, built.provisioner.cloud


def _overlay(name: str, price: str, weight: int = 10, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name, **meta},
            "spec": {"weight": weight, "price": price,
                     "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                       "values": ["fake-it-1"]}]}}


def _conditions(world: builders.World, name: str) -> dict[str, tuple[str, str]]:
    obj = world.cluster.get("NodeOverlay", name)
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or ()}


def test_with_the_gate_off_nodeoverlays_are_never_listed_or_watched_and_the_cloud_is_not_wrapped() -> None:
    kinds, cloud = _touched(settings.Settings(cluster_name="test"))
    assert "NodeOverlay" not in kinds
    assert not isinstance(cloud, overlay_provider.OverlaidProvider)


def test_with_the_gate_on_every_controller_gets_the_overlaid_cloud_and_nodeoverlays_are_watched() -> None:
    kinds, cloud = _touched(GATE_ON)
    assert "NodeOverlay" in kinds and isinstance(cloud, overlay_provider.OverlaidProvider)


def test_the_controller_writes_conditions_and_re_evaluates_when_an_overlay_changes() -> None:
    world = builders.make_world(settings_=GATE_ON, with_kubelet=False)
    world.cluster.create(builders.nodepool_manifest())
    world.cluster.create(_overlay("b-cheap", "0.001"))
    world.cluster.create(_overlay("a-rival", "0.002"))
    world.at(1)
    assert _conditions(world, "b-cheap") == {"ValidationSucceeded": ("True", "ValidationSucceeded"),
                                             "Ready": ("True", "Ready")}
    assert _conditions(world, "a-rival") == {"ValidationSucceeded": ("False", "Conflict"),
                                             "Ready": ("False", "UnhealthyDependents")}
    cloud = world.karpy.provisioner.cloud
    pool = world.karpy.state.nodepools()[0]
    price = {t.name: t.cheapest_price() for t in cloud.get_instance_types(pool)}["fake-it-1"]
    assert price == 0.001
    rival = world.cluster.get("NodeOverlay", "a-rival")
    rival["spec"]["weight"] = 20  # no longer equal: a-rival wins
    world.cluster.update(rival)
    world.run_for(1)
    assert _conditions(world, "a-rival")["ValidationSucceeded"] == ("True", "ValidationSucceeded")
    assert {t.name: t.cheapest_price() for t in cloud.get_instance_types(pool)}["fake-it-1"] == 0.002


def test_an_unchanged_evaluation_writes_no_status() -> None:
    world = builders.make_world(settings_=GATE_ON, with_kubelet=False)
    world.cluster.create(builders.nodepool_manifest())
    world.cluster.create(_overlay("only", "0.001"))
    world.at(1)
    version = world.cluster.get("NodeOverlay", "only")["metadata"]["resourceVersion"]
    world.manager.enqueue(controller_mod.NAME, controller_mod.KEY)
    world.run_for(1)
    assert world.cluster.get("NodeOverlay", "only")["metadata"]["resourceVersion"] == version


def test_a_nodepool_created_later_is_evaluated_before_it_is_provisioned_from() -> None:
    world = builders.make_world(settings_=GATE_ON)
    world.cluster.create(_overlay("cheap-1", "0.0001"))
    world.at(1)
    world.cluster.create(builders.nodepool_manifest())
    world.cluster.create(builders.pending_pod("p", cpu="500m"))
    world.run_for(120)
    (claim,) = world.nodeclaims()
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "fake-it-1"
    assert claim["metadata"]["annotations"]["karpenter.sh/price-overlay-applied"] == "true"
