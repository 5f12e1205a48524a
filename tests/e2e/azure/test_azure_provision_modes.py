"""``PROVISION_MODE``: the bootstrapping-client mode beside the scriptless one, checked on what the fake ARM
received (the node bootstrapping API's request body field by field, the VM's custom data, the CSE
extension), and the modes karpy refuses at start-up."""

from __future__ import annotations

import base64
import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from karpy import clock, settings, settings_sources
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import factory, provider
from karpy.kube import memory

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg-taniai_aks-karp-test_japaneast"
CLUSTER_RG = "rg-taniai"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/rg-net/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet-25367643/subnets/aks-subnet")
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIC-test-ca\n-----END CERTIFICATE-----\n").decode()
TOKEN = "abcdef.0123456789abcdef"
NODE_CLASS: dict[str, Any] = {
    "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"},
    "spec": {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 128, "maxPods": 60}}
SETTINGS = settings.Settings(
    cluster_name="aks-karp-test", cluster_endpoint="https://aks-karp-test-dns-12345678.hcp.japaneast.azmk8s.io:443",
    kubelet_bootstrap_token=TOKEN, ssh_public_key="ssh-ed25519 AAAA ops@example", vnet_subnet_id=SUBNET,
    node_resource_group=RG, provision_mode="bootstrappingclient")
PATH = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/{CLUSTER_RG}/providers/"
        f"Microsoft.ContainerService/managedclusters/aks-karp-test/nodeBootstrapping")


@pytest.fixture
def arm() -> Iterator[fake_arm.FakeARM]:
    skus = [fake_arm.sku("Standard_D4s_v5", REGION, vcpus=4, memory_gb=16, resource_disk_mb=0),
            fake_arm.sku("Standard_D4ps_v5", REGION, vcpus=4, memory_gb=16, arch="Arm64")]
    with fake_arm.FakeARM(skus=skus) as server:
        yield server


def _build(arm: fake_arm.FakeARM, node_class: dict[str, Any] | None = None, s: settings.Settings = SETTINGS,
           **options: Any) -> provider.AzureCloudProvider:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    cluster.create(copy.deepcopy(node_class or NODE_CLASS))
    if s.provision_mode == "bootstrappingclient" and not s.node_bootstrapping_server_url:
        s = dataclasses.replace(s, node_bootstrapping_server_url=arm.endpoint)
    cloud = factory.build(s, vclock, cluster, environ={"ARM_RESOURCE_GROUP": CLUSTER_RG},
                          subscription_id=fake_arm.SUBSCRIPTION, region=REGION, endpoint_url=arm.endpoint,
                          polling_interval=0, retail_prices_endpoint="", ca_bundle=CA,
                          kubernetes_version="1.33.2", tenant_id="tenant-1", **options)
    assert isinstance(cloud, provider.AzureCloudProvider)
    return cloud


def _claim(arch: str = "amd64", mode: str | None = None) -> nodeclaim.NodeClaim:
    claim_labels = {labels.NODEPOOL: "default", "team": "web", "node-role.kubernetes.io/agent": ""}
    if mode:
        claim_labels["kubernetes.azure.com/mode"] = mode
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-65f84", "labels": claim_labels},
        "spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
            "requirements": [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                             {"key": labels.ARCH, "operator": "In", "values": [arch]}],
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        },
    })


def _bootstrapping_calls(arm: fake_arm.FakeARM) -> list[fake_arm.Call]:
    return [c for c in arm.requests if c.path.endswith("/nodeBootstrapping")]


def _profile(arm: fake_arm.FakeARM) -> dict[str, Any]:
    [call] = _bootstrapping_calls(arm)
    assert call.method == "GET" and call.path == PATH
    profile: dict[str, Any] = call.body["provisionProfile"]
    return profile


