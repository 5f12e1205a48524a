"""Windows nodes, RAID0 instance stores, IPv6 clusters and the EC2NodeClass's launch fields against moto:
the launch template data, user data and CreateFleet request checked field by field."""

from __future__ import annotations

import base64
import datetime
import random
from typing import Any

import pytest
import yaml
from moto.backends import get_backend
from moto.core.models import DEFAULT_ACCOUNT_ID

from karpy import settings
from karpy.api import nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import factory
from karpy.kube import memory

from . import moto_world
from .conftest import AWS, attach

pytestmark = pytest.mark.e2e


def claim(name: str, types: list[str], requests: dict[str, str] | None = None) -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                 "resources": {"requests": requests or {"cpu": "1"}}}})


def template_data(aws: AWS) -> dict[str, Any]:
    request = aws.capacity.requests[-1]
    name = request["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    versions = aws.ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"]
    data: dict[str, Any] = versions[0]["LaunchTemplateData"]
    return data


def user_data(aws: AWS) -> str:
    return base64.b64decode(template_data(aws)["UserData"]).decode()


def seed_windows_ami(year: str, k8s: str = moto_world.K8S_VERSION) -> str:
    from moto.ec2.models.amis import Ami

    backend = get_backend("ec2")[DEFAULT_ACCOUNT_ID][moto_world.REGION]
    name = f"Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}-2024.11.13"
    ami_id = f"ami-{abs(hash(name)) % 16**17:017x}"
    backend.amis[ami_id] = Ami(backend, ami_id, name=name, architecture="x86_64", owner_id="801119661308",
                               platform="windows", creation_date=datetime.datetime(2024, 11, 13, tzinfo=datetime.UTC),
                               region_name=moto_world.REGION)
    moto_world.put_ssm_parameters({
        f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id": ami_id})
    return ami_id


def test_a_windows2022_alias_resolves_the_eks_windows_ami_with_windows_requirements(aws: AWS) -> None:
    ami = seed_windows_ami("2022")
    status = aws.provider.resolve_node_class(aws.node_class(amiSelectorTerms=[{"alias": "windows2022@latest"}]))
    assert [a["id"] for a in status["amis"]] == [ami]
    assert status["amis"][0]["requirements"] == [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]},
        {"key": "node.kubernetes.io/windows-build", "operator": "In", "values": ["10.0.20348"]}]


def test_a_windows_nodeclaim_gets_a_windows_node_its_root_volume_and_the_eks_powershell_bootstrap(aws: AWS) -> None:
    ami = seed_windows_ami("2022")
    aws.node_class(amiSelectorTerms=[{"alias": "windows2022@latest"}])
    launched = aws.provider.create(claim("win-a", ["m5.large", "m6g.large"]))
    assert launched.metadata.labels["kubernetes.io/os"] == "windows"
    assert launched.metadata.labels["node.kubernetes.io/windows-build"] == "10.0.20348"
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "m5.large"  # arm64 has no Windows AMI
    assert launched.status.capacity["pods"] == 110_000
    assert launched.status.capacity["vpc.amazonaws.com/PrivateIPv4Address"] == 9_000
    overrides = [o for c in aws.capacity.requests[-1]["LaunchTemplateConfigs"] for o in c["Overrides"]]
    assert {o["InstanceType"] for o in overrides} == {"m5.large"}
    data = template_data(aws)
    assert data["ImageId"] == ami
    assert data["BlockDeviceMappings"] == [{"DeviceName": "/dev/sda1", "Ebs": {
        "VolumeSize": 50, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}}]
    text = user_data(aws)
    lines = text.split("\n")
    assert lines[0] == "<powershell>" and lines[-1] == "</powershell>"
    assert lines[2].startswith(f"& $EKSBootstrapScriptFile -EKSClusterName '{moto_world.CLUSTER}' "
                               "-APIServerEndpoint 'https://example.eks.amazonaws.com' -Base64ClusterCA 'Q0EK' "
                               "-KubeletExtraArgs '--node-labels=karpenter.sh/nodepool=default")
    assert "--max-pods=110'" in lines[2]


def test_windows2025_on_a_cluster_older_than_1_35_is_not_ready_and_says_why(aws: AWS) -> None:
    seed_windows_ami("2025")
    status = aws.provider.resolve_node_class(aws.node_class(amiSelectorTerms=[{"alias": "windows2025@latest"}]))
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "AMINotFound")
    assert "1.35" in ready["message"]
    with pytest.raises(errors.NodeClassNotReadyError):
        aws.provider.create(claim("win-b", ["m5.large"]))


