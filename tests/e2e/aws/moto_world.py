"""A moto server in the test process and the helpers that fill its known gaps for karpy's AWS provider.

* :func:`start_server` runs ``moto.server.ThreadedMotoServer`` on 127.0.0.1, a free port; one per
  test session (the ``moto`` fixture), reset between tests (:func:`reset`).
* :func:`seed_account` makes a VPC with one tagged subnet per zone, a tagged security group, an
  IAM role, EKS-optimized AMIs (amd64, arm64, nvidia) and the public EKS SSM parameters pointing at
  them (moto refuses ``/aws/...`` names from clients, so they go in through the backend).
* :class:`CapacityInjector`: moto never returns CreateFleet ``Errors[]``; this botocore hook drops
  the overrides of chosen pools ``(type, zone, capacity type)`` from a CreateFleet request before it
  is sent and adds the ``InsufficientInstanceCapacity`` errors EC2 would return to the response;
  with nothing left it answers itself with no instance. It also records every request it sees.
* :class:`PricingStub`: moto has no Pricing backend; a botocore ``before-call`` hook answers
  ``GetProducts`` from a small table.
* :class:`Latency`: sleeps before each CreateFleet (for the concurrency bench).
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.awsrequest
from moto.backends import get_backend
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
K8S_VERSION = "1.31"
CLUSTER = "test-cluster"


def start_server() -> tuple[ThreadedMotoServer, str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def reset(url: str) -> None:
    req = urllib.request.Request(f"{url}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


def client(service: str, url: str) -> Any:
    return boto3.client(service, region_name=REGION, endpoint_url=url)


@dataclass
class Account:
    vpc_id: str
    subnets: dict[str, str]
    """zone -> subnet id."""
    security_group: str
    role: str
    amis: dict[str, str]
    """``amd64`` / ``arm64`` / ``nvidia`` -> image id."""
    subnet_zones: dict[str, str] = field(default_factory=dict)


def seed_account(url: str, *, discovery: str = CLUSTER) -> Account:
    ec2 = client("ec2", url)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets: dict[str, str] = {}
    for i, zone in enumerate(ZONES):
        s = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i * 16}.0/20", AvailabilityZone=zone,
                              TagSpecifications=[{"ResourceType": "subnet", "Tags": [
                                  {"Key": "karpenter.sh/discovery", "Value": discovery}]}])["Subnet"]
        subnets[zone] = s["SubnetId"]
    sg = ec2.create_security_group(GroupName=f"{discovery}-nodes", Description="nodes", VpcId=vpc,
                                   TagSpecifications=[{"ResourceType": "security-group", "Tags": [
                                       {"Key": "karpenter.sh/discovery", "Value": discovery}]}])["GroupId"]
    iam = client("iam", url)
    iam.create_role(RoleName="KarpenterNodeRole", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                "Action": "sts:AssumeRole"}]}))
    amis = seed_eks_amis(ec2)
    return Account(vpc, subnets, sg, "KarpenterNodeRole", amis, {v: k for k, v in subnets.items()})


def seed_eks_amis(ec2: Any, k8s: str = K8S_VERSION) -> dict[str, str]:
    """Three images and the AL2023 / AL2 SSM parameters naming them."""
    backend = get_backend("ec2")[DEFAULT_ACCOUNT_ID][REGION]
    from moto.ec2.models.amis import Ami

    out: dict[str, str] = {}
    for key, arch, name in (("amd64", "x86_64", f"amazon-eks-node-al2023-x86_64-standard-{k8s}-v20241121"),
                            ("arm64", "arm64", f"amazon-eks-node-al2023-arm64-standard-{k8s}-v20241121"),
                            ("nvidia", "x86_64", f"amazon-eks-node-al2023-x86_64-nvidia-{k8s}-v20241121")):
        ami_id = f"ami-{abs(hash(name)) % 16**17:017x}"
        backend.amis[ami_id] = Ami(backend, ami_id, name=name, architecture=arch, owner_id="602401143452",
                                   creation_date=datetime.datetime(2024, 11, 21, tzinfo=datetime.UTC),
                                   region_name=REGION)
        out[key] = ami_id
    base = f"/aws/service/eks/optimized-ami/{k8s}"
    put_ssm_parameters({
        f"{base}/amazon-linux-2023/x86_64/standard/recommended/image_id": out["amd64"],
        f"{base}/amazon-linux-2023/arm64/standard/recommended/image_id": out["arm64"],
        f"{base}/amazon-linux-2023/x86_64/nvidia/recommended/image_id": out["nvidia"],
        f"{base}/amazon-linux-2/recommended/image_id": out["amd64"],
    })
    return out


def put_ssm_parameters(values: Mapping[str, str]) -> None:
    """Public (``/aws/service/...``) parameters, written through moto's SSM backend."""
    from moto.ssm import models as ssm_models

    parameter: Any = ssm_models.Parameter
    backend = get_backend("ssm")[DEFAULT_ACCOUNT_ID][REGION]
    for name, value in values.items():
        backend._parameters[name].append(parameter(
            account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String", description=None,
            allowed_pattern=None, keyid=None, last_modified_date=datetime.datetime.now(tz=datetime.UTC), version=1,
            data_type="text"))


