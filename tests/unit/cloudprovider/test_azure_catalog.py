"""The Azure catalog reproduces AKS Node Auto-Provisioning's labels, capacity and overhead."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import types as pytypes
from collections.abc import Mapping
from typing import Any

import pytest

from karpy.api import errors, labels, quantity
from karpy.cloudprovider import catalog, instancetype
from karpy.cloudprovider.azure import instancetypes as azure

GI = 2**30 * quantity.MILLI
MI = 2**20 * quantity.MILLI
REPO = pathlib.Path(__file__).resolve().parents[3]
SKUS = pathlib.Path(__file__).resolve().parents[3].parent / "shared" / "data/azure-vm-skus.json"
PRICES = pathlib.Path(__file__).resolve().parents[3].parent / "shared" / "data/azure-on-demand-prices.json"
needs_shared_data = pytest.mark.skipif(not (SKUS.exists() and PRICES.exists()),
                                       reason="the shared Azure data files are not available")


def azure_types(region: str | None = None,
                kubelet: Mapping[str, Any] | None = None) -> dict[str, instancetype.InstanceType]:
    return {t.name: t for t in catalog.load("azure", region=region, kubelet=kubelet)}


def load_script() -> pytypes.ModuleType:
    spec = importlib.util.spec_from_file_location("generate_azure_catalog",
                                                  REPO / "scripts" / "generate_azure_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expect_labels(t: instancetype.InstanceType, expected: dict[str, str]) -> None:
    assert {k: t.labels.get(k) for k in expected} == expected


def test_standard_d2s_v3_carries_node_auto_provisionings_labels() -> None:
    t = azure_types()["Standard_D2s_v3"]
    expect_labels(t, {
        labels.INSTANCE_TYPE: "Standard_D2s_v3",
        labels.ARCH: "amd64",
        labels.OS: "linux",
        labels.REGION: "southcentralus",
        labels.AZURE_SKU_NAME: "Standard_D2s_v3",
        labels.AZURE_SKU_FAMILY: "D",
        labels.AZURE_SKU_VERSION: "3",
        labels.AZURE_SKU_CPU: "2",
        labels.AZURE_SKU_MEMORY: "8192",
        labels.AZURE_SKU_ACCELERATED_NETWORKING: "true",
        labels.AZURE_SKU_STORAGE_PREMIUM: "true",
        labels.AZURE_SKU_ENCRYPTION_AT_HOST: "true",
        labels.AZURE_SKU_STORAGE_EPHEMERAL_OS_MAX: "53",
        labels.AZURE_SKU_HYPERV_GENERATION: "2",
        labels.AZURE_SKU_GPU_COUNT: "0",
    })
    assert labels.AZURE_SKU_GPU_NAME not in t.labels


def test_standard_d2s_v3_costs_its_south_central_us_price_on_demand_in_three_zones() -> None:
    t = azure_types()["Standard_D2s_v3"]
    assert t.zones == frozenset({"southcentralus-1", "southcentralus-2", "southcentralus-3"})
    assert t.cheapest_price(capacity_types=frozenset({"on-demand"})) == 0.11
    spot = [o.price for o in t.offerings if o.capacity_type == "spot"]
    assert len(spot) == 3 and all(0.3 * 0.11 <= p < 0.7 * 0.11 for p in spot)


@needs_shared_data
def test_every_price_is_the_one_in_the_retail_price_file_for_its_region() -> None:
    prices = json.loads(PRICES.read_text())["prices"]
    for region in azure.regions():
        for t in catalog.load("azure", region=region):
            expected = prices[region][t.name]
            assert t.cheapest_price(capacity_types=frozenset({"on-demand"})) == expected, t.name


def test_standard_d2s_v3_capacity_and_aks_overhead() -> None:
    t = azure_types()["Standard_D2s_v3"]
    memory = 8 * 2**30 - -(-8 * 2**30 * 75 // 1000)
    assert t.capacity == {"cpu": 2000, "memory": memory * quantity.MILLI, "pods": 250_000,
                          "ephemeral-storage": 128 * 10**9 * quantity.MILLI}
    assert t.overhead.kube_reserved == {"cpu": 100, "memory": 1843 * MI}
    assert t.overhead.eviction_threshold == {"memory": 750 * MI}
    assert t.allocatable["cpu"] == 1900


@pytest.mark.parametrize(("vcpus", "memory_gib", "cpu", "memory_mib"), [
    (4, 7.0, 140, 1638), (2, 8.0, 100, 1843), (3, 64.0, 120, 5611), (64, 256.0, 740, 12165),
])
def test_kube_reserved_uses_aks_bracketed_rates(vcpus: int, memory_gib: float, cpu: int,
                                                memory_mib: int) -> None:
    assert azure.kube_reserved(vcpus, memory_gib) == {"cpu": cpu, "memory": memory_mib * MI}


def test_skus_aks_cannot_run_are_left_out_with_a_reason() -> None:
    types = azure_types()
    reasons = azure.skipped()
    for name in ("Standard_A0", "Standard_B1s", "Standard_M8-2ms", "Standard_DC8s_v3"):
        assert name not in types
        assert name in reasons
    assert reasons["Standard_M8-2ms"] == "constrained vCPUs"
    assert reasons["Standard_DC8s_v3"] == "confidential VM"
    assert reasons["Standard_B1s"] == "restricted by AKS"
    assert reasons["Standard_B1ls"] == "fewer than 2 vCPUs"


def test_an_nvidia_gpu_sku_carries_gpu_labels_and_capacity() -> None:
    t = azure_types()["Standard_NC16as_T4_v3"]
    expect_labels(t, {
        labels.AZURE_SKU_FAMILY: "N",
        labels.AZURE_SKU_SUBFAMILY: "C",
        labels.AZURE_SKU_GPU_MANUFACTURER: "nvidia",
        labels.AZURE_SKU_GPU_NAME: "T4",
        labels.AZURE_SKU_GPU_COUNT: "1",
    })
    assert t.capacity[azure.RESOURCE_NVIDIA_GPU] == 1000
    assert azure_types()["Standard_NC6s_v3"].labels[labels.AZURE_SKU_GPU_NAME] == "V100"


def test_an_arm_sku_is_arm64() -> None:
    assert azure_types()["Standard_D16plds_v5"].labels[labels.ARCH] == "arm64"


def test_an_unversioned_size_gets_version_one() -> None:
    assert azure_types()["Standard_B20ms"].labels[labels.AZURE_SKU_VERSION] == "1"


def test_a_region_without_availability_zones_has_one_regional_zone() -> None:
    types = azure_types("westcentralus")
    assert "Standard_D2s_v3" in types
    assert types["Standard_D2s_v3"].zones == frozenset({""})
    assert types["Standard_D2s_v3"].labels[labels.REGION] == "westcentralus"


def test_a_region_missing_from_the_data_is_rejected_naming_the_known_ones() -> None:
    with pytest.raises(errors.ValidationError, match="southcentralus, westcentralus"):
        catalog.load("azure", region="mars")


def test_max_pods_and_kube_reserved_overrides_apply() -> None:
    t = azure_types(kubelet={"maxPods": 30, "kubeReserved": {"memory": "1Gi"},
                             "evictionHard": {"memory.available": "100Mi"}})["Standard_D2s_v3"]
    assert t.capacity["pods"] == 30_000
    assert t.overhead.kube_reserved["memory"] == GI
    assert t.overhead.eviction_threshold == {"memory": 100 * MI}


def test_size_names_are_split_into_their_parts() -> None:
    size = azure.parse_size("NC24ads_A100_v4")
    assert size is not None
    assert (size.family, size.subfamily, size.cpus, size.features, size.accelerator, size.version) == (
        "N", "C", 24, "ads", "A100", "v4")
    constrained = azure.parse_size("M8-2ms")
    assert constrained is not None and constrained.constrained == 2
    assert azure.parse_size("not a size") is None


def test_price_keys_match_names_exactly_or_ignoring_case_and_blanks_but_never_host_meters() -> None:
    script = load_script()
    prices = {"Standard_D2s_v3": 0.1, "Standard_NM16ads_MA35D  ": 2.0, "Dsv3_Type3": 4.2}
    index = script.price_index(prices)
    assert script.lookup_price("Standard_D2s_v3", prices, index) == 0.1
    assert script.lookup_price("Standard_NM16ads_MA35D", prices, index) == 2.0
    assert script.lookup_price("standard_d2s_v3", prices, index) == 0.1
    assert script.lookup_price("Dsv3_Type3", {}, index) is None


def test_the_generator_skips_skus_without_a_price_and_counts_them(tmp_path: pathlib.Path) -> None:
    script = load_script()
    skus = {"skus": [
        {"region": "eastus", "name": "Standard_D2s_v3", "size": "D2s_v3", "family": "f", "zones": ["1"],
         "capabilities": {"vCPUs": "2", "MemoryGB": "8"}},
        {"region": "eastus", "name": "Standard_Z9_v9", "size": "Z9_v9", "family": "f", "zones": [],
         "capabilities": {"vCPUs": "9", "MemoryGB": "9"}},
    ]}
    (tmp_path / "skus.json").write_text(json.dumps(skus))
    (tmp_path / "prices.json").write_text(json.dumps({"prices": {"eastus": {"Standard_D2s_v3": 0.1}}}))
    doc = script.build(tmp_path / "skus.json", tmp_path / "prices.json", None, None)  # no shared files needed
    assert list(doc["regions"]["eastus"]) == ["Standard_D2s_v3"]
    assert doc["skipped"]["no_price"] == ["eastus/Standard_Z9_v9"]


def test_the_generator_carries_ultra_ssd_per_region_zonal_or_regional(tmp_path: pathlib.Path) -> None:
    script = load_script()
    caps = {"vCPUs": "2", "MemoryGB": "8"}
    skus = {"skus": [
        {"region": "eastus", "name": "Standard_D2s_v3", "size": "D2s_v3", "family": "f", "zones": ["2", "3"],
         "capabilities": {**caps, "UltraSSDAvailable": "True"}},
        {"region": "westus", "name": "Standard_D2s_v3", "size": "D2s_v3", "family": "f", "zones": [],
         "capabilities": {**caps, "UltraSSDAvailable": "True"}},
        {"region": "eastus", "name": "Standard_D4s_v3", "size": "D4s_v3", "family": "f", "zones": ["1"],
         "capabilities": {**caps, "UltraSSDAvailable": "False"}},
    ]}
    (tmp_path / "skus.json").write_text(json.dumps(skus))
    prices = {"eastus": {"Standard_D2s_v3": 0.1, "Standard_D4s_v3": 0.2}, "westus": {"Standard_D2s_v3": 0.1}}
    (tmp_path / "prices.json").write_text(json.dumps({"prices": prices}))
    doc = script.build(tmp_path / "skus.json", tmp_path / "prices.json", None, None)
    assert doc["regions"]["eastus"]["Standard_D2s_v3"]["ultra_ssd_zones"] == ["2", "3"]
    assert doc["regions"]["westus"]["Standard_D2s_v3"]["ultra_ssd_regional"] is True
    assert set(doc["regions"]["eastus"]["Standard_D4s_v3"]) == {"price", "zones"}


def test_the_packaged_offerings_decide_ultra_ssd_by_zone() -> None:
    d2s = azure_types("southcentralus")["Standard_D2s_v3"]
    assert {o.label_values(labels.AZURE_SKU_STORAGE_ULTRA_SSD) for o in d2s.offerings} == {("false", "true")}
    d128 = azure_types("southcentralus")["Standard_D128ds_v6"]  # the Resource SKU says no Ultra SSD
    assert {o.label_values(labels.AZURE_SKU_STORAGE_ULTRA_SSD) for o in d128.offerings} == {("false",)}
    assert d2s.offering_labels == {labels.AZURE_SKU_STORAGE_ULTRA_SSD: frozenset({"false", "true"})}


def test_the_partial_v710_sizes_are_one_amd_gpu_each_as_a_derived_fact() -> None:
    rec = azure.data()["sizes"]["Standard_NV4ads_V710_v5"]
    assert rec["gpus"] == 1 and "gpus" in rec["derived"]
    [nv4] = [t for t in azure.amd_types("eastus") if t.name == "Standard_NV4ads_V710_v5"]
    assert nv4.capacity[azure.RESOURCE_AMD_GPU] == 1000
    assert nv4.labels[labels.AZURE_SKU_GPU_COUNT] == "1" and nv4.labels[labels.AZURE_SKU_GPU_MANUFACTURER] == "amd"


@needs_shared_data
def test_the_generator_rebuilds_the_packaged_data_file_byte_for_byte() -> None:
    script = load_script()
    first = script.render(script.build(SKUS, PRICES))
    assert first == script.render(script.build(SKUS, PRICES))
    assert first == (REPO / "src" / "karpy" / "cloudprovider" / "azure" / "data" / "skus.json").read_text()


def test_the_field_reports_japaneast_d2_v4_has_the_labels_its_node_showed() -> None:
    t = azure_types("japaneast")["Standard_D2_v4"]
    expect_labels(t, {
        labels.AZURE_SKU_CPU: "2", labels.AZURE_SKU_FAMILY: "D", labels.AZURE_SKU_GPU_COUNT: "0",
        labels.AZURE_SKU_MEMORY: "8192", labels.AZURE_SKU_NAME: "Standard_D2_v4",
        labels.AZURE_SKU_ACCELERATED_NETWORKING: "true", labels.AZURE_SKU_VERSION: "4",
        labels.REGION: "japaneast", labels.ARCH: "amd64", "kubernetes.azure.com/sku-cpu": "2",
    })
    assert t.zones == frozenset({"japaneast-1", "japaneast-2", "japaneast-3"})
    e16 = azure_types("japaneast")["Standard_E16as_v5"]
    assert e16.labels[labels.AZURE_SKU_MEMORY] == "131072"
    assert e16.labels[labels.AZURE_SKU_STORAGE_PREMIUM] == "true"
    assert e16.labels[labels.AZURE_SKU_ENCRYPTION_AT_HOST] == "true"  # the report's node showed it
    assert any(o.capacity_type == "spot" for o in e16.offerings)  # it ran as spot there
    rec = azure.data()["sizes"]["Standard_E16as_v5"]
    assert rec["reported"] == {"encryption_at_host": "field report 003_11c7297e8659dce9.txt",
                               "low_priority": "field report 003_11c7297e8659dce9.txt"}
    assert labels.AZURE_SKU_ENCRYPTION_AT_HOST not in t.labels  # D2_v4's node had no such label: unknown


def test_facts_no_source_has_are_null_and_listed_and_the_assumptions_are_written_down() -> None:
    doc = azure.data()
    d2 = doc["sizes"]["Standard_D2_v4"]
    assert d2["unknown"] == ["cached_disk_bytes", "encryption_at_host", "hyperv", "low_priority"]
    assert all(d2[k] is None for k in d2["unknown"])
    assert set(doc["assumptions"]) == {"cached_disk_bytes", "encryption_at_host", "hyperv", "low_priority", "zones",
                                       "ultra_ssd"}
    api = doc["sizes"]["Standard_D2s_v3"]  # in the Resource SKUs selection: every fact known
    assert "unknown" not in api and api["hyperv"] == ["V1", "V2"] and api["encryption_at_host"] is True
    arm = doc["sizes"]["Standard_D2ps_v5"]
    assert arm["hyperv"] == ["V2"] and "hyperv" in arm["derived"]
    b2 = doc["sizes"]["Standard_B2s"]
    assert b2["low_priority"] is False and "low_priority" in b2["derived"]
    a0 = doc["sizes"]["Standard_A0"]
    assert a0["hyperv"] == ["V1"]  # the API's Gen1-only size
    types = azure_types("southcentralus")
    assert types["Standard_D2_v4"].labels[labels.AZURE_SKU_HYPERV_GENERATION] == "2"  # assumed V1,V2
    assert not any(o.capacity_type == "spot" for o in types["Standard_B2s"].offerings)
    assert any(o.capacity_type == "spot" for o in types["Standard_D2_v4"].offerings)  # assumed capable
    assert doc["spot_prices"]["source"] == "estimate"


def test_the_generator_takes_facts_from_field_reports_only_where_a_label_says_them(tmp_path: pathlib.Path) -> None:
    script = load_script()
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "001_report.txt").write_text("""
$ kubectl get node a -ojson | jq .metadata.labels
{
  "karpenter.azure.com/sku-name": "Standard_D4_v4",
  "karpenter.azure.com/sku-encryptionathost-capable": "false",
  "karpenter.sh/capacity-type": "spot",
  "karpenter.azure.com/sku-networking-accelerated": "true"
}
and another one, kubectl's other style:
{
  karpenter.azure.com/sku-name=Standard_D2s_v3
  karpenter.azure.com/sku-encryptionathost-capable=false
  karpenter.sh/capacity-type=on-demand
}
""")
    skus = {"skus": [{"region": "eastus", "name": "Standard_D2s_v3", "size": "D2s_v3", "family": "f", "zones": ["1"],
                      "capabilities": {"vCPUs": "2", "MemoryGB": "8", "EncryptionAtHostSupported": "True"}}]}
    (tmp_path / "skus.json").write_text(json.dumps(skus))
    (tmp_path / "prices.json").write_text(json.dumps({"prices": {"eastus": {"Standard_D2s_v3": 0.1}}}))
    sizes = {"sizes": [{"name": "Standard_D4_v4", "family": "standardDv4Family", "vCPUs": 4, "memoryGiB": 16,
                        "arch": "x64", "gpus": 0, "premiumIO": False, "acceleratedNetworking": True, "maxNICs": 2,
                        "tempDiskGiB": 150, "ephemeralOSDiskSupported": True, "sources": ["docs"]}]}
    (tmp_path / "sizes.json").write_text(json.dumps(sizes))
    facts = script.seed_facts(seeds)
    assert facts["Standard_D4_v4"] == {"encryption_at_host": (False, "001_report.txt"),
                                       "low_priority": (True, "001_report.txt"),
                                       "accelerated_networking": (True, "001_report.txt")}
    assert facts["Standard_D2s_v3"] == {"encryption_at_host": (False, "001_report.txt")}
    doc = script.build(tmp_path / "skus.json", tmp_path / "prices.json", tmp_path / "sizes.json", seeds)
    d4 = doc["sizes"]["Standard_D4_v4"]
    assert (d4["encryption_at_host"], d4["low_priority"]) == (False, True)
    assert d4["unknown"] == ["cached_disk_bytes", "hyperv"]
    assert set(d4["reported"]) == {"encryption_at_host", "low_priority"}
    assert doc["sizes"]["Standard_D2s_v3"]["encryption_at_host"] is True  # the API wins over a report
    assert doc["source"]["field_reports"] == ["001_report.txt"]
    none = script.build(tmp_path / "skus.json", tmp_path / "prices.json", tmp_path / "sizes.json", None)
    assert none["sizes"]["Standard_D4_v4"]["encryption_at_host"] is None


def test_the_packaged_data_holds_every_shared_vm_size_with_its_sources() -> None:
    sizes = azure.data()["sizes"]
    assert len(sizes) == 1574
    assert "docs" in sizes["Standard_D2_v4"]["sources"]
    assert azure.record("japaneast", "Standard_D2_v4") is not None
    assert azure.record("mars", "Standard_D2_v4") is None


def test_the_os_disk_size_is_the_ephemeral_storage() -> None:
    rec = azure.record("japaneast", "Standard_D2_v4")
    assert rec is not None
    t = azure.build("Standard_D2_v4", rec, region="japaneast", os_disk_gb=64)
    assert t is not None and t.capacity["ephemeral-storage"] == 64 * 10**9 * quantity.MILLI


def test_gpu_makers_come_from_the_documented_model_and_unknown_gpu_counts_are_left_out() -> None:
    types = azure_types("eastus")
    reasons = azure.skipped("eastus")
    a100 = types["Standard_NC24ads_A100_v4"]
    assert a100.labels[labels.AZURE_SKU_GPU_MANUFACTURER] == "nvidia"
    assert a100.capacity[azure.RESOURCE_NVIDIA_GPU] == 1000
    amd = [n for n, r in reasons.items() if r == "GPU without NVIDIA drivers support"]
    assert amd and all(azure.data()["sizes"][n].get("gpu_model", "").startswith("AMD") or
                       azure.data()["sizes"][n].get("gpu_model") is None for n in amd)
    assert all(reasons.get(n) == "unknown or fractional GPU count" for n in azure.data()["sizes"]
               if azure.data()["sizes"][n]["gpus"] is None and n in reasons)


@pytest.mark.parametrize(("size", "expected"), [
    ("D4pls_v6", "Dpls_v6"), ("NC24ads_A100_v4", "NCads_A100_v4"), ("B20ms", "Bms"), ("D2_v4", "D_v4"),
])
def test_the_sku_series_label_is_the_size_without_its_cpu_count(size: str, expected: str) -> None:
    parsed = azure.parse_size(size)
    assert parsed is not None and azure.series(parsed) == expected
    assert azure_types("japaneast")["Standard_D2_v4"].labels[labels.AZURE_SKU_SERIES] == "D_v4"


def test_a_size_priced_at_zero_is_left_out_as_unpriced() -> None:
    rec = azure.record("eastus", "Standard_M16bs_v4")
    assert rec is not None and rec["price"] == 0
    assert "Standard_M16bs_v4" not in azure_types("eastus")
    assert azure.skipped("eastus")["Standard_M16bs_v4"] == "no price (0 USD/hour in the price data)"
    assert all(o.price > 0 for t in azure_types("eastus").values() for o in t.offerings)