def test_bootstrappingclient_sends_the_nodes_provision_values_to_the_clusters_node_bootstrapping_api(
        arm: fake_arm.FakeARM) -> None:
    _build(arm).create(_claim())
    [call] = _bootstrapping_calls(arm)
    assert call.method == "GET" and call.path == PATH
    profile, helper = call.body["provisionProfile"], call.body["provisionHelperValues"]
    assert helper == {"skuCPU": 4.0, "skuMemory": 16.0}
    custom = profile.pop("customNodeLabels")
    assert custom["team"] == "web" and custom[labels.NODEPOOL] == "default"
    assert custom["kubernetes.azure.com/os-sku"] == "Ubuntu"
    assert "node-role.kubernetes.io/agent" not in custom  # the kubelet may not set it on itself
    assert profile == {
        "name": "", "architecture": "x64", "osType": 2, "osSku": 1, "vmSize": "Standard_D4s_v5",
        "distro": "aks-ubuntu-containerd-22.04-gen2", "orchestratorVersion": "1.33.2", "vnetSubnetID": SUBNET,
        "vnetCidrs": [], "storageProfile": "ManagedDisks", "nodeTaints": ["dedicated=web:NoSchedule"],
        "nodeInitializationTaints": ["node.cilium.io/agent-not-ready=true:NoExecute",
                                     "karpenter.sh/unregistered:NoExecute"],
        "securityProfile": {"sshAccess": 0}, "maxPods": 60, "enableFIPS": False,
        "artifactStreamingProfile": {"enabled": False}, "mode": 2}


def test_bootstrappingclient_launches_the_vm_with_the_apis_custom_data_and_the_token_filled_in(
        arm: fake_arm.FakeARM) -> None:
    claim = _build(arm).create(_claim())
    [vm] = [c.body for c in arm.put_calls("virtualMachines") if "/extensions/" not in c.path]
    script = base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()
    assert script == f"#!/bin/bash\n# aks-karp-test Standard_D4s_v5\nTLS_BOOTSTRAP_TOKEN={TOKEN}\n"
    assert claim.status.provider_id.endswith("/virtualMachines/aks-default-65f84")


def test_bootstrappingclient_adds_the_cse_extension_that_runs_the_apis_command(arm: fake_arm.FakeARM) -> None:
    _build(arm).create(_claim())
    [put] = [c for c in arm.requests if c.method == "PUT" and "/extensions/" in c.path]
    assert put.path == (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Compute/"
                        f"virtualMachines/aks-default-65f84/extensions/cse-agent-karpenter")
    body = put.body
    assert body["location"] == REGION
    assert body["tags"]["karpenter.azure.com_cluster"] == "aks-karp-test"
    assert body["tags"]["karpenter.sh_nodeclaim"] == "default-65f84"
    assert body["properties"] == {
        "publisher": "Microsoft.Azure.Extensions", "type": "CustomScript", "typeHandlerVersion": "2.0",
        "autoUpgradeMinorVersion": True, "settings": {},
        "protectedSettings": {"commandToExecute": f"/bin/bash /opt/azure/containers/provision_start.sh "
                                                  f"TOKEN={TOKEN} DISTRO=aks-ubuntu-containerd-22.04-gen2"}}
    vm_put = next(i for i, c in enumerate(arm.requests) if c.method == "PUT" and c.path.endswith("/aks-default-65f84"))
    ext_put = next(i for i, c in enumerate(arm.requests) if c is put)
    assert vm_put < ext_put  # the extension goes on the created VM


def test_aksscriptless_renders_its_own_custom_data_and_adds_no_extension(arm: fake_arm.FakeARM) -> None:
    s = dataclasses.replace(SETTINGS, provision_mode="aksscriptless")
    _build(arm, s=s).create(_claim())
    assert _bootstrapping_calls(arm) == []
    assert [c for c in arm.requests if "/extensions/" in c.path] == []
    [vm] = arm.put_calls("virtualMachines")
    script = base64.b64decode(vm.body["properties"]["osProfile"]["customData"]).decode()
    assert "provision_start.sh" in script and f"TLS_BOOTSTRAP_TOKEN={TOKEN}" in script


def test_an_arm64_system_node_is_arm64_and_system_mode_in_the_provision_values(arm: fake_arm.FakeARM) -> None:
    _build(arm).create(_claim(arch="arm64", mode="system"))
    profile = _profile(arm)
    assert (profile["architecture"], profile["vmSize"], profile["mode"]) == ("Arm64", "Standard_D4ps_v5", 1)
    assert profile["distro"] == "aks-ubuntu-arm64-containerd-22.04-gen2"