def _ok() -> Any:
    """An HTTP 200 response as botocore's ``before-call`` short-cut expects it."""
    return botocore.awsrequest.AWSResponse("http://127.0.0.1/", 200, {}, None)


class CapacityInjector:
    """See the module docstring; ``attach(ec2_client)``; ``out`` holds the exhausted pools."""

    def __init__(self, subnet_zones: Mapping[str, str], out: Iterable[tuple[str, str, str]] = ()) -> None:
        self.subnet_zones = dict(subnet_zones)
        self.out = set(out)
        self.requests: list[dict[str, Any]] = []
        self._dropped = threading.local()

    def attach(self, ec2: Any) -> None:
        ec2.meta.events.register("provide-client-params.ec2.CreateFleet", self._params)
        ec2.meta.events.register("before-call.ec2.CreateFleet", self._before)
        ec2.meta.events.register("after-call.ec2.CreateFleet", self._after)

    def _params(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(json.loads(json.dumps(params)))
        ct = params["TargetCapacitySpecification"]["DefaultTargetCapacityType"]
        dropped: list[dict[str, Any]] = []
        for config in params["LaunchTemplateConfigs"]:
            kept = []
            for o in config.get("Overrides") or ():
                zone = self.subnet_zones.get(o.get("SubnetId", ""), "")
                if (o["InstanceType"], zone, ct) in self.out:
                    dropped.append({"LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": config["LaunchTemplateSpecification"], "Overrides": dict(o)},
                        "Lifecycle": ct, "ErrorCode": "InsufficientInstanceCapacity",
                        "ErrorMessage": "We currently do not have sufficient capacity in the Availability Zone."})
                else:
                    kept.append(o)
            config["Overrides"] = kept
        params["LaunchTemplateConfigs"] = [c for c in params["LaunchTemplateConfigs"] if c["Overrides"]]
        self._dropped.errors = dropped
        self._dropped.nothing_left = not params["LaunchTemplateConfigs"]

    def _before(self, **_: Any) -> Any:
        if getattr(self._dropped, "nothing_left", False):
            errors = list(getattr(self._dropped, "errors", []))
            self._dropped.errors = []
            return (_ok(), {"FleetId": "fleet-none", "Instances": [], "Errors": errors})
        return None

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        errors = list(getattr(self._dropped, "errors", []))
        if errors:
            parsed.setdefault("Errors", []).extend(errors)
            self._dropped.errors = []


class PricingStub:
    """Answers ``pricing:GetProducts`` with on-demand prices from ``prices`` (type -> USD/h)."""

    def __init__(self, prices: Mapping[str, float]) -> None:
        self.prices = dict(prices)
        self.calls = 0

    def attach(self, pricing: Any) -> None:
        pricing.meta.events.register("before-call.pricing.GetProducts", self._answer)

    def _answer(self, **_: Any) -> Any:
        self.calls += 1
        items = [json.dumps({"product": {"attributes": {"instanceType": name, "regionCode": REGION}},
                             "terms": {"OnDemand": {"X": {"priceDimensions": {"Y": {
                                 "pricePerUnit": {"USD": f"{price:.4f}"}}}}}}})
                 for name, price in sorted(self.prices.items())]
        return (_ok(), {"PriceList": items, "FormatVersion": "aws_v1"})


