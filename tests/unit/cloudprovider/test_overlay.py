"""NodeOverlays over instance types: selection, prices, capacity, weights and conflicts, and the overlaid
cloud provider. Expectations from Karpenter v1.14's ``pkg/controllers/nodeoverlay/suite_test.go`` (named in
each test) and the NodeOverlays docs page ("Conflict Resolution", "Example Conflict Resolution")."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import nodeclaim, nodeoverlay, nodepool
from karpy.cloudprovider import errors, instancetype, overlay, overlay_provider

ZONES = ("zone-a", "zone-b")


def _type(name: str, family: str, od: float, spot: float) -> instancetype.InstanceType:
    offerings = tuple(instancetype.Offering(z, ct, p) for z in ZONES
                      for ct, p in (("on-demand", od), ("spot", spot)))
    return instancetype.InstanceType(
        name, {"node.kubernetes.io/instance-type": name, "karpenter.k8s.aws/instance-family": family,
               "kubernetes.io/arch": "amd64"},
        {"cpu": 2000, "memory": 8 * 2**30 * 1000, "pods": 29000}, instancetype.Overhead(), offerings)


TYPES = [_type("c5.large", "c5", 0.085, 0.03), _type("m5.large", "m5", 0.096, 0.035),
         _type("m6i.large", "m6i", 0.096, 0.04)]


def _pool(name: str = "default", labels: dict[str, str] | None = None) -> nodepool.NodePool:
    return nodepool.NodePool.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": labels or {}}, "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
            "requirements": []}}}})


def _overlay(name: str, reqs: list[dict[str, Any]], **spec: Any) -> nodeoverlay.NodeOverlay:
    return nodeoverlay.NodeOverlay.from_manifest({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                                                  "metadata": {"name": name},
                                                  "spec": {"requirements": reqs, **spec}})


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


TYPE = "node.kubernetes.io/instance-type"


def _prices(t: instancetype.InstanceType) -> dict[tuple[str, str], float]:
    return {(o.zone, o.capacity_type): round(o.price, 6) for o in t.offerings}


def _applied(store: overlay.Store, pool: str = "default") -> dict[str, instancetype.InstanceType]:
    return {t.name: t for t in store.apply(pool, TYPES)}


def test_no_overlay_returns_the_same_instance_types() -> None:
    """"should return the same instance type when zero overlay are applied"."""
    store = overlay.evaluate([], [_pool()], {"default": TYPES})
    assert all(a is b for a, b in zip(store.apply("default", TYPES), TYPES, strict=True))


def test_a_percent_adjustment_changes_every_offering_of_the_selected_types_only() -> None:
    store = overlay.evaluate([_overlay("m6i", [_in("karpenter.k8s.aws/instance-family", "m6i")],
                                       priceAdjustment="-20%")], [_pool()], {"default": TYPES})
    out = _applied(store)
    assert set(_prices(out["m6i.large"]).values()) == {round(0.096 * 0.8, 6), round(0.04 * 0.8, 6)}
    assert out["c5.large"] is TYPES[0] and out["m5.large"] is TYPES[1]
    assert store.applied == ("m6i",) and store.conflicts == ()


def test_requirements_on_capacity_type_and_zone_select_offerings() -> None:
    """Karpenter selects the offerings compatible with the overlay (``Offerings.Compatible``)."""
    store = overlay.evaluate([_overlay("spot-a", [_in("karpenter.sh/capacity-type", "spot"),
                                                  _in("topology.kubernetes.io/zone", "zone-a")], price="1.5")],
                             [_pool()], {"default": TYPES})
    prices = _prices(_applied(store)["c5.large"])
    assert prices == {("zone-a", "on-demand"): 0.085, ("zone-a", "spot"): 1.5,
                      ("zone-b", "on-demand"): 0.085, ("zone-b", "spot"): 0.03}


def test_a_key_the_instance_type_does_not_define_selects_nothing() -> None:
    """Karpenter's ``Compatible`` without undefined labels allowed: every key the overlay names must be known."""
    store = overlay.evaluate([_overlay("gpu", [_in("karpenter.k8s.aws/instance-gpu-count", "1")], price="9")],
                             [_pool()], {"default": TYPES})
    assert all(a is b for a, b in zip(store.apply("default", TYPES), TYPES, strict=True))