def test_the_aksnodeclass_fields_reach_the_provision_values(arm: fake_arm.FakeARM) -> None:
    nc = copy.deepcopy(NODE_CLASS)
    nc["spec"].update({
        "imageFamily": "AzureLinux", "artifactStreaming": {"enabled": True},
        "security": {"trustedLaunch": {"secureBoot": True, "vtpm": False}},
        "kubelet": {"cpuManagerPolicy": "static", "cpuCFSQuota": False, "imageGCHighThresholdPercent": 70,
                    "imageGCLowThresholdPercent": 60, "containerLogMaxSize": "50Mi", "containerLogMaxFiles": 4,
                    "podPidsLimit": 4096, "topologyManagerPolicy": "best-effort",
                    "allowedUnsafeSysctls": ["net.core.somaxconn"], "failSwapOn": False},
        "linuxOSConfig": {"sysctls": {"netCoreSomaxconn": 32768, "netIPv4TCPFinTimeout": 30,
                                      "netIPv4IPLocalPortRange": "32000 60000", "vmMaxMapCount": 262144},
                          "transparentHugePageEnabled": "madvise", "transparentHugePageDefrag": "defer",
                          "swapFileSize": "1Gi"},
        "localDNS": {"mode": "Required",
                     "vnetDNSOverrides": [{"zone": ".", "protocol": "PreferUDP", "forwardDestination": "VnetDNS",
                                           "forwardPolicy": "Sequential", "maxConcurrent": 100,
                                           "cacheDuration": "1h", "serveStaleDuration": "30s",
                                           "serveStale": "Verify", "queryLogging": "Error"}],
                     "kubeDNSOverrides": [{"zone": "cluster.local", "forwardDestination": "ClusterCoreDNS"}]}})
    _build(arm, nc).create(_claim())
    profile = _profile(arm)
    assert (profile["osSku"], profile["distro"]) == (7, "aks-azurelinux-v3-gen2-tl")  # Kubernetes 1.33: Azure Linux 3
    assert profile["artifactStreamingProfile"] == {"enabled": True}
    assert profile["securityProfile"] == {"sshAccess": 0, "enableVTPM": False, "enableSecureBoot": True}
    assert profile["customKubeletConfig"] == {
        "cpuManagerPolicy": "static", "cpuCfsQuota": False, "imageGcHighThreshold": 70, "imageGcLowThreshold": 60,
        "containerLogMaxSizeMB": 50, "containerLogMaxFiles": 4, "podMaxPids": 4096,
        "topologyManagerPolicy": "best-effort", "allowedUnsafeSysctls": ["net.core.somaxconn"], "failSwapOn": False}
    assert profile["customLinuxOSConfig"] == {
        "sysctls": {"netCoreSomaxconn": 32768, "netIpv4TcpFinTimeout": 30, "netIpv4IpLocalPortRange": "32000 60000",
                    "vmMaxMapCount": 262144},
        "transparentHugePageEnabled": "madvise", "transparentHugePageDefrag": "defer", "swapFileSizeMB": 1024}
    assert profile["localDNSProfile"] == {
        "mode": "Required",
        "vnetDNSOverrides": {".": {"protocol": "PreferUDP", "forwardDestination": "VnetDNS",
                                   "forwardPolicy": "Sequential", "maxConcurrent": 100, "serveStale": "Verify",
                                   "queryLogging": "Error", "cacheDurationInSeconds": 3600,
                                   "serveStaleDurationInSeconds": 30}},
        "kubeDNSOverrides": {"cluster.local": {"forwardDestination": "ClusterCoreDNS"}}}


@pytest.mark.parametrize(("state", "sent"), [("Enabled", "Required"), ("Disabled", "Disabled")])
def test_localdns_preferred_is_never_sent_but_what_the_status_resolved(arm: fake_arm.FakeARM, state: str,
                                                                        sent: str) -> None:
    nc = copy.deepcopy(NODE_CLASS)
    nc["spec"]["localDNS"] = {"mode": "Preferred"}
    nc["status"] = {"localDNSState": state}
    _build(arm, nc).create(_claim())
    assert _profile(arm)["localDNSProfile"] == {"mode": sent}


def test_a_failing_node_bootstrapping_api_stops_the_launch_before_anything_is_created(arm: fake_arm.FakeARM) -> None:
    arm.bootstrapping_down = True
    with pytest.raises(errors.CreateError) as err:
        _build(arm).create(_claim())
    assert "node bootstrapping" in str(err.value) and "500" in str(err.value)
    assert [c for c in arm.requests if c.method == "PUT"] == []


def _problems(**changes: Any) -> str:
    s = dataclasses.replace(SETTINGS, **changes)
    with fake_arm.FakeARM() as arm, pytest.raises(errors.CloudProviderError) as err:
        vclock = clock.VirtualClock()
        factory.build(s, vclock, memory.InMemoryCluster(vclock), environ={}, subscription_id=fake_arm.SUBSCRIPTION,
                      region=REGION, endpoint_url="https://management.azure.com", ca_bundle=CA,
                      kubernetes_version="1.33.2", credential=object(), subnet_id=SUBNET)
        del arm
    return str(err.value)


