"""The catalog registry, the benchmark and KWOK catalogs, and the JSON form of instance types."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence

import pytest

from karpy.api import errors, labels, quantity
from karpy.cloudprovider import catalog, instancetype
from karpy.cloudprovider.fake import instancetypes as fake_types
from karpy.cloudprovider.kwok import instancetypes as kwok_types

GI = 2**30 * quantity.MILLI
MI = 2**20 * quantity.MILLI


def by_name(types: Sequence[instancetype.InstanceType]) -> dict[str, instancetype.InstanceType]:
    return {t.name: t for t in types}


def expect_offerings(t: instancetype.InstanceType, expected: list[tuple[str, str]]) -> None:
    assert [(o.zone, o.capacity_type) for o in t.offerings] == expected


def expect_sorted_by_name(types: Sequence[instancetype.InstanceType]) -> None:
    names = [t.name for t in types]
    assert names == sorted(names)
    assert len(set(names)) == len(names)


# --- benchmark ---------------------------------------------------------------------------------


def test_the_benchmark_catalog_has_four_hundred_types_sorted_by_name() -> None:
    types = catalog.load("benchmark")
    assert len(types) == 400
    expect_sorted_by_name(types)


def test_benchmark_type_i_has_i_plus_one_cpus_twice_that_in_gib_and_ten_pods_per_cpu() -> None:
    t = by_name(catalog.load("benchmark"))["fake-it-9"]
    assert t.capacity == {"cpu": 10_000, "memory": 20 * GI, "pods": 100_000}
    assert t.labels[labels.INSTANCE_TYPE] == "fake-it-9"
    assert t.labels[labels.ARCH] == "amd64"
    assert t.labels[labels.OS] == "linux"
    assert t.labels[fake_types.LABEL_INTEGER] == "10"
    assert t.labels[fake_types.LABEL_SIZE] == "large"


def test_benchmark_types_are_offered_spot_in_two_zones_and_on_demand_in_three() -> None:
    t = by_name(catalog.load("benchmark"))["fake-it-0"]
    expect_offerings(t, [
        ("test-zone-1", "spot"), ("test-zone-2", "spot"),
        ("test-zone-1", "on-demand"), ("test-zone-2", "on-demand"), ("test-zone-3", "on-demand"),
    ])


def test_benchmark_prices_are_a_tenth_per_cpu_plus_a_tenth_per_gigabyte_for_spot_and_on_demand() -> None:
    t = by_name(catalog.load("benchmark"))["fake-it-1"]
    expected = 0.1 * 2 + 0.1 * (4 * 2**30) / 1e9
    assert [o.price for o in t.offerings] == pytest.approx([expected] * 5)


def test_benchmark_allocatable_subtracts_the_fake_providers_fixed_overhead() -> None:
    t = by_name(catalog.load("benchmark"))["fake-it-0"]
    assert t.allocatable["cpu"] == 900
    assert t.allocatable["memory"] == 2 * GI - 10 * MI


def test_a_small_benchmark_can_be_built_with_other_zones() -> None:
    types = fake_types.benchmark(3, zones=("a", "b", "c"))
    assert [t.name for t in types] == ["fake-it-0", "fake-it-1", "fake-it-2"]
    assert types[0].zones == frozenset({"a", "b", "c"})


# --- kwok --------------------------------------------------------------------------------------


def test_the_kwok_catalog_has_one_type_per_cpu_memory_os_and_arch() -> None:
    types = catalog.load("kwok")
    assert len(types) == 12 * 3 * 2 * 2
    expect_sorted_by_name(types)
    assert {t.labels[labels.OS] for t in types} == {"linux", "windows"}
    assert {t.labels[labels.ARCH] for t in types} == {"amd64", "arm64"}


def test_a_kwok_type_carries_karpenters_kwok_labels_and_capacity() -> None:
    t = by_name(catalog.load("kwok"))["c-4x-amd64-linux"]
    assert t.capacity == {"cpu": 4000, "memory": 8 * GI, "pods": 64_000, "ephemeral-storage": 20 * GI}
    assert t.labels[kwok_types.LABEL_INSTANCE_FAMILY] == "c"
    assert t.labels[kwok_types.LABEL_INSTANCE_CPU] == "4"
    assert t.labels[kwok_types.LABEL_INSTANCE_MEMORY] == "8Gi"
    assert t.labels[kwok_types.LABEL_INSTANCE_SIZE] == "4"
    assert t.allocatable["cpu"] == 3900
    assert t.allocatable["memory"] == 8 * GI - 10 * MI


def test_kwok_pods_are_sixteen_per_cpu_up_to_1024() -> None:
    types = by_name(catalog.load("kwok"))
    assert types["m-32x-arm64-windows"].capacity["pods"] == 512_000
    assert types["m-256x-arm64-windows"].capacity["pods"] == 1_024_000


def test_kwok_spot_costs_seventy_percent_of_on_demand_in_four_zones() -> None:
    t = by_name(catalog.load("kwok"))["s-1x-amd64-linux"]
    on_demand = 0.025 + 0.001 * 4 * 2**30 / 1e9
    assert t.zones == frozenset({"test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"})
    for o in t.offerings:
        assert o.price == pytest.approx(on_demand if o.capacity_type == "on-demand" else on_demand * 0.7)
    assert len(t.offerings) == 8


# --- registry ----------------------------------------------------------------------------------


def test_an_unknown_catalog_name_is_a_validation_error_naming_the_choices() -> None:
    with pytest.raises(errors.ValidationError, match="one of aws, azure, benchmark, kwok"):
        catalog.load("gcp")


def test_a_region_for_the_benchmark_catalog_is_rejected() -> None:
    with pytest.raises(errors.ValidationError, match="region"):
        catalog.load("benchmark", region="us-east-1")


def test_a_zone_filter_keeps_only_offerings_in_those_zones() -> None:
    types = catalog.load("benchmark", zones=["test-zone-3"])
    assert len(types) == 400
    assert all(t.zones == frozenset({"test-zone-3"}) for t in types)
    assert all(t.capacity_types == frozenset({"on-demand"}) for t in types)


def test_a_zone_the_catalog_does_not_offer_is_an_error_naming_the_zones_it_does() -> None:
    with pytest.raises(errors.ValidationError) as info:
        catalog.load("kwok", zones=["test-zone-a", "mars-1a"])
    [err] = info.value.errors
    assert (err.path, err.found) == ("zones[1]", "mars-1a")
    assert err.expected == "a zone: test-zone-a, test-zone-b, test-zone-c, test-zone-d"


def test_a_zone_of_another_region_is_an_error_naming_the_regions_zones() -> None:
    with pytest.raises(errors.ValidationError) as info:
        catalog.load("azure", region="westeurope", zones=["eastus-1"])
    [err] = info.value.errors
    assert err.expected == "a zone of region westeurope: westeurope-1, westeurope-2, westeurope-3"
    with pytest.raises(errors.ValidationError, match='region westcentralus: "" \\(regional\\)'):
        catalog.load("azure", region="westcentralus", zones=["westcentralus-1"])
    assert catalog.load("azure", region="westcentralus", zones=[""])


def test_loading_twice_returns_fresh_lists_of_the_same_instance_types() -> None:
    first = catalog.load("kwok")
    first.clear()
    second = catalog.load("kwok")
    assert len(second) == 144
    assert second[0] is catalog.load("kwok")[0]


# --- kubelet overrides and spot stand-ins --------------------------------------------------------


def test_kubelet_overrides_accept_camel_case_and_snake_case_keys() -> None:
    camel = catalog.kubelet_config({"maxPods": 110, "kubeReserved": {"cpu": "200m"},
                                    "evictionHard": {"memory.available": "5%"}, "clusterDNS": ["10.0.0.10"]})
    snake = catalog.kubelet_config({"max_pods": 110, "kube_reserved": {"cpu": 200},
                                    "eviction_hard": {"memory.available": "5%"}})
    assert camel == snake
    assert camel.max_pods == 110
    assert camel.kube_reserved == (("cpu", 200),)


def test_a_bad_kubelet_quantity_is_a_validation_error_naming_the_field() -> None:
    with pytest.raises(errors.ValidationError, match=r"kubeReserved\.memory"):
        catalog.kubelet_config({"kubeReserved": {"memory": "lots"}})
    with pytest.raises(errors.ValidationError, match=r"evictionHard\.memory\.available"):
        catalog.kubelet_config({"evictionHard": {"memory.available": "ten%"}})
    with pytest.raises(errors.ValidationError, match="maxPods"):
        catalog.kubelet_config({"maxPods": -1})


def test_eviction_amounts_are_percentages_of_capacity_or_quantities() -> None:
    assert catalog.eviction_amount(20 * GI, "10%") == 2 * GI
    assert catalog.eviction_amount(20 * GI, "500Mi") == 500 * MI
    assert catalog.eviction_amount(20 * GI, "100%") == 0


def test_spot_fractions_are_deterministic_and_between_thirty_and_seventy_percent() -> None:
    fractions = [catalog.spot_fraction(f"type-{i}", "zone-a") for i in range(500)]
    assert all(0.3 <= f < 0.7 for f in fractions)
    assert catalog.spot_fraction("type-1", "zone-a") == fractions[1]
    assert min(fractions) < 0.35 and max(fractions) > 0.65
    assert catalog.spot_fraction("m5.large", "us-east-1a") != catalog.spot_fraction("m5.large", "us-east-1b")


# --- JSON form ---------------------------------------------------------------------------------


def test_to_json_writes_the_documented_keys_with_node_style_quantities() -> None:
    doc = catalog.to_json(by_name(catalog.load("benchmark")).values())
    entry = next(e for e in doc if e["name"] == "fake-it-1")
    assert set(entry) == {"name", "labels", "capacity", "allocatable", "offerings"}
    assert entry["capacity"] == {"cpu": "2", "memory": "4Gi", "pods": "20"}
    assert entry["allocatable"] == {"cpu": "1900m", "memory": "4086Mi", "pods": "20"}
    assert set(entry["offerings"][0]) == {"zone", "capacityType", "price", "available"}
    json.dumps(doc)


def test_a_catalog_round_trips_through_json_with_the_same_allocatable_and_offerings() -> None:
    original = catalog.load("kwok")[:10]
    again = catalog.from_json(json.loads(json.dumps(catalog.to_json(original))))
    assert [t.name for t in again] == [t.name for t in original]
    for a, b in zip(original, again, strict=True):
        assert a.capacity == b.capacity
        assert a.allocatable == b.allocatable
        assert a.offerings == b.offerings
        assert a.labels == b.labels


def test_from_json_fills_in_defaults_for_a_hand_written_type() -> None:
    [t] = catalog.from_json([{"name": "tiny", "capacity": {"cpu": "2", "memory": "4Gi", "pods": 10},
                              "offerings": [{"zone": "z1", "capacityType": "spot", "price": 0.05}]}])
    assert t.labels == {labels.INSTANCE_TYPE: "tiny"}
    assert t.allocatable == t.capacity
    assert t.offerings == (instancetype.Offering("z1", "spot", 0.05, True),)


SPOT = {"zone": "z", "capacityType": "spot", "price": 1}


@pytest.mark.parametrize(("entry", "path"), [
    ({"capacity": {"cpu": "1"}, "offerings": [SPOT]}, "[0].name"),
    ({"name": "x", "capacity": {"cpu": "one"}, "offerings": [SPOT]}, "[0].capacity.cpu"),
    ({"name": "x", "capacity": {"cpu": "1"}, "allocatable": {"cpu": "2"}, "offerings": [SPOT]},
     "[0].allocatable.cpu"),
    ({"name": "x", "capacity": {"cpu": "1"}, "offerings": [{**SPOT, "capacityType": "cheap"}]},
     "[0].offerings[0].capacityType"),
    ({"name": "x", "capacity": {"cpu": "1"}, "offerings": [{**SPOT, "price": -1}]}, "[0].offerings[0].price"),
    ({"name": "x", "capacity": {"cpu": "1"}, "offerings": []}, "[0].offerings"),
])
def test_from_json_rejects_bad_entries_naming_the_field(entry: dict[str, object], path: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        catalog.from_json([entry], obj="my-catalog.json")
    assert info.value.errors[0].obj == "my-catalog.json"
    assert info.value.errors[0].path == path


def test_from_json_rejects_a_name_used_twice() -> None:
    entry = {"name": "x", "capacity": {"cpu": "1"}, "offerings": [SPOT]}
    with pytest.raises(errors.ValidationError, match="not used by an earlier"):
        catalog.from_json([entry, entry])


def test_a_catalog_file_is_read_from_disk(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "types.json"
    path.write_text(catalog.render_json(catalog.load("benchmark")[:3]))
    assert [t.name for t in catalog.read_file(path)] == ["fake-it-0", "fake-it-1", "fake-it-10"]
    path.write_text("{not json")
    with pytest.raises(errors.ValidationError, match="JSON"):
        catalog.read_file(path)


# --- listing -----------------------------------------------------------------------------------


def test_zones_sharing_a_prefix_are_summarised_with_braces() -> None:
    assert catalog.zones_summary(["us-east-1a", "us-east-1b", "us-east-1f"]) == "us-east-1{a,b,f}"
    assert catalog.zones_summary(["eastus-1"]) == "eastus-1"
    assert catalog.zones_summary([""]) == "-"
    assert catalog.zones_summary(["a", "ab"]) == "a,ab"


def test_a_table_row_shows_allocatable_and_the_cheapest_price_per_capacity_type() -> None:
    r = catalog.row(by_name(catalog.load("kwok"))["c-2x-amd64-linux"])
    on_demand = 0.025 * 2 + 0.001 * 4 * 2**30 / 1e9
    assert (r.vcpu, r.memory, r.pods, r.allocatable_cpu) == ("2", "4Gi", "32", "1900m")
    assert r.allocatable_memory == "4086Mi"
    assert r.on_demand == f"{on_demand:.4f}"
    assert r.spot == f"{on_demand * 0.7:.4f}"
    assert r.zones == "test-zone-{a,b,c,d}"