def test_nodepool_name_and_template_labels_select_the_types_of_one_nodepool_only() -> None:
    """"should only apply override for nodepool that defined in the overlay requirements" and "...for
    nodeclaim spec labels that defined in the overlay requirements"."""
    pools = [_pool("a", {"team": "web"}), _pool("b")]
    by_pool = overlay.evaluate([_overlay("a-only", [_in("karpenter.sh/nodepool", "a")], price="7")], pools,
                               {"a": TYPES, "b": TYPES})
    by_label = overlay.evaluate([_overlay("web", [_in("team", "web")], price="7")], pools, {"a": TYPES, "b": TYPES})
    for store in (by_pool, by_label):
        assert set(_prices(_applied(store, "a")["c5.large"]).values()) == {7.0}
        assert _applied(store, "b")["c5.large"] is TYPES[0]


def test_the_higher_weight_sets_the_price_and_capacity_from_both_is_merged() -> None:
    """The docs' "Example Conflict Resolution": overlay-b (weight 10, -20 %) wins the price over overlay-a
    (weight 5, -10 %); capacity hugepages-2Mi from a and custom-device/gpu from b are merged."""
    a = _overlay("overlay-a", [_in(TYPE, "m5.large")], weight=5, priceAdjustment="-10%",
                 capacity={"hugepages-2Mi": "50Mi"})
    b = _overlay("overlay-b", [_in(TYPE, "m5.large")], weight=10, priceAdjustment="-20%",
                 capacity={"custom-device/gpu": "1"})
    store = overlay.evaluate([a, b], [_pool()], {"default": TYPES})
    m5 = _applied(store)["m5.large"]
    assert _prices(m5)[("zone-a", "on-demand")] == round(0.096 * 0.8, 6)
    assert m5.capacity["hugepages-2Mi"] == 50 * 2**20 * 1000 and m5.capacity["custom-device/gpu"] == 1000
    assert m5.capacity["cpu"] == 2000
    assert store.conflicts == () and set(store.applied) == {"overlay-a", "overlay-b"}


def test_a_higher_weight_capacity_wins_the_same_resource() -> None:
    """"should update capacity for instance types from multiple overlays": per resource, the heavier one."""
    heavy = _overlay("heavy", [_in(TYPE, "m5.large")], weight=20, capacity={"smarter-devices/fuse": "4"})
    light = _overlay("light", [_in(TYPE, "m5.large")], weight=1, capacity={"smarter-devices/fuse": "1"})
    store = overlay.evaluate([light, heavy], [_pool()], {"default": TYPES})
    assert _applied(store)["m5.large"].capacity["smarter-devices/fuse"] == 4000
    assert store.conflicts == ()


def test_equal_weights_on_the_same_offering_conflict_and_the_later_in_order_is_not_applied() -> None:
    """"should fail when requirements overlays overlap": overlay-a (arch) and overlay-b (capacity type Exists),
    both weight 10 with a price: overlay-b comes first (later in the alphabet) and is applied; overlay-a
    conflicts."""
    a = _overlay("overlay-a", [_in("kubernetes.io/arch", "amd64")], weight=10, price="1.03")
    b = _overlay("overlay-b", [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}], weight=10, price="23")
    store = overlay.evaluate([a, b], [_pool()], {"default": TYPES})
    assert store.conflicts == ("overlay-a",) and store.applied == ("overlay-b",)
    assert set(_prices(_applied(store)["c5.large"]).values()) == {23.0}


