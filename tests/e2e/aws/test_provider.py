"""karpy's AWS provider against a moto server: NodeClass resolution, launches, capacity, ownership."""

from __future__ import annotations

import base64
import concurrent.futures
from typing import Any

import pytest

from karpy.api import nodeclaim
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import provider

from . import moto_world
from .conftest import AWS

pytestmark = pytest.mark.e2e


def claim(name: str, types: list[str], capacity_type: str = "on-demand", pool: str = "default") -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool, "team": "payments"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}],
                 "taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}],
                 "resources": {"requests": {"cpu": "1"}}}})


def instance(aws: AWS, provider_id: str) -> dict[str, Any]:
    iid = provider.instance_id_of(provider_id)
    found: dict[str, Any] = aws.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    return found


def tags(inst: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags") or ()}


def test_a_nodeclass_resolves_to_its_subnets_security_groups_newest_amis_and_a_created_instance_profile(
        aws: AWS) -> None:
    status = aws.provider.resolve_node_class(aws.node_class())
    assert sorted((s["id"], s["zone"]) for s in status["subnets"]) == sorted(
        (sid, zone) for zone, sid in aws.account.subnets.items())
    assert all(s["zoneID"] for s in status["subnets"])
    assert [g["id"] for g in status["securityGroups"]] == [aws.account.security_group]
    assert {a["id"] for a in status["amis"]} == set(aws.account.amis.values())
    nvidia = next(a for a in status["amis"] if a["id"] == aws.account.amis["nvidia"])
    assert {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"} in nvidia["requirements"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    profile = moto_world.client("iam", aws.url).get_instance_profile(
        InstanceProfileName=status["instanceProfile"])["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["KarpenterNodeRole"]


def test_a_selector_that_matches_nothing_makes_the_nodeclass_not_ready_with_the_reason(aws: AWS) -> None:
    obj = aws.node_class(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "no-such-cluster"}}])
    status = aws.provider.resolve_node_class(obj)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "SubnetsNotFound")
    assert "subnetSelectorTerms" in ready["message"]
    with pytest.raises(errors.NodeClassNotReadyError):
        aws.provider.create(claim("default-a", ["m5.large"]))


