"""The AWS catalog reproduces Karpenter's AWS capacity, overhead and label formulas.

Expected allocatable values are those of Karpenter's generated instance-types reference page
(AL2023, no block device mappings).
"""

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
from karpy.cloudprovider.aws import instancetypes as aws

GI = 2**30 * quantity.MILLI
MI = 2**20 * quantity.MILLI
REPO = pathlib.Path(__file__).resolve().parents[3]
PRICES = pathlib.Path(__file__).resolve().parents[3].parent / "shared" / "data/aws-on-demand-prices.json"


def aws_types(kubelet: Mapping[str, Any] | None = None) -> dict[str, instancetype.InstanceType]:
    return {t.name: t for t in catalog.load("aws", kubelet=kubelet)}


def expect_allocatable(t: instancetype.InstanceType, *, cpu: str, memory_mib: int, pods: int,
                       ephemeral_storage: str = "17Gi") -> None:
    alloc = t.allocatable
    assert quantity.format_quantity("cpu", alloc["cpu"]) == cpu
    assert alloc["memory"] // MI == memory_mib
    assert alloc["pods"] == pods * quantity.MILLI
    assert quantity.format_quantity("ephemeral-storage", alloc["ephemeral-storage"]) == ephemeral_storage


def load_script(name: str) -> pytypes.ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_m5_large_has_karpenters_capacity_after_the_vm_memory_overhead() -> None:
    t = aws_types()["m5.large"]
    assert t.capacity["cpu"] == 2000
    # 8192Mi less ceil(8192 * 7.5%) = 615Mi
    assert t.capacity["memory"] == 7577 * MI
    assert t.capacity["pods"] == 29_000  # 3 ENIs * (10 - 1) + 2
    assert t.capacity["ephemeral-storage"] == 20 * GI


def test_m5_large_overhead_is_karpenters_kube_reserved_and_eviction_threshold() -> None:
    overhead = aws_types()["m5.large"].overhead
    assert overhead.kube_reserved == {"cpu": 70, "memory": (11 * 29 + 255) * MI, "ephemeral-storage": GI}
    assert overhead.eviction_threshold == {"memory": 100 * MI, "ephemeral-storage": 2 * GI}
    assert dict(overhead.system_reserved) == {}


def test_m5_large_allocatable_matches_karpenters_instance_types_page() -> None:
    expect_allocatable(aws_types()["m5.large"], cpu="1930m", memory_mib=6903, pods=29)


@pytest.mark.parametrize(("name", "cpu", "memory_mib", "pods"), [
    ("a1.medium", "940m", 1392, 8),
    ("a1.large", "1930m", 3055, 29),
    ("c1.medium", "1930m", 1122, 12),
    ("c4.8xlarge", "35840m", 53903, 234),
    ("m6a.large", "1930m", 6903, 29),
    ("m6a.48xlarge", "191450m", 718987, 737),
    ("m5zn.12xlarge", "47810m", 173400, 737),
])
def test_allocatable_matches_karpenters_reference_page_for_other_types(name: str, cpu: str, memory_mib: int,
                                                                       pods: int) -> None:
    expect_allocatable(aws_types()[name], cpu=cpu, memory_mib=memory_mib, pods=pods)


def test_kube_reserved_cpu_follows_karpenters_tiers() -> None:
    assert [aws.kube_reserved_cpu(n) for n in (1, 2, 4, 8, 96)] == [60, 70, 80, 90, 310]


def test_a_graviton_type_is_arm64_and_loses_64_mib_of_cma_memory() -> None:
    t = aws_types()["m6g.large"]
    assert t.labels[labels.ARCH] == "arm64"
    assert t.labels[labels.AWS_INSTANCE_CPU_MANUFACTURER] == "aws"
    # (8192 - 64)Mi less ceil(8128 * 7.5%) = 610Mi
    assert t.capacity["memory"] == (8128 - 610) * MI


