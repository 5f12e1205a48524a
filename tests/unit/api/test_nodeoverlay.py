"""The ``karpenter.sh/v1alpha1`` NodeOverlay model: parsing, Karpenter's validation rules, its price arithmetic
and its weight order. Expectations from Karpenter v1.14: ``pkg/apis/v1alpha1/nodeoverlay_validation_test.go``,
the CRD's patterns and CEL rules (``karpenter.sh_nodeoverlays.yaml``), ``cloudprovider.AdjustedPrice`` and
``NodeOverlayList.OrderByWeight``, and the NodeOverlays docs page."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import errors, manifest, nodeoverlay


def _overlay(**spec: Any) -> dict[str, Any]:
    spec.setdefault("requirements", [])
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"}, "spec": spec}


def _errors(**spec: Any) -> list[tuple[str, str]]:
    o = nodeoverlay.NodeOverlay.from_manifest(_overlay(**spec))
    return [(e.path, e.expected) for e in nodeoverlay.validate(o)]


def test_the_docs_example_is_read_field_for_field_and_written_back() -> None:
    o = nodeoverlay.NodeOverlay.from_manifest(_overlay(
        weight=10, requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                  "values": ["m5.large", "m5.xlarge"]}],
        priceAdjustment="+10%", capacity={"hugepages-2Mi": "100Mi", "custom-device/gpu-slice": 4}))
    assert o.weight == 10 and o.price_adjustment == "+10%" and o.price is None
    assert o.requirements[0].values == ("m5.large", "m5.xlarge")
    assert o.capacity == {"hugepages-2Mi": 100 * 2**20 * 1000, "custom-device/gpu-slice": 4000}
    assert nodeoverlay.validate(o) == []
    assert nodeoverlay.NodeOverlay.from_manifest(o.to_manifest()) == o


def test_a_price_given_as_a_yaml_number_is_read_as_its_text() -> None:
    o = nodeoverlay.NodeOverlay.from_manifest(_overlay(price=5))
    assert o.price == "5" and nodeoverlay.validate(o) == []


def test_price_and_price_adjustment_together_are_refused_as_the_crd_refuses_them() -> None:
    assert ("spec", "at most one of price and priceAdjustment (cannot set both 'price' and 'priceAdjustment')") \
        in _errors(price="1", priceAdjustment="+1")


@pytest.mark.parametrize("value", ["+0.1", "-0.1", "+10%", "-10%", "-99.5%", "-100%", "+250%", "+.5"])
def test_price_adjustments_karpenters_pattern_admits_are_valid(value: str) -> None:
    assert _errors(priceAdjustment=value) == []


@pytest.mark.parametrize("value", ["10%", "0.1", "-101%", "-150%", "+", "+10%%", "ten"])
def test_price_adjustments_karpenters_pattern_refuses_name_the_field(value: str) -> None:
    assert [p for p, _ in _errors(priceAdjustment=value)] == ["spec.priceAdjustment"]


@pytest.mark.parametrize("value", ["-1", "+1", "1e3", "abc"])
def test_a_price_must_be_an_unsigned_decimal(value: str) -> None:
    assert _errors(price=value) == [("spec.price", nodeoverlay.PRICE_EXPECTED)]


@pytest.mark.parametrize("weight", [0, 10_001, -1])
def test_a_weight_outside_1_to_10000_is_refused(weight: int) -> None:
    assert [p for p, _ in _errors(weight=weight)] == ["spec.weight"]


@pytest.mark.parametrize("resource", ["cpu", "memory", "ephemeral-storage", "pods"])
def test_capacity_may_not_name_a_well_known_resource(resource: str) -> None:
    """Karpenter's validation test: "should fail validation for invalid capacity values"."""
    assert [p for p, _ in _errors(capacity={resource: "1"})] == [f"spec.capacity.{resource}"]


def test_requirement_rules_are_karpenters() -> None:
    """``NotIn``/``In`` need values, ``Gt``... a single integer, karpenter.sh keys other than the capacity
    type and the NodePool and kubernetes.io/hostname are restricted (the CRD's CEL rules)."""
    found = _errors(requirements=[
        {"key": "karpenter.sh/capacity-type", "operator": "NotIn"},
        {"key": "karpenter.sh/nodepool", "operator": "In"},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["a"]},
        {"key": "karpenter.sh/unknown", "operator": "Exists"},
        {"key": "kubernetes.io/hostname", "operator": "Exists"},
        {"key": "topology.kubernetes.io/zone", "operator": "DoesNotExist", "values": ["a"]},
    ])
    assert [p for p, _ in found] == ["spec.requirements[0].values", "spec.requirements[1].values",
                                     "spec.requirements[2].values", "spec.requirements[3].key",
                                     "spec.requirements[4].key", "spec.requirements[5].values"]


def test_more_than_100_requirements_are_refused() -> None:
    reqs = [{"key": f"example.com/k{i}", "operator": "Exists"} for i in range(101)]
    assert ("spec.requirements", "at most 100 requirements") in _errors(requirements=reqs)


def test_the_loader_names_document_kind_field_expected_and_found() -> None:
    text = ("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: bad}\n"
            "spec: {requirements: [], priceAdjustment: '10%', weight: 20000}\n")
    with pytest.raises(errors.ValidationError) as exc:
        manifest.load_documents(text, source="overlay.yaml")
    found = {(e.obj, e.path, str(e.found)) for e in exc.value.errors}
    assert found == {("document 1 (NodeOverlay/bad)", "spec.priceAdjustment", "10%"),
                     ("document 1 (NodeOverlay/bad)", "spec.weight", "20000")}


def test_a_misspelt_field_is_refused_with_a_suggestion() -> None:
    text = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: o}\nspec: {requirements: [], " \
           "priceAdjustmnt: '+1'}\n"
    with pytest.raises(errors.ValidationError) as exc:
        manifest.load_documents(text)
    (err,) = exc.value.errors
    assert err.path == "spec.priceAdjustmnt" and "priceAdjustment" in err.expected


def test_a_capacity_that_is_not_a_quantity_names_the_resource() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        nodeoverlay.NodeOverlay.from_manifest(_overlay(capacity={"smarter-devices/fuse": "lots"}))
    assert exc.value.errors[0].path == "spec.capacity.smarter-devices/fuse"


@pytest.mark.parametrize(("price", "change", "want"), [
    (1.0, None, 1.0), (1.0, "", 1.0), (1.0, "5.00", 5.0), (1.0, "0", 0.0),
    (1.0, "+0.5", 1.5), (1.0, "-0.25", 0.75), (1.0, "-2", 0.0),
    (2.0, "+10%", 2.2), (2.0, "-10%", 1.8), (2.0, "-100%", 0.0),
])
def test_adjusted_price_is_karpenters_arithmetic(price: float, change: str | None, want: float) -> None:
    """``cloudprovider.AdjustedPrice``: unsigned overrides, signed adds, ``%`` scales, never below 0."""
    assert nodeoverlay.adjusted_price(price, change) == pytest.approx(want)


def test_overlays_are_ordered_by_weight_then_by_name_later_in_the_alphabet_first() -> None:
    def o(name: str, weight: int | None) -> nodeoverlay.NodeOverlay:
        return nodeoverlay.NodeOverlay.from_manifest({**_overlay(**({"weight": weight} if weight else {})),
                                                      "metadata": {"name": name}})

    ordered = nodeoverlay.order_by_weight([o("a", 5), o("b", None), o("c", 5), o("d", 10)])
    assert [x.name for x in ordered] == ["d", "c", "a", "b"]