def test_a_nodeclaim_launches_one_instance_with_cheapest_first_overrides_tags_template_and_user_data(
        aws: AWS) -> None:
    aws.node_class()
    launched = aws.provider.create(claim("default-abc", ["m5.large", "c5.large", "m5.xlarge"]))

    request = aws.capacity.requests[-1]
    overrides = [o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"]]
    order = sorted(overrides, key=lambda o: o["Priority"])
    assert [o["InstanceType"] for o in order][:3] == ["c5.large"] * 3  # cheapest first, one per zone
    assert {o["SubnetId"] for o in overrides} == set(aws.account.subnets.values())
    assert request["Type"] == "instant"
    assert request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "c5.large"
    assert launched.metadata.labels["karpenter.sh/capacity-type"] == "on-demand"
    assert launched.status.provider_id.startswith("aws:///us-east-1")
    assert launched.status.allocatable["cpu"] == 1930
    inst = instance(aws, launched.status.provider_id)
    t = tags(inst)
    assert t["karpenter.sh/nodeclaim"] == "default-abc"
    assert t["karpenter.sh/nodepool"] == "default"
    assert t["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert t["eks:eks-cluster-name"] == moto_world.CLUSTER
    volume_specs = [s for s in request["TagSpecifications"] if s["ResourceType"] == "volume"]
    assert {x["Key"] for x in volume_specs[0]["Tags"]} >= {"karpenter.sh/nodepool", "karpenter.sh/nodeclaim"}
    template_name = request["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    assert template_name.startswith("karpenter.k8s.aws/")
    version = aws.ec2.describe_launch_template_versions(LaunchTemplateName=template_name)["LaunchTemplateVersions"][0]
    data = version["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["ImageId"] == aws.account.amis["amd64"]
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "application/node.eks.aws" in user_data
    assert f"name: {moto_world.CLUSTER}" in user_data
    assert "apiServerEndpoint: https://example.eks.amazonaws.com" in user_data
    assert "--register-with-taints=dedicated=payments:NoSchedule" in user_data
    assert "maxPods: 29" in user_data

    again = aws.provider.create(claim("default-def", ["m5.large", "c5.large", "m5.xlarge"]))
    assert again.status.provider_id != launched.status.provider_id
    names = [c["LaunchTemplateSpecification"]["LaunchTemplateName"]
             for c in aws.capacity.requests[-1]["LaunchTemplateConfigs"]]
    assert template_name in names  # the same configuration reuses its template
    assert len(aws.provider.templates.created) == 2  # one per max-pods group, created once


def test_root_volume_size_sets_the_ephemeral_storage_and_the_block_device_mapping(aws: AWS) -> None:
    aws.node_class(blockDeviceMappings=[{"deviceName": "/dev/xvda", "rootVolume": True,
                                         "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}])
    launched = aws.provider.create(claim("default-disk", ["m5.large"]))
    assert launched.status.capacity["ephemeral-storage"] == 100 * 2**30 * 1000
    name = aws.capacity.requests[-1]["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    data = aws.ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"][0][
        "LaunchTemplateData"]
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 100


def test_insufficient_capacity_on_the_cheapest_pools_falls_back_and_the_cache_is_honoured(aws: AWS) -> None:
    aws.node_class()
    aws.capacity.out = {("c5.large", zone, "on-demand") for zone in moto_world.ZONES}
    launched = aws.provider.create(claim("default-ice", ["m5.large", "c5.large"]))
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "m5.large"
    for zone in moto_world.ZONES:
        assert aws.provider.ice.is_unavailable("c5.large", zone, "on-demand")
    types = {t.name: t for t in aws.provider.get_instance_types(None)}
    assert not any(o.available for o in types["c5.large"].offerings
                   if o.capacity_type == "on-demand" and o.zone in moto_world.ZONES)

    calls = len(aws.capacity.requests)
    aws.provider.create(claim("default-ice2", ["m5.large", "c5.large"]))
    sent = aws.capacity.requests[calls]
    assert {o["InstanceType"] for c in sent["LaunchTemplateConfigs"] for o in c["Overrides"]} == {"m5.large"}

    aws.capacity.out |= {("m5.large", zone, "on-demand") for zone in moto_world.ZONES}
    aws.clock.advance(181)  # the cache forgets after three minutes; every pool is out now
    with pytest.raises(errors.InsufficientCapacityError) as exc:
        aws.provider.create(claim("default-ice3", ["m5.large", "c5.large"]))
    assert ("m5.large", "us-east-1a", "on-demand") in exc.value.offerings


def test_spot_launches_use_price_capacity_optimized_and_report_spot_from_the_lifecycle(aws: AWS) -> None:
    aws.node_class()
    launched = aws.provider.create(claim("default-spot", ["m5.large"], capacity_type="spot"))
    assert aws.capacity.requests[-1]["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert launched.metadata.labels["karpenter.sh/capacity-type"] == "spot"
    listed = {c.status.provider_id: c for c in aws.provider.list()}
    assert listed[launched.status.provider_id].metadata.labels["karpenter.sh/capacity-type"] == "spot"


def _foreign(aws: AWS, tag_list: list[dict[str, str]]) -> str:
    subnet = aws.account.subnets["us-east-1a"]
    run = aws.ec2.run_instances(ImageId=aws.account.amis["amd64"], MinCount=1, MaxCount=1, InstanceType="m5.large",
                                SubnetId=subnet, TagSpecifications=[{"ResourceType": "instance", "Tags": tag_list}])
    return f"aws:///us-east-1a/{run['Instances'][0]['InstanceId']}"


def test_list_and_delete_never_touch_node_group_or_other_cluster_instances(aws: AWS) -> None:
    aws.node_class()
    ours = aws.provider.create(claim("default-own", ["m5.large"]))
    node_group = _foreign(aws, [{"Key": f"kubernetes.io/cluster/{moto_world.CLUSTER}", "Value": "owned"},
                                {"Key": "eks:nodegroup-name", "Value": "ng-1"}])
    other = _foreign(aws, [{"Key": "karpenter.sh/nodepool", "Value": "default"},
                           {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "default"},
                           {"Key": "eks:eks-cluster-name", "Value": "another-cluster"}])
    assert [c.status.provider_id for c in aws.provider.list()] == [ours.status.provider_id]
    for pid in (node_group, other):
        foreign_claim = nodeclaim.NodeClaim.from_manifest({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "x"},
            "spec": {"requirements": []}, "status": {"providerID": pid}})
        with pytest.raises(errors.NotOwnedError):
            aws.provider.delete(foreign_claim)
        with pytest.raises(errors.NodeClaimNotFoundError):
            aws.provider.get(pid)
        assert instance(aws, pid)["State"]["Name"] == "running"
    aws.provider.delete(ours)
    with pytest.raises(errors.NodeClaimNotFoundError):
        aws.provider.delete(ours)
    assert aws.provider.list() == []


def test_prices_come_from_the_pricing_api_and_the_spot_price_history(aws: AWS) -> None:
    aws.pricing.prices["m5.large"] = 0.5  # not the list price: proves the API answer is used
    types = {t.name: t for t in aws.provider.get_instance_types(None)}
    offerings = {(o.zone, o.capacity_type): o.price for o in types["m5.large"].offerings}
    assert offerings[("us-east-1a", "on-demand")] == 0.5
    assert offerings[("us-east-1a", "spot")] == 0.00001  # what moto's DescribeSpotPriceHistory says
    assert aws.pricing.calls == 1
    assert aws.provider.prices.on_demand_source == "pricing-api"
    assert "t4g.nano" in types  # a type the stub does not price falls back to karpy's packaged table


def test_launch_templates_unused_for_an_hour_are_deleted_during_list(aws: AWS) -> None:
    aws.node_class()
    aws.provider.create(claim("default-lt", ["m5.large"]))
    (name,) = aws.provider.templates.created
    aws.clock.advance(1800)
    aws.provider.list()
    assert aws.ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"]
    aws.clock.advance(3600)
    aws.provider.list()
    found = aws.ec2.describe_launch_templates(
        Filters=[{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [moto_world.CLUSTER]}])["LaunchTemplates"]
    assert [t["LaunchTemplateName"] for t in found] == []


def test_concurrent_identical_launches_are_batched_and_each_instance_carries_its_own_nodeclaim_tag(
        aws: AWS) -> None:
    aws.node_class()
    aws.provider.create(claim("default-warm", ["m5.large"]))  # templates exist: the launches below are identical
    moto_world.Latency(0.2).attach(aws.provider.session.ec2)
    calls = aws.provider.fleet.calls
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        launched = list(pool.map(aws.provider.create, [claim(f"default-{i}", ["m5.large"]) for i in range(12)]))
    assert len({c.status.provider_id for c in launched}) == 12
    assert aws.provider.fleet.calls - calls < 12  # identical requests shared CreateFleet calls
    for c in launched:
        assert tags(instance(aws, c.status.provider_id))["karpenter.sh/nodeclaim"] == c.name


def test_the_batcher_and_user_data_metrics_are_fed_by_the_aws_provider(aws: AWS) -> None:
    """Karpenter's karpenter_cloudprovider_batcher_* and karpenter_ec2nodeclasses_userdata_bytes."""
    from karpy.observability import metrics as metrics_mod

    m = metrics_mod.Metrics()
    aws.provider.report_metrics_to(m)
    aws.node_class()
    aws.provider.create(claim("default-metrics", ["m5.large"]))
    assert m.value("karpenter_cloudprovider_batcher_batch_size_count", batcher="create_fleet") == 1
    assert m.value("karpenter_cloudprovider_batcher_batch_size_sum", batcher="create_fleet") == 1
    assert m.value("karpenter_ec2nodeclasses_userdata_bytes", nodeclass="default") > 100


def test_launch_template_cleanup_deletes_only_templates_with_every_tag_karpy_writes(aws: AWS) -> None:
    aws.node_class()
    aws.provider.create(claim("default-lt", ["m5.large"]))
    (ours,) = aws.provider.templates.created
    cluster_tag = {"Key": "karpenter.k8s.aws/cluster", "Value": moto_world.CLUSTER}
    foreign = {
        "karpenter.k8s.aws/1234": [cluster_tag],  # karpy's name, one tag only
        "team-template": [cluster_tag, {"Key": "eks:eks-cluster-name", "Value": moto_world.CLUSTER},
                          {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "default"}],  # every tag, not our name
        "karpenter.k8s.aws/5678": [cluster_tag, {"Key": "eks:eks-cluster-name", "Value": "another"},
                                   {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "default"}],
    }
    for name, tag_list in foreign.items():
        aws.ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": "ami-1"},
                                       TagSpecifications=[{"ResourceType": "launch-template", "Tags": tag_list}])
    for _ in range(3):
        aws.clock.advance(3700)
        aws.provider.list()
    left = {t["LaunchTemplateName"] for t in aws.ec2.describe_launch_templates()["LaunchTemplates"]}
    assert ours not in left
    assert set(foreign) <= left