def test_m5_large_carries_karpenters_aws_labels() -> None:
    t = aws_types()["m5.large"]
    assert {k: v for k, v in t.labels.items() if k in labels.AWS_LABELS} == {
        labels.AWS_INSTANCE_CATEGORY: "m",
        labels.AWS_INSTANCE_FAMILY: "m5",
        labels.AWS_INSTANCE_GENERATION: "5",
        labels.AWS_INSTANCE_SIZE: "large",
        labels.AWS_INSTANCE_CPU: "2",
        labels.AWS_INSTANCE_CPU_MANUFACTURER: "intel",
        labels.AWS_INSTANCE_CPU_SUSTAINED_CLOCK: "3100",
        labels.AWS_INSTANCE_MEMORY: "8192",
        labels.AWS_INSTANCE_HYPERVISOR: "nitro",
        labels.AWS_INSTANCE_ENCRYPTION_IN_TRANSIT: "false",
        labels.AWS_INSTANCE_NETWORK_BANDWIDTH: "750",
        labels.AWS_INSTANCE_EBS_BANDWIDTH: "4750",
    }
    assert t.labels[labels.INSTANCE_TYPE] == "m5.large"
    assert t.labels[labels.OS] == "linux"
    assert t.labels[labels.REGION] == "us-east-1"


