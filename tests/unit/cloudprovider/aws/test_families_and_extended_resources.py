"""The AWS catalog per AMI family and instance-store policy, and the extended resources Karpenter's
AWS provider gives the types that have them (pod ENI, neuron cores, Windows private IPv4)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import labels, quantity
from karpy.cloudprovider import catalog, errors, instancetype
from karpy.cloudprovider.aws import families
from karpy.cloudprovider.aws import instancetypes as aws

GI = 2**30 * quantity.MILLI
MI = 2**20 * quantity.MILLI
M = quantity.MILLI


def types(**kwargs: Any) -> dict[str, instancetype.InstanceType]:
    return {t.name: t for t in catalog.load("aws", **kwargs)}


def test_trunking_compatible_types_offer_their_branch_enis_as_pod_eni_and_older_types_none() -> None:
    linux = types()
    assert linux["m5.large"].capacity[aws.RESOURCE_POD_ENI] == 9 * M
    assert linux["c5.large"].capacity[aws.RESOURCE_POD_ENI] == 9 * M
    assert aws.RESOURCE_POD_ENI not in linux["c4.large"].capacity  # not trunking compatible


def test_neuron_cores_are_the_devices_times_the_cores_of_each_device() -> None:
    linux = types()
    assert linux["inf1.xlarge"].capacity[aws.RESOURCE_NEURON_CORE] == 4 * M
    assert linux["trn1.2xlarge"].capacity[aws.RESOURCE_NEURON_CORE] == 2 * M
    assert linux["trn1.2xlarge"].capacity[aws.RESOURCE_NEURON] == 1 * M
    assert aws.RESOURCE_NEURON_CORE not in linux["m5.large"].capacity


def test_a_windows_family_gives_windows_amd64_types_with_110_pods_a_50gi_root_and_private_ipv4() -> None:
    win = types(ami_family="Windows2022")
    m5 = win["m5.large"]
    assert m5.labels[labels.OS] == "windows"
    assert m5.labels[families.WINDOWS_BUILD_LABEL] == "10.0.20348"
    assert m5.capacity["pods"] == 110 * M
    assert m5.capacity["ephemeral-storage"] == 50 * GI
    assert m5.capacity[families.PRIVATE_IPV4_RESOURCE] == 9 * M  # 10 IPv4 per ENI - 1
    assert m5.overhead.kube_reserved["memory"] == (11 * 110 + 255) * MI
    assert m5.allocatable["memory"] // MI == 7577 - 1465 - 100
    assert "m6g.large" not in win  # arm64 has no Windows AMI
    assert "m6g.large" in types()
    assert types(ami_family="Windows2019")["m5.large"].labels[families.WINDOWS_BUILD_LABEL] == "10.0.17763"
    assert types(ami_family="Windows2025")["m5.large"].labels[families.WINDOWS_BUILD_LABEL] == "10.0.26100"


def test_windows_keeps_the_linux_price_as_karpenters_pricing_does() -> None:
    linux, win = types()["m5.large"], types(ami_family="Windows2022")["m5.large"]
    assert [(o.zone, o.capacity_type, o.price) for o in win.offerings] == \
        [(o.zone, o.capacity_type, o.price) for o in linux.offerings]


def test_max_pods_still_wins_on_windows_and_bottlerocket_ignores_pods_per_core() -> None:
    assert types(ami_family="Windows2022", kubelet={"maxPods": 30})["m5.large"].capacity["pods"] == 30 * M
    assert types(ami_family="Bottlerocket", kubelet={"podsPerCore": 2})["m5.large"].capacity["pods"] == 29 * M
    assert types(kubelet={"podsPerCore": 2})["m5.large"].capacity["pods"] == 4 * M


def test_raid0_makes_ephemeral_storage_the_instance_store_in_decimal_gb_only_where_there_is_one() -> None:
    raid = types(instance_store_policy="RAID0")
    assert raid["m5d.large"].capacity["ephemeral-storage"] == 75 * 10**9 * M
    assert raid["d2.xlarge"].capacity["ephemeral-storage"] == 6144 * 10**9 * M  # HDD store, not NVMe
    assert raid["m5.large"].capacity["ephemeral-storage"] == 20 * GI
    assert raid["m5d.large"].overhead.eviction_threshold["ephemeral-storage"] == 75 * 10**8 * M  # 10% nodefs
    assert types()["m5d.large"].capacity["ephemeral-storage"] == 20 * GI


def test_windows_server_2025_needs_kubernetes_1_35() -> None:
    families.check_version("Windows2025", "1.35")
    families.check_version("Windows2022", "1.29")
    with pytest.raises(errors.CloudProviderError, match=r"1\.35"):
        families.check_version("Windows2025", "1.34")


def test_unknown_or_missing_families_are_the_al2023_default() -> None:
    assert families.of(None) is families.DEFAULT
    assert families.of("Nope").name == "AL2023"
    assert families.is_windows("Windows2019") and not families.is_windows("Bottlerocket")


def test_efa_only_interfaces_set_the_efa_count_and_those_on_card_zero_leave_the_max_pods_formula() -> None:
    spec = {**aws.data()["types"]["c5n.18xlarge"], "price": 3.888}
    plain = aws.build("c5n.18xlarge", spec)
    assert plain is not None
    assert plain.capacity[aws.RESOURCE_EFA] == 1 * M
    assert plain.capacity["pods"] == (15 * (50 - 1) + 2) * M
    two = aws.build("c5n.18xlarge", spec, efa_only=(2, 1))
    assert two is not None
    assert two.capacity[aws.RESOURCE_EFA] == 2 * M
    assert two.capacity["pods"] == (14 * (50 - 1) + 2) * M
    none = aws.build("c5n.18xlarge", spec, efa_only=(0, 0))
    assert none is not None and aws.RESOURCE_EFA not in none.capacity