def test_the_header_batch_machine_api_mode_is_refused_at_start_up_naming_the_setting() -> None:
    text = _problems(provision_mode="aksmachineapiheaderbatch")
    assert ("PROVISION_MODE must be aksscriptless, bootstrappingclient, aksmachineapi, not "
            "'aksmachineapiheaderbatch': karpy creates AKS machines one at a time") in text


def test_aksmachineapi_needs_the_pool_name_use_sig_and_the_clusters_resource_group() -> None:
    text = _problems(provision_mode="aksmachineapi")
    assert "AKS_MACHINES_POOL_NAME is required when PROVISION_MODE is aksmachineapi" in text
    assert "USE_SIG must be true when PROVISION_MODE is aksmachineapi" in text
    assert "ARM_RESOURCE_GROUP (the managed cluster's resource group) is required" in text


def test_an_unknown_provision_mode_is_refused_naming_expected_and_found() -> None:
    text = _problems(provision_mode="scriptless")
    assert ("--provision-mode / PROVISION_MODE must be aksscriptless, bootstrappingclient, aksmachineapi, "
            "not 'scriptless'") in text


def test_bootstrappingclient_needs_the_server_url_and_the_clusters_resource_group() -> None:
    text = _problems(provision_mode="bootstrappingclient", node_bootstrapping_server_url="")
    assert "NODEBOOTSTRAPPING_SERVER_URL is required when PROVISION_MODE is bootstrappingclient" in text
    assert "ARM_RESOURCE_GROUP" in text


def test_use_sig_needs_the_sig_subscription_and_the_aks_machine_api_mode() -> None:
    text = _problems(provision_mode="aksscriptless", use_sig=True)
    assert "--sig-subscription-id / SIG_SUBSCRIPTION_ID is required when USE_SIG is true" in text
    assert "USE_SIG=true is taken with PROVISION_MODE=aksmachineapi only" in text


def test_provision_mode_and_its_settings_are_read_from_karpenters_environment_variables() -> None:
    s = settings_sources.load(environ={"PROVISION_MODE": "bootstrappingclient",
                                       "NODEBOOTSTRAPPING_SERVER_URL": "https://nb.example",
                                       "AKS_MACHINES_POOL_NAME": "aksmanagedap", "USE_SIG": "true",
                                       "SIG_SUBSCRIPTION_ID": "10945678-1234-1234-1234-123456789012"})
    assert (s.provision_mode, s.node_bootstrapping_server_url, s.aks_machines_pool_name, s.use_sig) == (
        "bootstrappingclient", "https://nb.example", "aksmanagedap", True)
    assert s.sig_subscription_id == "10945678-1234-1234-1234-123456789012"
    assert settings.Settings().provision_mode == "aksscriptless"


@pytest.mark.parametrize("mode", ["aksscriptless", "bootstrappingclient"])
def test_in_azures_clouds_every_vm_gets_the_aks_identifying_extension_last(arm: fake_arm.FakeARM, mode: str) -> None:
    _build(arm, s=dataclasses.replace(SETTINGS, provision_mode=mode), aks_identifying_extension=True).create(_claim())
    puts = [c for c in arm.requests if c.method == "PUT" and "/extensions/" in c.path]
    names = [c.path.rsplit("/", 1)[-1] for c in puts]
    assert names == (["cse-agent-karpenter", "computeAksLinuxBilling"] if mode == "bootstrappingclient"
                     else ["computeAksLinuxBilling"])
    body = puts[-1].body
    assert body["location"] == REGION and body["tags"]["karpenter.azure.com_cluster"] == "aks-karp-test"
    assert body["properties"] == {"publisher": "Microsoft.AKS", "type": "Compute.AKS.Linux.Billing",
                                  "typeHandlerVersion": "1.0", "autoUpgradeMinorVersion": True, "settings": {}}


@pytest.mark.parametrize(("endpoint", "identified"), [
    ("", True), ("https://management.azure.com", True), ("https://management.chinacloudapi.cn/", True),
    ("https://management.usgovcloudapi.net", True), ("http://127.0.0.1:8443", False),
    ("https://management.local.azurestack.external", False)])
def test_the_aks_identifying_extension_is_added_in_the_clouds_karpenter_adds_it_in(endpoint: str,
                                                                                    identified: bool) -> None:
    assert factory._aks_cloud(endpoint) is identified
