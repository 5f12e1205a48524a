"""The AKSNodeClass model reads every field AKS's provider acts on, writes it back unchanged, hashes it for
drift, and names object, field, expected and found for a bad value."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.api import aksnodeclass, errors

FULL = Path(__file__).resolve().parents[2] / "fixtures" / "crds" / "aksnodeclass-full.yaml"


def _full() -> dict[str, Any]:
    data = yaml.safe_load(FULL.read_text())
    assert isinstance(data, dict)
    return data


def _nc(spec: dict[str, Any]) -> aksnodeclass.AKSNodeClass:
    return aksnodeclass.AKSNodeClass.from_manifest({"apiVersion": aksnodeclass.AKS_API_VERSION,
                                                   "kind": "AKSNodeClass", "metadata": {"name": "x"}, "spec": spec})


def test_every_field_of_the_full_manifest_is_read_and_written_back() -> None:
    manifest = _full()
    nc = aksnodeclass.AKSNodeClass.from_manifest(manifest)
    assert nc.spec_dict() == manifest["spec"]
    assert nc.encryption_at_host() and nc.secure_boot() and nc.vtpm() and nc.trusted_launch()
    assert nc.fail_swap_on is False and nc.gpu_mode == "Driver" and nc.fips_mode == "Disabled" and not nc.fips()
    assert nc.linux_os_config is not None and nc.linux_os_config.sysctls["vmSwappiness"] == 60
    assert nc.local_dns_mode() == "Preferred" and nc.status.local_dns_state == "Enabled" and nc.local_dns_enabled()
    assert aksnodeclass.AKSNodeClass.from_manifest(nc.to_manifest()) == nc


def test_unset_settings_mean_what_the_provider_defaults_them_to() -> None:
    nc = _nc({})
    assert not (nc.encryption_at_host() or nc.trusted_launch() or nc.fips() or nc.local_dns_enabled())
    assert nc.gpu_driver_installation() and not nc.artifact_streaming_on("amd64")
    assert nc.spec_dict() == {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 128}


def test_artifact_streaming_is_never_on_for_arm64() -> None:
    nc = _nc({"artifactStreaming": {"enabled": True}})
    assert nc.artifact_streaming_on("amd64") and not nc.artifact_streaming_on("arm64")


def test_gpu_mode_none_turns_driver_installation_off() -> None:
    assert not _nc({"gpu": {"mode": "None"}}).gpu_driver_installation()


@pytest.mark.parametrize("change", [
    {"security": {"encryptionAtHost": True}}, {"fipsMode": "FIPS"}, {"gpu": {"mode": "None"}},
    {"artifactStreaming": {"enabled": True}}, {"kubelet": {"failSwapOn": False}},
    {"linuxOSConfig": {"sysctls": {"vmSwappiness": 10}}},
    {"localDNS": {"mode": "Required", "kubeDNSOverrides": [], "vnetDNSOverrides": []}},
])
def test_each_new_field_changes_the_drift_hash(change: dict[str, Any]) -> None:
    assert _nc(change).hash() != _nc({}).hash()


@pytest.mark.parametrize(("spec", "path", "expected"), [
    ({"gpu": {"mode": "Always"}}, "spec.gpu.mode", "one of Driver, None"),
    ({"fipsMode": "Yes"}, "spec.fipsMode", "one of FIPS, Disabled"),
    ({"localDNS": {"mode": "On"}}, "spec.localDNS.mode", "one of Preferred, Required, Disabled"),
    ({"linuxOSConfig": {"transparentHugePageEnabled": "sometimes"}}, "spec.linuxOSConfig.transparentHugePageEnabled",
     "one of always, madvise, never"),
    ({"linuxOSConfig": {"sysctls": {"vmSwappiness": True}}}, "spec.linuxOSConfig.sysctls.vmSwappiness", "an integer"),
    ({"linuxOSConfig": {"sysctls": {"kernelPanic": 1}}}, "spec.linuxOSConfig.sysctls.kernelPanic", "a sysctl AKS sets"),
    ({"security": {"encryptionAtHost": "yes"}}, "spec.security.encryptionAtHost", "true or false"),
])
def test_a_bad_value_names_object_field_expected_and_found(spec: dict[str, Any], path: str, expected: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        _nc(copy.deepcopy(spec))
    [err] = info.value.errors
    assert err.obj == "AKSNodeClass x" and err.path == path and expected in err.expected


def test_the_sysctls_the_model_knows_are_the_crd_schemas_and_each_has_a_kernel_name() -> None:
    from karpy.api.schemas import aksnodeclass as schema
    from karpy.cloudprovider.azure import bootstrap

    names = {n for n, _, _ in schema.SYSCTLS} | {"netIPv4IPLocalPortRange", "netIPv4TCPTwReuse"}
    assert aksnodeclass.SYSCTL_FIELDS == names == set(bootstrap.SYSCTL_NAMES)
