"""Kubernetes quantities as integer milli-units, and resource lists read from manifests."""

from __future__ import annotations

import pytest

from karpy.api import errors, fields, quantity

GI = 2**30 * 1000


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("1500m", 1500),
        ("2Gi", 2 * GI),
        ("7934284Ki", 7934284 * 1024 * 1000),
        ("2048Mi", 2 * GI),
        ("1e3", 1_000_000),
        ("0.5", 500),
        ("1k", 1_000_000),
        ("100M", 100 * 10**6 * 1000),
        ("+2", 2000),
        (1, 1000),
        (29, 29_000),
        (0.25, 250),
    ],
)
def test_a_quantity_becomes_exact_milli_units(text: str | int | float, milli: int) -> None:
    assert quantity.parse_milli(text) == milli


def test_amounts_finer_than_a_milli_unit_round_up() -> None:
    assert quantity.parse_milli("1u") == 1
    assert quantity.parse_milli("1500001u") == 1501


@pytest.mark.parametrize("bad", ["1.5.5", "Gi", "2 Gi", "12x", "", True, "1iB"])
def test_a_bad_quantity_is_rejected_with_the_offending_text(bad: object) -> None:
    with pytest.raises(quantity.QuantityError) as info:
        quantity.parse_milli(bad)  # type: ignore[arg-type]
    assert repr(bad) in str(info.value)


def test_node_style_formatting_reads_back_to_the_same_amount() -> None:
    amounts = {"cpu": 1930, "memory": 7244108 * 1024 * 1000, "pods": 29_000, "nvidia.com/gpu": 1000}
    formatted = quantity.format_list(amounts)
    assert formatted == {"cpu": "1930m", "memory": "7244108Ki", "nvidia.com/gpu": "1", "pods": "29"}
    assert {k: quantity.parse_milli(v) for k, v in formatted.items()} == amounts


def test_a_resource_list_reader_names_the_object_and_full_path_of_a_bad_amount() -> None:
    f = fields.Fields({"requests": {"cpu": "lots"}}, "Pod default/web-1", "spec.containers[0].resources")
    with pytest.raises(errors.ValidationError) as info:
        quantity.read_list(f, "requests")
    (err,) = info.value.errors
    assert err.obj == "Pod default/web-1"
    assert err.path == "spec.containers[0].resources.requests.cpu"
    assert err.found == "lots"
    assert "quantity" in err.expected


def test_a_resource_list_that_is_not_a_mapping_is_rejected() -> None:
    f = fields.Fields({"requests": ["1"]}, "Pod default/web-1", "spec")
    with pytest.raises(errors.ValidationError, match=r"spec\.requests"):
        quantity.read_list(f, "requests")


def test_an_absent_resource_list_is_empty() -> None:
    assert quantity.read_list(fields.Fields({}, "Pod x"), "requests") == {}
