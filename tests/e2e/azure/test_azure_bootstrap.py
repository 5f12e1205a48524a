"""The custom data a VM is created with joins the AKS cluster: decoded from the body the fake ARM received."""

from __future__ import annotations

import base64
import io
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from karpy import clock, controller_run, settings
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.azure import bootstrap, factory, provider
from karpy.kube import memory

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg-taniai_aks-karp-test_japaneast"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/rg-net/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet-25367643/subnets/aks-subnet")
IDENTITY = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.ManagedIdentity/"
            "userAssignedIdentities/aks-karp-test-agentpool")
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIC-test-ca\n-----END CERTIFICATE-----\n").decode()
TOKEN = "abcdef.0123456789abcdef"
KUBELET_ID = "5f4a7c1e-3b2d-4e6f-8a9b-0c1d2e3f4a5b"
VNET_GUID = "72f5c0f4-5f2b-413a-8a9c-d2aa0d3d27ce"
NODE_CLASS = {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"},
              "spec": {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 128, "maxPods": 60,
                       "kubelet": {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "100m"},
                                   "evictionHard": {"memory.available": "500Mi"},
                                   "imageGCHighThresholdPercent": 70, "allowedUnsafeSysctls": ["net.core.somaxconn"],
                                   "containerLogMaxSize": "50Mi", "podPidsLimit": 4096}}}
SETTINGS = settings.Settings(
    cluster_name="aks-karp-test", cluster_endpoint="https://aks-karp-test-dns-12345678.hcp.japaneast.azmk8s.io:443",
    kubelet_bootstrap_token=TOKEN, ssh_public_key="ssh-ed25519 AAAA ops@example", network_plugin="azure",
    network_plugin_mode="overlay", network_policy="cilium", network_dataplane="cilium", dns_service_ip="10.0.0.10",
    vnet_subnet_id=SUBNET, vnet_guid=VNET_GUID, node_identities=IDENTITY, kubelet_identity_client_id=KUBELET_ID,
    node_resource_group=RG, linux_admin_username="aksops")


@pytest.fixture
def arm() -> Iterator[fake_arm.FakeARM]:
    skus = [fake_arm.sku("Standard_D2_v4", REGION, vcpus=2, memory_gb=8),
            fake_arm.sku("Standard_D2ps_v5", REGION, vcpus=2, memory_gb=8, arch="Arm64")]
    with fake_arm.FakeARM(skus=skus) as server:
        yield server


def _build(arm: fake_arm.FakeARM, s: settings.Settings = SETTINGS, **options: Any) -> provider.AzureCloudProvider:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    cluster.create(dict(NODE_CLASS))
    cloud = factory.build(s, vclock, cluster, environ={}, subscription_id=fake_arm.SUBSCRIPTION, region=REGION,
                          endpoint_url=arm.endpoint, polling_interval=0, retail_prices_endpoint="",
                          ca_bundle=CA, kubernetes_version="1.30.7", tenant_id="tenant-1", **options)
    assert isinstance(cloud, provider.AzureCloudProvider)
    return cloud


def _claim(arch: str = "amd64") -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-65f84", "labels": {labels.NODEPOOL: "default", "team": "web",
                                                         "node-role.kubernetes.io/agent": ""}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
            "requirements": [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                             {"key": labels.ARCH, "operator": "In", "values": [arch]}],
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        },
    })


def _sent(arm: fake_arm.FakeARM) -> tuple[dict[str, Any], dict[str, str]]:
    [vm] = [c.body for c in arm.put_calls("virtualMachines")]
    script = bootstrap.decode(vm["properties"]["osProfile"]["customData"])
    assert script.startswith("#!/bin/bash\n")
    assert script.rstrip().endswith('/usr/bin/nohup /bin/bash -c "/bin/bash /opt/azure/containers/provision_start.sh"')
    return vm, bootstrap.variables_of(script)


def _flags(env: dict[str, str]) -> dict[str, str]:
    return dict(f.split("=", 1) for f in env["KUBELET_FLAGS"].split())