def test_equal_weights_on_disjoint_offerings_do_not_conflict() -> None:
    """"should succeed with requirements overlays don't overlap" (offerings: one zone each)."""
    a = _overlay("a", [_in("topology.kubernetes.io/zone", "zone-a")], weight=10, price="1")
    b = _overlay("b", [_in("topology.kubernetes.io/zone", "zone-b")], weight=10, price="2")
    store = overlay.evaluate([a, b], [_pool()], {"default": TYPES})
    assert store.conflicts == ()
    prices = _prices(_applied(store)["m5.large"])
    assert prices[("zone-a", "spot")] == 1.0 and prices[("zone-b", "spot")] == 2.0


def test_equal_weight_capacity_conflicts_only_on_the_same_resource() -> None:
    """"should fail with conflicting capacity overlays with multiple overlays": good-overlay-1 (fuse) and
    conflicting-overlay-2 (hugepage-1Gi) apply; conflicting-overlay-1 (hugepage-1Gi again) conflicts."""
    c1 = _overlay("conflicting-overlay-1", [_in(TYPE, "c5.large", "m5.large")], weight=10,
                  capacity={"hugepage-1Gi": "2Gi"})
    good = _overlay("good-overlay-1", [_in(TYPE, "c5.large")], weight=10, capacity={"smarter-devices/fuse": "1"})
    c2 = _overlay("conflicting-overlay-2", [_in(TYPE, "c5.large")], weight=10, capacity={"hugepage-1Gi": "3Gi"})
    store = overlay.evaluate([c1, good, c2], [_pool()], {"default": TYPES})
    assert store.conflicts == ("conflicting-overlay-1",)
    out = _applied(store)
    assert out["c5.large"].capacity["hugepage-1Gi"] == 3 * 2**30 * 1000
    assert "hugepage-1Gi" not in out["m5.large"].capacity


def test_a_conflicting_overlay_is_applied_nowhere() -> None:
    """"should that there is not a partial application for instance types / for nodepools"."""
    a = _overlay("overlay-a", [_in(TYPE, "c5.large", "m5.large", "m6i.large")], weight=10,
                 capacity={"smarter-devices/buz": "54"})
    b = _overlay("overlay-b", [_in(TYPE, "m5.large")], weight=10, capacity={"smarter-devices/buz": "21"})
    store = overlay.evaluate([a, b], [_pool("x"), _pool("y")], {"x": TYPES, "y": TYPES})
    assert store.conflicts == ("overlay-a",)
    for pool in ("x", "y"):
        out = _applied(store, pool)
        assert "smarter-devices/buz" not in out["c5.large"].capacity
        assert out["m5.large"].capacity["smarter-devices/buz"] == 21000


def test_an_invalid_overlay_is_left_out_and_says_why() -> None:
    """"should not apply capacity adjustments for invalid overlay"."""
    bad = _overlay("bad", [_in(TYPE, "m5.large")], capacity={"cpu": "4"})
    store = overlay.evaluate([bad], [_pool()], {"default": TYPES})
    assert "spec.capacity.cpu" in store.invalid["bad"]
    assert _applied(store)["m5.large"] is TYPES[1]


def test_a_nodepool_without_instance_types_is_not_evaluated() -> None:
    """"should evaluate healthy NodePools when one NodePool fails GetInstanceTypes"."""
    store = overlay.evaluate([_overlay("o", [], price="1")], [_pool("ok"), _pool("broken")], {"ok": TYPES})
    assert store.evaluated == frozenset({"ok"})


# ----------------------------------------------------------------------------- the overlaid provider


class _Cloud:
    name = "test"

    def __init__(self) -> None:
        self.created: list[nodeclaim.NodeClaim] = []
        self.short: set[str] = set()

    def get_instance_types(self, pool: nodepool.NodePool | None) -> list[instancetype.InstanceType]:
        return list(TYPES)

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        self.created.append(claim)
        (names,) = [r.values for r in claim.spec.requirements if r.key == TYPE]
        name = min(names, key=lambda n: next(t for t in TYPES if t.name == n).cheapest_price() or 0)
        if name in self.short:
            raise errors.InsufficientCapacityError([(name, "zone-a", "on-demand")])
        meta = claim.metadata
        return nodeclaim.NodeClaim.from_manifest({**claim.to_manifest(), "metadata": {
            **meta.to_dict(), "labels": {**meta.labels, TYPE: name}}})