def test_raid0_sizes_ephemeral_storage_from_the_instance_store_and_asks_nodeadm_for_the_array(aws: AWS) -> None:
    aws.pricing.prices["m5d.large"] = 0.113
    aws.node_class(instanceStorePolicy="RAID0")
    launched = aws.provider.create(claim("raid-a", ["m5d.large"], {"cpu": "1", "ephemeral-storage": "50G"}))
    assert launched.status.capacity["ephemeral-storage"] == 75 * 10**9 * 1000
    text = user_data(aws)
    part = text.split('Content-Type: application/node.eks.aws; charset="us-ascii"\n\n', 1)[1].split("\n--//", 1)[0]
    assert yaml.safe_load(part)["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}


def test_a_pod_eni_request_fits_only_trunking_compatible_types(aws: AWS) -> None:
    aws.node_class()
    launched = aws.provider.create(claim("eni-a", ["m5.large", "t3.medium"],
                                         {"cpu": "1", "vpc.amazonaws.com/pod-eni": "1"}))
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "m5.large"
    overrides = [o for c in aws.capacity.requests[-1]["LaunchTemplateConfigs"] for o in c["Overrides"]]
    assert {o["InstanceType"] for o in overrides} == {"m5.large"}  # t3.medium has no branch ENIs
    assert launched.status.capacity["vpc.amazonaws.com/pod-eni"] == 9_000
    assert launched.status.allocatable["vpc.amazonaws.com/pod-eni"] == 9_000


def ipv6_provider(aws: AWS) -> Any:
    cluster = memory.InMemoryCluster(aws.clock, rng=random.Random(2))
    cluster.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kube-dns", "namespace": "kube-system"},
                    "spec": {"clusterIP": "fd30:1c53:5f8a::a", "ports": [{"port": 53}]}})
    s = settings.Settings(cluster_name=moto_world.CLUSTER, cluster_endpoint="https://example.eks.amazonaws.com")
    p = factory.build(s, aws.clock, cluster, endpoint_url=aws.url, region=moto_world.REGION,
                      kubernetes_version=moto_world.K8S_VERSION, ca_bundle="Q0EK")
    aws.capacity, aws.pricing = attach(p, aws.account, moto_world.ResponseCache())
    aws.cluster, aws.provider = cluster, p
    return p


def test_an_ipv6_cluster_gets_ipv6_interfaces_prefix_delegation_metadata_and_the_kube_dns_address(
        aws: AWS) -> None:
    p = ipv6_provider(aws)
    assert p.cluster_dns == "fd30:1c53:5f8a::a"
    aws.node_class(ipPrefixCount=1, metadataOptions={"httpProtocolIPv6": "enabled", "httpTokens": "required"})
    p.create(claim("v6-a", ["m5.large"]))
    data = template_data(aws)
    assert data["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": [aws.account.security_group],
                                          "PrimaryIpv6": True, "Ipv6AddressCount": 1, "Ipv6PrefixCount": 1}]
    assert "SecurityGroupIds" not in data
    assert data["MetadataOptions"]["HttpProtocolIpv6"] == "enabled"
    part = user_data(aws).split('Content-Type: application/node.eks.aws; charset="us-ascii"\n\n', 1)[1]
    assert yaml.safe_load(part.split("\n--//", 1)[0])["spec"]["kubelet"]["config"]["clusterDNS"] == [
        "fd30:1c53:5f8a::a"]


def test_the_service_range_of_describe_cluster_gives_the_dns_address_when_kube_dns_is_absent() -> None:
    assert factory.dns_of_service_range({"kubernetesNetworkConfig": {
        "ipFamily": "ipv6", "serviceIpv6Cidr": "fd30:1c53:5f8a::/108", "serviceIpv4Cidr": "10.100.0.0/16"}}) == \
        "fd30:1c53:5f8a::a"
    assert factory.dns_of_service_range({"kubernetesNetworkConfig": {
        "ipFamily": "ipv4", "serviceIpv4Cidr": "172.20.0.0/16"}}) == "172.20.0.10"
    assert factory.dns_of_service_range({}) == ""


def test_network_interfaces_prefixes_conntrack_cpu_options_placement_group_and_context_reach_the_launch(
        aws: AWS) -> None:
    group_id = "pg-0123456789abcdef0"
    moto_world.PlacementGroupStub({"training": (group_id, "cluster")}).attach(aws.provider.session.ec2)
    aws.node_class(
        ipPrefixCount=2, context="ctx-123", cpuOptions={"nestedVirtualization": "enabled"},
        connectionTracking={"tcpEstablishedTimeout": 120, "udpStreamTimeout": 60, "udpTimeout": 30},
        placementGroupSelector={"name": "training"},
        networkInterfaces=[{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                           {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}])
    launched = aws.provider.create(claim("net-a", ["m5.large"]))
    request = aws.capacity.requests[-1]
    assert request["Context"] == "ctx-123"
    data = template_data(aws)
    conntrack = {"TcpEstablishedTimeout": 120, "UdpStreamTimeout": 60, "UdpTimeout": 30}
    assert data["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "Groups": [aws.account.security_group], "NetworkCardIndex": 0, "InterfaceType": "interface",
         "Ipv4PrefixCount": 2, "ConnectionTrackingSpecification": conntrack},
        {"DeviceIndex": 0, "Groups": [aws.account.security_group], "NetworkCardIndex": 1,
         "InterfaceType": "efa-only"}]
    assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
    assert data["Placement"] == {"GroupId": group_id}
    assert launched.status.capacity["vpc.amazonaws.com/efa"] == 1000  # one EFA-only interface
    assert launched.status.capacity["pods"] == 29000  # it is on card 1: the ENI limit of card 0 stays
    node_labels = launched.metadata.labels
    assert node_labels["karpenter.k8s.aws/placement-group-id"] == group_id
    assert node_labels["karpenter.k8s.aws/instance-tenancy"] == "default"
    zone = node_labels["topology.kubernetes.io/zone"]
    subnet = aws.ec2.describe_subnets(SubnetIds=[aws.account.subnets[zone]])["Subnets"][0]
    assert node_labels["topology.k8s.aws/zone-id"] == subnet["AvailabilityZoneId"]


def test_a_placement_group_selector_that_matches_nothing_makes_the_nodeclass_not_ready(aws: AWS) -> None:
    moto_world.PlacementGroupStub({"training": ("pg-1", "cluster")}).attach(aws.provider.session.ec2)
    status = aws.provider.resolve_node_class(aws.node_class(placementGroupSelector={"name": "missing"}))
    pg = next(c for c in status["conditions"] if c["type"] == "PlacementGroupReady")
    assert (pg["status"], pg["reason"]) == ("False", "PlacementGroupNotFound")
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "False"