def test_the_custom_data_carries_the_cluster_the_node_joins(arm: fake_arm.FakeARM) -> None:
    _build(arm).create(_claim())
    vm, env = _sent(arm)
    assert env["API_SERVER_NAME"] == "aks-karp-test-dns-12345678.hcp.japaneast.azmk8s.io"
    assert env["KUBE_CA_CRT"] == CA
    assert env["TLS_BOOTSTRAP_TOKEN"] == TOKEN and env["ENABLE_TLS_BOOTSTRAPPING"] == "true"
    assert env["KUBERNETES_VERSION"] == "1.30.7"
    assert env["KUBE_BINARY_URL"].endswith("/kubernetes/v1.30.7/binaries/kubernetes-node-linux-amd64.tar.gz")
    assert "/azure-acr-credential-provider-linux-amd64-v1.30.12.tar.gz" in env["CREDENTIAL_PROVIDER_DOWNLOAD_URL"]
    assert (env["SUBSCRIPTION_ID"], env["TENANT_ID"], env["LOCATION"], env["RESOURCE_GROUP"]) == (
        fake_arm.SUBSCRIPTION, "tenant-1", REGION, RG)
    assert (env["SUBNET"], env["VIRTUAL_NETWORK"], env["VIRTUAL_NETWORK_RESOURCE_GROUP"]) == (
        "aks-subnet", "aks-vnet-25367643", "rg-net")
    assert env["NETWORK_PLUGIN"] == "none"  # Azure CNI overlay: the cluster's daemonsets install the CNI
    assert env["NETWORK_POLICY"] == "cilium"
    assert env["USER_ASSIGNED_IDENTITY_ID"] == KUBELET_ID
    assert env["ADMINUSER"] == "aksops" and env["GPU_NODE"] == "false"
    props = vm["properties"]
    assert props["osProfile"]["adminUsername"] == "aksops"
    assert props["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"] == [
        {"path": "/home/aksops/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA ops@example"}]
    assert vm["identity"] == {"type": "UserAssigned", "userAssignedIdentities": {IDENTITY: {}}}
    [nic] = [c.body for c in arm.put_calls("networkInterfaces")]
    assert nic["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"] == SUBNET


def test_the_kubelet_registers_with_the_claims_labels_taints_and_node_class_settings(arm: fake_arm.FakeARM) -> None:
    launched = _build(arm).create(_claim())
    _, env = _sent(arm)
    node_labels = dict(kv.split("=", 1) for kv in env["KUBELET_NODE_LABELS"].split(","))
    assert node_labels["team"] == "web" and node_labels[labels.NODEPOOL] == "default"
    assert node_labels[labels.INSTANCE_TYPE] == "Standard_D2_v4" and node_labels[labels.CAPACITY_TYPE] == "on-demand"
    assert node_labels[labels.AZURE_SKU_FAMILY] == "D"
    assert node_labels["kubernetes.azure.com/cluster"] == RG
    assert node_labels["kubernetes.azure.com/nodenetwork-vnetguid"] == VNET_GUID
    assert node_labels["kubernetes.azure.com/kubelet-identity-client-id"] == KUBELET_ID
    assert node_labels["kubernetes.azure.com/podnetwork-type"] == "overlay"
    assert node_labels["kubernetes.azure.com/ebpf-dataplane"] == "cilium"
    assert node_labels["kubernetes.azure.com/os-sku"] == "Ubuntu"
    assert "node-role.kubernetes.io/agent" not in node_labels  # the kubelet may not set it on itself
    assert {k: v for k, v in launched.metadata.labels.items() if k in node_labels} == node_labels
    flags = _flags(env)
    assert flags["--register-with-taints"] == (
        "dedicated=web:NoSchedule,node.cilium.io/agent-not-ready=true:NoExecute,karpenter.sh/unregistered:NoExecute")
    assert flags["--max-pods"] == "60"
    assert flags["--cluster-dns"] == "10.0.0.10"
    assert flags["--cpu-manager-policy"] == "static"
    assert flags["--kube-reserved"] == "cpu=100m"
    assert flags["--eviction-hard"] == "memory.available<500Mi"
    assert flags["--image-gc-high-threshold"] == "70"
    assert flags["--allowed-unsafe-sysctls"] == "net.core.somaxconn"
    assert flags["--container-log-max-size"] == "50Mi" and flags["--pod-max-pids"] == "4096"
    assert flags["--image-credential-provider-config"] == "/var/lib/kubelet/credential-provider-config.yaml"
    assert flags["--keep-terminated-pod-volumes"] == "false"  # before 1.31
    assert flags["--kubeconfig"] == "/var/lib/kubelet/kubeconfig" and flags["--cloud-provider"] == "external"