class PlacementGroupStub:
    """Answers ``ec2:DescribePlacementGroups`` (moto has no placement groups) from ``groups``
    (name -> (id, strategy)), by ``GroupNames`` or ``GroupIds``; an unknown one is EC2's
    ``InvalidPlacementGroup.Unknown``. A ``partition`` group has ``partitions`` partitions (``PartitionCount``)."""

    def __init__(self, groups: Mapping[str, tuple[str, str]], partitions: int = 7) -> None:
        self.groups = dict(groups)
        self.partitions = partitions

    def attach(self, ec2: Any) -> None:
        ec2.meta.events.register("before-call.ec2.DescribePlacementGroups", self._answer)

    def _answer(self, params: Mapping[str, Any], **_: Any) -> Any:
        body = params.get("body") or {}  # the serialized query: GroupName.1=..., GroupId.1=...
        names = [str(v) for k, v in body.items() if k.startswith("GroupName.")]
        ids = [str(v) for k, v in body.items() if k.startswith("GroupId.")]
        found = [{"GroupName": n, "GroupId": gid, "Strategy": strategy, "State": "available",
                  **({"PartitionCount": self.partitions} if strategy == "partition" else {})}
                 for n, (gid, strategy) in sorted(self.groups.items()) if n in names or gid in ids]
        if len(found) < len(names) + len(ids):
            return (botocore.awsrequest.AWSResponse("http://127.0.0.1/", 400, {}, None),
                    {"Error": {"Code": "InvalidPlacementGroup.Unknown", "Message": "unknown placement group"}})
        return (_ok(), {"PlacementGroups": found})


class Latency:
    """Sleeps ``seconds`` before each CreateFleet is sent."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def attach(self, ec2: Any) -> None:
        ec2.meta.events.register("before-send.ec2.CreateFleet", self._sleep)

    def _sleep(self, **_: Any) -> None:
        time.sleep(self.seconds)


class ResponseCache:
    """Serves repeated read-only calls whose answers never change in moto (the instance-type catalog,
    offerings, spot price history) from memory after the first answer: moto takes seconds for them."""

    OPERATIONS = ("DescribeInstanceTypes", "DescribeInstanceTypeOfferings", "DescribeSpotPriceHistory")

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}

    def attach(self, ec2: Any) -> None:
        for op in self.OPERATIONS:
            ec2.meta.events.register(f"before-call.ec2.{op}", self._before)
            ec2.meta.events.register(f"after-call.ec2.{op}", self._after)

    def _before(self, model: Any, **_: Any) -> Any:
        parsed = self.answers.get(model.name)
        return None if parsed is None else (_ok(), json.loads(json.dumps(parsed, default=str)))

    def _after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if "NextToken" not in parsed:
            self.answers.setdefault(model.name, json.loads(json.dumps(parsed, default=str)))


class FleetSecurityGroups:
    """moto's CreateFleet ignores the launch template's ``SecurityGroupIds`` (instances get the VPC's
    default group); real EC2 applies them. After each CreateFleet this puts them on the instances."""

    def __init__(self, url: str) -> None:
        self.ec2 = client("ec2", url)
        self.fixed = 0

    def attach(self, ec2: Any) -> None:
        ec2.meta.events.register("after-call.ec2.CreateFleet", self._after)

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        for inst in parsed.get("Instances") or ():
            spec = (inst.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}
            key = {"LaunchTemplateId": spec["LaunchTemplateId"]} if spec.get("LaunchTemplateId") else \
                {"LaunchTemplateName": spec.get("LaunchTemplateName", "")}
            versions = self.ec2.describe_launch_template_versions(Versions=["$Latest"], **key)
            groups = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"].get("SecurityGroupIds") or []
            for iid in inst.get("InstanceIds") or ():
                if groups:
                    self.ec2.modify_instance_attribute(InstanceId=iid, Groups=list(groups))
                    self.fixed += 1
