"""Each catalog's CSI attach counts (issue 23 section 7): the EBS CSI driver's rule for EC2 types
(dedicated limits, shared Nitro slots, Xen), Azure's max data disks, KWOK's default, and the custom
catalog's ``volumeLimits`` field."""

from __future__ import annotations

import pytest

from karpy.api import errors
from karpy.cloudprovider import catalog
from karpy.cloudprovider.aws import ebs_limits
from karpy.cloudprovider.azure import disk_limits


@pytest.mark.parametrize(("name", "spec", "expected"), [
    ("m5.large", {"hv": "nitro"}, 26),  # 28 shared slots - primary ENI - root volume
    ("m5d.large", {"hv": "nitro", "nvme": 75}, 25),  # one NVMe instance-store disk takes a slot
    ("i3en.24xlarge", {"hv": "nitro", "nvme": 60000, "nvme_disks": 8}, 18),
    ("m7i.large", {"hv": "nitro"}, 31),  # dedicated 32, not shared, less the root volume
    ("c7a.48xlarge", {"hv": "nitro"}, 127),
    ("r7i.metal-24xl", {"hv": "nitro"}, 30),
    ("m4.large", {"hv": "xen"}, 38),  # Xen: 39
    ("m5.metal", {"hv": ""}, 27),  # metal caps at 31; the cap leaves room for the ENI
    ("d3.8xlarge", {"hv": "nitro"}, 2),
])
def test_the_ebs_csi_driver_rule_gives_each_type_its_attach_count(name: str, spec: dict[str, object],
                                                                  expected: int) -> None:
    assert ebs_limits.limit(name, spec) == expected


def test_every_aws_catalog_type_has_an_ebs_count() -> None:
    types = catalog.load("aws")
    assert all(t.volume_limits.get(ebs_limits.DRIVER, 0) >= 1 for t in types)
    by_name = {t.name: t for t in types}
    assert by_name["m5.large"].volume_limits == {ebs_limits.DRIVER: 26}


def test_azure_sizes_use_the_resource_skus_count_else_two_per_vcpu_up_to_32() -> None:
    assert disk_limits.limit("Standard_D2s_v3", {"vcpu": 2}) == 4
    assert disk_limits.limit("Standard_D128ds_v6", {"vcpu": 128}) == 64
    assert disk_limits.limit("Standard_Unknown_v9", {"vcpu": 8}) == 16
    assert disk_limits.limit("Standard_Unknown_v9", {"vcpu": 96}) == 32
    assert all(t.volume_limits.get(disk_limits.DRIVER, 0) >= 1 for t in catalog.load("azure"))


def test_kwok_types_carry_a_default_for_any_driver() -> None:
    assert all(t.volume_limits == {"*": 32} for t in catalog.load("kwok"))


def _entry(**extra: object) -> dict[str, object]:
    return {"name": "t1", "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
            "offerings": [{"zone": "z1", "capacityType": "on-demand", "price": 0.1}], **extra}


def test_a_custom_catalog_entry_may_give_volume_limits_and_they_round_trip() -> None:
    (t,) = catalog.from_json([_entry(volumeLimits={"ebs.csi.aws.com": 4})])
    assert t.volume_limits == {"ebs.csi.aws.com": 4}
    assert catalog.from_json(catalog.to_json([t]))[0].volume_limits == {"ebs.csi.aws.com": 4}


def test_a_bad_volume_limit_names_the_entry_field_expected_and_found() -> None:
    with pytest.raises(errors.ValidationError) as err:
        catalog.from_json([_entry(volumeLimits={"ebs.csi.aws.com": "many"})])
    text = str(err.value)
    assert "[0].volumeLimits.ebs.csi.aws.com" in text and "whole number" in text and "many" in text