def test_an_arm64_node_gets_arm64_binaries(arm: fake_arm.FakeARM) -> None:
    _build(arm).create(_claim("arm64"))
    vm, env = _sent(arm)
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2ps_v5"
    assert env["KUBE_BINARY_URL"].endswith("kubernetes-node-linux-arm64.tar.gz")
    assert "azure-vnet-cni-linux-arm64" in env["VNET_CNI_PLUGINS_URL"]


def test_without_overlay_the_node_runs_azure_cni_itself(arm: fake_arm.FakeARM) -> None:
    s = settings.Settings(**{**{f: getattr(SETTINGS, f) for f in SETTINGS.__dataclass_fields__},
                             "network_plugin_mode": "", "network_dataplane": "azure"})
    launched = _build(arm, s).create(_claim())
    _, env = _sent(arm)
    assert env["NETWORK_PLUGIN"] == "azure"
    assert "kubernetes.azure.com/podnetwork-type" not in env["KUBELET_NODE_LABELS"]
    assert "kubernetes.azure.com/ebpf-dataplane" not in launched.metadata.labels


def test_every_missing_or_malformed_setting_is_named_before_anything_is_called(arm: fake_arm.FakeARM) -> None:
    vclock = clock.VirtualClock()
    bad = settings.Settings(cluster_name="c", cluster_endpoint="aks.example", kubelet_bootstrap_token="not-a-token",
                            network_plugin="kubenet", vnet_guid="guid?", dns_service_ip="10.0.0.300",
                            linux_admin_username="9lives", vnet_subnet_id="/subnets/x")
    with pytest.raises(errors.CloudProviderError) as info:
        factory.build(bad, vclock, memory.InMemoryCluster(vclock), environ={}, ca_file="/nonexistent/ca.crt")
    text = str(info.value)
    for expected in ("ARM_SUBSCRIPTION_ID", "LOCATION", "--node-resource-group / AZURE_NODE_RESOURCE_GROUP",
                     "--vnet-subnet-id / VNET_SUBNET_ID must be a subnet resource id",
                     "--cluster-endpoint / CLUSTER_ENDPOINT must be a URL",
                     "--kubelet-bootstrap-token / KUBELET_BOOTSTRAP_TOKEN must be a bootstrap token",
                     "--ssh-public-key / SSH_PUBLIC_KEY", "the cluster CA is required",
                     "--network-plugin / NETWORK_PLUGIN must be azure or none", "--vnet-guid / VNET_GUID",
                     "--dns-service-ip / DNS_SERVICE_IP", "--linux-admin-username / LINUX_ADMIN_USERNAME"):
        assert expected in text
    assert info.value.retryable is False
    assert arm.requests == []