def _claim(*names: str) -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                 "requirements": [_in(TYPE, *names), _in("karpenter.sh/capacity-type", "on-demand")],
                 "resources": {"requests": {"cpu": "1", "smarter-devices/fuse": "1"}}}})


def _provider(*overlays: nodeoverlay.NodeOverlay) -> tuple[overlay_provider.OverlaidProvider, _Cloud]:
    cloud = _Cloud()
    p = overlay_provider.OverlaidProvider(cloud)
    p.refresh = lambda: p.use(overlay.evaluate(list(overlays), [_pool()], {"default": TYPES}))
    return p, cloud


def test_the_provider_evaluates_an_unevaluated_nodepool_and_keeps_output_objects_between_calls() -> None:
    p, _ = _provider(_overlay("m6i", [_in("karpenter.k8s.aws/instance-family", "m6i")], priceAdjustment="-20%"))
    first = p.get_instance_types(_pool())
    again = p.get_instance_types(_pool())
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True, True]
    assert first[0] is TYPES[0] and first[2] is not TYPES[2]
    assert p.get_instance_types(None) == TYPES


def test_a_nodepool_still_unevaluated_is_a_retryable_error_naming_it() -> None:
    p = overlay_provider.OverlaidProvider(_Cloud())
    with pytest.raises(errors.CloudProviderError, match="NodePool default has not been evaluated") as exc:
        p.get_instance_types(_pool())
    assert exc.value.retryable


def test_create_launches_the_cheapest_overlaid_type_first_and_moves_on_when_it_has_no_capacity() -> None:
    """Karpenter's AWS provider with ``karpenter.sh/price-overlay-applied``: CreateFleet ``prioritized``, the
    overlaid price as priority."""
    p, cloud = _provider(_overlay("m6i", [_in("karpenter.k8s.aws/instance-family", "m6i")], price="0.01"),
                         _overlay("m5", [_in(TYPE, "m5.large")], price="0.02"),
                         _overlay("fuse", [_in(TYPE, "m6i.large", "m5.large")], capacity={"smarter-devices/fuse": "8"}))
    p.get_instance_types(_pool())
    launched = p.create(_claim("c5.large", "m5.large", "m6i.large"))
    assert launched.metadata.labels[TYPE] == "m6i.large"
    assert launched.metadata.annotations[nodeoverlay.PRICE_OVERLAY_APPLIED] == "true"
    assert launched.metadata.annotations[nodeoverlay.CAPACITY_OVERLAY_APPLIED] == "true"
    assert launched.status.capacity["smarter-devices/fuse"] == 8000
    assert "smarter-devices/fuse" not in cloud.created[0].spec.resources_requests  # the cloud never heard of it
    assert launched.spec == _claim("c5.large", "m5.large", "m6i.large").spec
    cloud.short = {"m6i.large"}
    assert p.create(_claim("c5.large", "m5.large", "m6i.large")).metadata.labels[TYPE] == "m5.large"
    cloud.short = {"m6i.large", "m5.large", "c5.large"}
    with pytest.raises(errors.InsufficientCapacityError) as exc:
        p.create(_claim("c5.large", "m5.large", "m6i.large"))
    assert [o[0] for o in exc.value.offerings] == ["m6i.large", "m5.large", "c5.large"]


def test_create_without_a_price_overlay_is_the_clouds_choice() -> None:
    p, cloud = _provider()
    p.get_instance_types(_pool())
    launched = p.create(_claim("c5.large", "m5.large"))
    assert launched.metadata.labels[TYPE] == "c5.large" and len(cloud.created) == 1
    assert nodeoverlay.PRICE_OVERLAY_APPLIED not in launched.metadata.annotations