def test_a_gpu_type_carries_gpu_labels_and_nvidia_gpu_capacity() -> None:
    t = aws_types()["g4dn.xlarge"]
    assert t.labels[labels.AWS_INSTANCE_GPU_NAME] == "t4"
    assert t.labels[labels.AWS_INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert t.labels[labels.AWS_INSTANCE_GPU_COUNT] == "1"
    assert t.labels[labels.AWS_INSTANCE_GPU_MEMORY] == "16384"
    assert t.labels[labels.AWS_INSTANCE_LOCAL_NVME] == "125"
    assert t.capacity[aws.RESOURCE_NVIDIA_GPU] == 1000
    assert t.allocatable[aws.RESOURCE_NVIDIA_GPU] == 1000


def test_inferentia_and_trainium_types_carry_accelerator_labels_and_neuron_capacity() -> None:
    types = aws_types()
    inf = types["inf1.xlarge"]
    assert inf.labels[labels.AWS_INSTANCE_ACCELERATOR_NAME] == "inferentia"
    assert inf.labels[labels.AWS_INSTANCE_ACCELERATOR_MANUFACTURER] == "aws"
    assert inf.capacity[aws.RESOURCE_NEURON] == 1000
    trn = types["trn1.32xlarge"]
    assert trn.labels[labels.AWS_INSTANCE_ACCELERATOR_COUNT] == "16"
    assert trn.capacity[aws.RESOURCE_NEURON] == 16_000
    assert trn.capacity[aws.RESOURCE_EFA] == 8000


def test_a_bare_metal_type_has_an_empty_hypervisor_label() -> None:
    assert aws_types()["c5.metal"].labels[labels.AWS_INSTANCE_HYPERVISOR] == ""


def test_a_type_without_gpus_has_no_gpu_labels_or_capacity() -> None:
    t = aws_types()["c5.large"]
    assert labels.AWS_INSTANCE_GPU_NAME not in t.labels
    assert aws.RESOURCE_NVIDIA_GPU not in t.capacity


@pytest.mark.skipif(not PRICES.exists(), reason="the shared price file is not available")
def test_r5_large_costs_its_us_east_1_list_price_on_demand_in_every_zone() -> None:
    price = json.loads(PRICES.read_text())["prices"]["us-east-1"]["r5.large"]
    t = aws_types()["r5.large"]
    on_demand = [o for o in t.offerings if o.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND]
    assert on_demand
    assert {o.price for o in on_demand} == {price}
    assert t.cheapest_price(capacity_types=frozenset({"on-demand"})) == price


def test_every_type_has_a_positive_price_and_spot_is_between_thirty_and_seventy_percent() -> None:
    types = catalog.load("aws")
    assert len(types) > 1000
    for t in types:
        on_demand = {o.zone: o.price for o in t.offerings if o.capacity_type == "on-demand"}
        assert on_demand and all(p > 0 for p in on_demand.values()), t.name
        for o in t.offerings:
            if o.capacity_type == "spot":
                assert 0.3 * on_demand[o.zone] - 1e-6 <= o.price <= 0.7 * on_demand[o.zone] + 1e-6, t.name


def test_offerings_are_in_the_us_east_1_zones_moto_lists_for_the_type() -> None:
    t = aws_types()["m5.large"]
    assert t.zones == frozenset({"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"})
    assert t.capacity_types == frozenset({"on-demand", "spot"})


def test_a_zone_filter_keeps_only_that_zones_offerings() -> None:
    types = catalog.load("aws", zones=["us-east-1e"])
    assert types
    assert all(t.zones == frozenset({"us-east-1e"}) for t in types)
    assert len(types) < len(catalog.load("aws"))


def test_the_provider_function_takes_a_zone_filter_too() -> None:
    types = aws.instance_types(zones=["us-east-1a"])
    assert types and all(t.zones == frozenset({"us-east-1a"}) for t in types)


def test_another_region_is_rejected_because_the_data_has_only_us_east_1() -> None:
    with pytest.raises(errors.ValidationError, match="us-east-1"):
        catalog.load("aws", region="eu-west-1")


def test_max_pods_replaces_the_eni_limit_and_drives_kube_reserved_memory() -> None:
    t = aws_types(kubelet={"maxPods": 110})["m5.large"]
    assert t.capacity["pods"] == 110_000
    assert t.overhead.kube_reserved["memory"] == (11 * 110 + 255) * MI


def test_pods_per_core_caps_the_pod_count() -> None:
    t = aws_types(kubelet={"podsPerCore": 4})["m5.large"]
    assert t.capacity["pods"] == 8000


def test_kubelet_reserved_and_eviction_overrides_change_allocatable() -> None:
    kubelet: Mapping[str, Any] = {
        "kubeReserved": {"cpu": "500m"},
        "systemReserved": {"memory": "1Gi"},
        "evictionHard": {"memory.available": "5%", "nodefs.available": "1Gi"},
        "evictionSoft": {"memory.available": "200Mi"},
    }
    t = aws_types(kubelet=kubelet)["m5.large"]
    assert t.overhead.kube_reserved["cpu"] == 500
    assert t.overhead.kube_reserved["memory"] == 574 * MI
    assert t.overhead.system_reserved == {"memory": GI}
    memory_5_percent = -(-7577 * 2**20 * 5 // 100) * quantity.MILLI
    expected_memory = max(memory_5_percent, 200 * MI)
    assert t.overhead.eviction_threshold == {"memory": expected_memory, "ephemeral-storage": GI}
    assert t.allocatable["cpu"] == 1500


def test_the_kubelet_overrides_are_cached_separately_from_the_defaults() -> None:
    assert aws_types(kubelet={"maxPods": 20})["m5.large"].capacity["pods"] == 20_000
    assert aws_types()["m5.large"].capacity["pods"] == 29_000


def test_the_generator_rebuilds_the_packaged_data_file_byte_for_byte() -> None:
    if not PRICES.exists():
        pytest.skip("the shared price file is not available")
    script = load_script("generate_aws_catalog")
    first = script.render(script.build(PRICES, "us-east-1"))
    second = script.render(script.build(PRICES, "us-east-1"))
    assert first == second
    packaged = (REPO / "src" / "karpy" / "cloudprovider" / "aws" / "data" / "instance-types.json").read_text()
    assert first == packaged


def test_the_packaged_data_file_stays_small() -> None:
    path = REPO / "src" / "karpy" / "cloudprovider" / "aws" / "data" / "instance-types.json"
    assert path.stat().st_size < 2 * 1024 * 1024
    assert len(aws.data()["types"]) == len(catalog.load("aws"))