def test_karpy_controller_names_the_missing_bootstrap_settings_and_takes_karpenter_azure_flags(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from click.testing import CliRunner

    from karpy import cli

    root = logging.getLogger("karpy")
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    for name in ("KUBELET_BOOTSTRAP_TOKEN", "SSH_PUBLIC_KEY", "VNET_SUBNET_ID", "AZURE_SUBNET_ID", "ARM_ENDPOINT",
                 "CLUSTER_ENDPOINT", "AZURE_NODE_RESOURCE_GROUP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", fake_arm.SUBSCRIPTION)
    monkeypatch.setenv("CLUSTER_ENDPOINT", "https://aks.hcp.japaneast.azmk8s.io:443")
    base = ["controller", "--cloud-provider", "azure", "--in-memory-cluster", "--region", REGION,
            "--log-format", "console", "--disable-leader-election"]
    result = CliRunner().invoke(cli.main, base)
    assert result.exit_code == controller_run.EXIT_PROVIDER_UNAVAILABLE
    for missing in ("--kubelet-bootstrap-token / KUBELET_BOOTSTRAP_TOKEN", "--ssh-public-key / SSH_PUBLIC_KEY",
                    "--vnet-subnet-id / VNET_SUBNET_ID", "--node-resource-group / AZURE_NODE_RESOURCE_GROUP"):
        assert missing in result.output
    assert "CLUSTER_ENDPOINT" not in result.output
    result = CliRunner().invoke(cli.main, [*base, "--kubelet-bootstrap-token", TOKEN, "--ssh-public-key", "ssh-rsa A",
                                           "--vnet-subnet-id", SUBNET, "--node-resource-group", RG])
    assert result.exit_code == controller_run.EXIT_PROVIDER_UNAVAILABLE
    assert "KUBELET_BOOTSTRAP_TOKEN" not in result.output and "VNET_SUBNET_ID" not in result.output
    if not _in_cluster():
        assert "the cluster CA is required" in result.output


def _in_cluster() -> bool:
    import os

    return os.path.exists(factory.SERVICE_ACCOUNT_CA)


def test_the_settings_come_from_karpenter_azures_environment_names() -> None:
    from karpy import settings_sources

    env = {"KUBELET_BOOTSTRAP_TOKEN": TOKEN, "SSH_PUBLIC_KEY": "ssh-rsa A", "VNET_SUBNET_ID": SUBNET,
           "AZURE_NODE_RESOURCE_GROUP": RG, "NETWORK_PLUGIN": "none", "NETWORK_PLUGIN_MODE": "",
           "NETWORK_POLICY": "calico", "NETWORK_DATAPLANE": "azure", "DNS_SERVICE_IP": "10.2.0.10",
           "VNET_GUID": VNET_GUID, "NODE_IDENTITIES": IDENTITY, "KUBELET_IDENTITY_CLIENT_ID": KUBELET_ID,
           "LINUX_ADMIN_USERNAME": "ops"}
    s = settings_sources.load({}, env)
    assert (s.kubelet_bootstrap_token, s.ssh_public_key, s.vnet_subnet_id, s.node_resource_group) == (
        TOKEN, "ssh-rsa A", SUBNET, RG)
    assert (s.network_plugin, s.network_policy, s.network_dataplane, s.dns_service_ip) == (
        "none", "calico", "azure", "10.2.0.10")
    assert s.network_plugin_mode == "overlay"  # an empty variable is "not set", as for every other setting
    assert (s.vnet_guid, s.node_identities, s.kubelet_identity_client_id, s.linux_admin_username) == (
        VNET_GUID, IDENTITY, KUBELET_ID, "ops")
    assert TOKEN not in repr(s)
    assert settings_sources.flag_name("nodeResourceGroup") == "--node-resource-group"
    assert settings_sources.flag_name("kubeletBootstrapToken") == "--kubelet-bootstrap-token"
    from_file = settings.Settings.from_mapping({"kubeletBootstrapToken": TOKEN, "vnetSubnetID": SUBNET})
    assert from_file.kubelet_bootstrap_token == TOKEN


def test_the_controller_exits_before_serving_when_the_azure_settings_are_incomplete(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    root = logging.getLogger("karpy")
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.delenv("KUBELET_BOOTSTRAP_TOKEN", raising=False)
    err = io.StringIO()
    opts = controller_run.Options(cloud_provider="azure", in_memory_cluster=True, leader_elect=False,
                                  provider_options={"region": REGION})
    code = controller_run.run(opts, environ={"ARM_SUBSCRIPTION_ID": fake_arm.SUBSCRIPTION}, stderr=err,
                              install_signals=False)
    assert code == controller_run.EXIT_PROVIDER_UNAVAILABLE
    assert "--kubelet-bootstrap-token / KUBELET_BOOTSTRAP_TOKEN" in err.getvalue()
    assert sys.modules.get("karpy.cloudprovider.azure.factory") is factory


def test_the_cluster_ca_comes_from_the_kubeconfig_the_controller_connects_with(tmp_path: Any) -> None:
    from types import SimpleNamespace

    from karpy.kube import config as kube_config

    pem = b"-----BEGIN CERTIFICATE-----\nfrom-a-file\n-----END CERTIFICATE-----\n"
    (tmp_path / "ca.crt").write_bytes(pem)
    for cluster_entry, expected in ((f"certificate-authority-data: {CA}", CA),
                                    ("certificate-authority: ca.crt", base64.b64encode(pem).decode())):
        path = tmp_path / "kubeconfig"
        path.write_text(f"""apiVersion: v1
kind: Config
current-context: aks
clusters:
- name: aks
  cluster:
    server: https://aks.hcp.japaneast.azmk8s.io:443
    {cluster_entry}
contexts:
- name: aks
  context: {{cluster: aks, user: u}}
users:
- name: u
  user: {{token: t}}
""")
        connection = kube_config.load(str(path))
        adapter_like = SimpleNamespace(client=SimpleNamespace(connection=connection))
        config = factory.config_of(SETTINGS, adapter_like, {"ca_file": "/nonexistent"}, {})
        assert config.ca_bundle == expected
    assert factory.config_of(SETTINGS, memory.InMemoryCluster(clock.VirtualClock()), {"ca_file": "/nonexistent"},
                             {}).ca_bundle == ""
