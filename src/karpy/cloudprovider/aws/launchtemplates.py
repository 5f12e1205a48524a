"""Launch templates: one per distinct launch configuration, named by the hash of its content.

A :class:`Config` is everything a launch template holds for one NodeClass, image and set of node
labels/taints/kubelet settings: image id, user data, instance profile, security groups, block
device mappings, metadata options, detailed monitoring and tags. What a caller may rely on:

* :meth:`LaunchTemplates.ensure` returns the name of the template for a configuration:
  ``karpenter.k8s.aws/<hash>`` where the hash covers the cluster name and the whole template data, so
  equal configurations share one template and any change gives a new one. It is created on demand
  (``CreateLaunchTemplate``, tagged ``karpenter.k8s.aws/cluster=<cluster>``,
  ``karpenter.k8s.aws/ec2nodeclass=<name>``, ``eks:eks-cluster-name=<cluster>`` and the NodeClass's tags),
  found again after a restart (``DescribeLaunchTemplates`` by name), and safe under concurrent
  callers (one creation per name; ``AlreadyExists`` from a racing process is treated as found).
* Block device mappings default to a 20Gi encrypted gp3 root volume (``/dev/xvda``, Bottlerocket
  ``/dev/xvdb``, Windows 50Gi ``/dev/sda1``); metadata options default to IMDSv2 required with a hop limit of 1 (the
  EC2NodeClass model's defaults); detailed monitoring is off unless asked.
* :meth:`LaunchTemplates.cleanup` deletes this cluster's templates that are not in ``keep`` and were
  not used for :data:`UNUSED_TTL` seconds of the clock. A template is this cluster's only when it
  carries every tag karpy writes on its own (:func:`is_ours`: ``karpenter.k8s.aws/cluster`` and
  ``eks:eks-cluster-name`` equal to the cluster, a non-empty ``karpenter.k8s.aws/ec2nodeclass``) and
  karpy's name (``karpenter.k8s.aws/<digits>``); a template with one tag alone is never deleted
  (Karpenter deletes templates when they fall out
  of its cache or their NodeClass goes away).
* Network interfaces (as Karpenter builds them): with neither a public-IP choice, an IPv6 cluster,
  ``ipPrefixCount``, connection tracking nor custom interfaces, the template names the security groups
  (``SecurityGroupIds``); else it has ``NetworkInterfaces``: the NodeClass's ``networkInterfaces``
  (``NetworkCardIndex``, ``DeviceIndex``, ``InterfaceType``; an ``efa-only`` card gets no IP
  settings), or one primary interface, each with the security groups, ``AssociatePublicIpAddress``,
  in an IPv4 cluster ``Ipv4PrefixCount`` = ``ipPrefixCount``, in an IPv6 cluster ``PrimaryIpv6``,
  ``Ipv6AddressCount: 1`` and ``Ipv6PrefixCount`` = ``ipPrefixCount``, and the
  ``ConnectionTrackingSpecification`` (``TcpEstablishedTimeout``, ``UdpStreamTimeout``,
  ``UdpTimeout``). ``cpuOptions`` become ``CpuOptions`` (``CoreCount``, ``ThreadsPerCore``,
  ``NestedVirtualization``); a resolved placement group becomes ``Placement.GroupId`` (a partition group's chosen
  partition ``Placement.PartitionNumber``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy.api import nodeclass, quantity
from karpy.cloudprovider.aws import families, session

NAME_PREFIX = "karpenter.k8s.aws/"
TAG_CLUSTER = "karpenter.k8s.aws/cluster"
TAG_NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
TAG_EKS_CLUSTER = "eks:eks-cluster-name"
_DIGITS = re.compile(r"[0-9]{1,20}")
UNUSED_TTL = 3600.0
DEFAULT_ROOT_SIZE_GIB = 20


@dataclass(frozen=True)
class Config:
    node_class: str
    image_id: str
    user_data: str
    """Base64."""
    instance_profile: str
    security_group_ids: tuple[str, ...]
    block_device_mappings: tuple[nodeclass.BlockDeviceMapping, ...] = ()
    metadata_options: nodeclass.MetadataOptions = field(default_factory=nodeclass.MetadataOptions)
    detailed_monitoring: bool = False
    associate_public_ip_address: bool | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    ami_family: str = "AL2023"
    reservation_fields: Mapping[str, Any] = field(default_factory=dict)
    """Capacity reservation targeting (:func:`karpy.cloudprovider.aws.reservations.launch_template_fields`)."""
    ipv6: bool = False
    """The cluster's IP family is IPv6."""
    ip_prefix_count: int | None = None
    network_interfaces: tuple[Mapping[str, Any], ...] = ()
    """``{"networkCardIndex", "deviceIndex", "interfaceType"}`` per interface (the NodeClass's)."""
    connection_tracking: Mapping[str, int] = field(default_factory=dict)
    """``tcpEstablishedTimeout`` / ``udpStreamTimeout`` / ``udpTimeout`` seconds."""
    cpu_options: Mapping[str, Any] = field(default_factory=dict)
    """``coreCount`` / ``threadsPerCore`` / ``nestedVirtualization``."""
    placement_group_id: str = ""
    placement_group_partition: int = 0
    """The partition of a ``partition`` placement group to launch into (``0``: EC2 chooses)."""


def options_of(nc: nodeclass.EC2NodeClass) -> dict[str, Any]:
    """The NodeClass's launch-template settings beyond the common ones (ipPrefixCount, networkInterfaces,
    connectionTracking, cpuOptions), as :class:`Config` takes them."""
    return {"ip_prefix_count": nc.ip_prefix_count, "network_interfaces": nc.network_interfaces,
            "connection_tracking": nc.connection_tracking, "cpu_options": nc.cpu_options}


def default_block_devices(family: str) -> tuple[nodeclass.BlockDeviceMapping, ...]:
    f = families.of(family)
    device = f.root_device
    size = f.root_gib * 2**30 * quantity.MILLI
    return (nodeclass.BlockDeviceMapping(device_name=device, root_volume=True, ebs=nodeclass.BlockDevice(
        volume_size=size, volume_type="gp3", encrypted=True, delete_on_termination=True)),)


def _ebs(b: nodeclass.BlockDevice) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if b.volume_size is not None:
        out["VolumeSize"] = max(1, -(-b.volume_size // (2**30 * quantity.MILLI)))
    for key, value in (("VolumeType", b.volume_type), ("Iops", b.iops), ("Throughput", b.throughput),
                       ("Encrypted", b.encrypted), ("KmsKeyId", b.kms_key_id),
                       ("DeleteOnTermination", b.delete_on_termination), ("SnapshotId", b.snapshot_id)):
        if value is not None:
            out[key] = value
    return out


def template_data(c: Config) -> dict[str, Any]:
    """The ``LaunchTemplateData`` of a configuration."""
    mappings = c.block_device_mappings or default_block_devices(c.ami_family)
    m = c.metadata_options
    data: dict[str, Any] = {
        "ImageId": c.image_id,
        "UserData": c.user_data,
        "IamInstanceProfile": {"Name": c.instance_profile},
        "BlockDeviceMappings": [
            {"DeviceName": b.device_name or "/dev/xvda", **({"Ebs": _ebs(b.ebs)} if b.ebs is not None else {})}
            for b in mappings],
        "MetadataOptions": {"HttpEndpoint": m.http_endpoint, "HttpProtocolIpv6": m.http_protocol_ipv6,
                            "HttpPutResponseHopLimit": m.http_put_response_hop_limit, "HttpTokens": m.http_tokens},
        "Monitoring": {"Enabled": c.detailed_monitoring},
        "TagSpecifications": [{"ResourceType": "network-interface",
                               "Tags": [{"Key": k, "Value": v} for k, v in sorted(c.tags.items())]}],
    }
    interfaces = network_interfaces(c)
    if interfaces:
        data["NetworkInterfaces"] = interfaces
    else:
        data["SecurityGroupIds"] = list(c.security_group_ids)
    data.update(c.reservation_fields)
    cpu = {key: c.cpu_options[name] for name, key in (("coreCount", "CoreCount"), ("threadsPerCore", "ThreadsPerCore"),
                                                      ("nestedVirtualization", "NestedVirtualization"))
           if c.cpu_options.get(name) is not None}
    if cpu:
        data["CpuOptions"] = cpu
    if c.placement_group_id:
        data["Placement"] = {"GroupId": c.placement_group_id}
        if c.placement_group_partition > 0:
            data["Placement"]["PartitionNumber"] = c.placement_group_partition
    return data


_CONNTRACK = (("tcpEstablishedTimeout", "TcpEstablishedTimeout"), ("udpStreamTimeout", "UdpStreamTimeout"),
              ("udpTimeout", "UdpTimeout"))


def network_interfaces(c: Config) -> list[dict[str, Any]]:
    """The template's ``NetworkInterfaces`` (``[]``: name the security groups instead; module docstring)."""
    if (c.associate_public_ip_address is None and not c.ipv6 and c.ip_prefix_count is None
            and not c.connection_tracking and not c.network_interfaces):
        return []
    conntrack = {key: c.connection_tracking[name] for name, key in _CONNTRACK
                 if c.connection_tracking.get(name) is not None}
    wanted = c.network_interfaces or ({"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": ""},)
    out: list[dict[str, Any]] = []
    for ni in wanted:
        kind = str(ni.get("interfaceType") or "")
        spec: dict[str, Any] = {"DeviceIndex": int(ni.get("deviceIndex") or 0),
                                "Groups": list(c.security_group_ids)}
        if c.network_interfaces:
            spec["NetworkCardIndex"] = int(ni.get("networkCardIndex") or 0)
            spec["InterfaceType"] = kind
        if kind != "efa-only":
            primary = spec["DeviceIndex"] == 0 and int(ni.get("networkCardIndex") or 0) == 0
            if c.associate_public_ip_address is not None and primary:
                spec["AssociatePublicIpAddress"] = c.associate_public_ip_address
            if c.ipv6:
                spec["PrimaryIpv6"] = True
                spec["Ipv6AddressCount"] = 1
                if c.ip_prefix_count is not None:
                    spec["Ipv6PrefixCount"] = c.ip_prefix_count
            elif c.ip_prefix_count is not None:
                spec["Ipv4PrefixCount"] = c.ip_prefix_count
            if conntrack:
                spec["ConnectionTrackingSpecification"] = dict(conntrack)
        out.append(spec)
    return out


def name_of(cluster: str, data: Mapping[str, Any]) -> str:
    text = json.dumps({"cluster": cluster, "data": data}, sort_keys=True, separators=(",", ":"))
    return NAME_PREFIX + str(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


class LaunchTemplates:
    """See the module docstring."""

    def __init__(self, ec2: Any, cluster: str, clock: clock_mod.Clock) -> None:
        self.ec2 = ec2
        self.cluster = cluster
        self.clock = clock
        self._lock = threading.Lock()
        self._name_locks: dict[str, threading.Lock] = {}
        self._known: dict[str, float] = {}
        """name -> last use (clock), for templates known to exist."""
        self.created: list[str] = []

    def ensure(self, c: Config) -> str:
        data = template_data(c)
        name = name_of(self.cluster, data)
        with self._lock:
            if name in self._known:
                self._known[name] = self.clock.now()
                return name
            lock = self._name_locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._known:
                self._find_or_create(name, data, c)
            with self._lock:
                self._known[name] = self.clock.now()
        return name

    def _find_or_create(self, name: str, data: Mapping[str, Any], c: Config) -> None:
        try:
            found = session.call(self.ec2, "describe_launch_templates", LaunchTemplateNames=[name])
            if found.get("LaunchTemplates"):
                return
        except session.AWSError as exc:
            if not exc.code.startswith("InvalidLaunchTemplateName"):
                raise
        tags = {**dict(c.tags), TAG_CLUSTER: self.cluster, TAG_NODECLASS: c.node_class,
                TAG_EKS_CLUSTER: self.cluster}
        try:
            session.call(self.ec2, "create_launch_template", LaunchTemplateName=name, LaunchTemplateData=dict(data),
                         TagSpecifications=[{"ResourceType": "launch-template",
                                             "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]}])
        except session.AWSError as exc:
            if "AlreadyExists" not in exc.code:
                raise
            return
        self.created.append(name)

    def cleanup(self, keep: Collection[str] = ()) -> list[str]:
        """Delete this cluster's templates unused for :data:`UNUSED_TTL`; returns the names deleted."""
        now = self.clock.now()
        deleted: list[str] = []
        for page in session.paginate(self.ec2, "describe_launch_templates",
                                     Filters=[{"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cluster]}]):
            for lt in page.get("LaunchTemplates") or ():
                name = str(lt["LaunchTemplateName"])
                if not is_ours(lt, self.cluster):
                    continue
                with self._lock:
                    last = self._known.get(name)
                if name in keep or (last is not None and now - last < UNUSED_TTL):
                    continue
                if last is None:  # seen for the first time (e.g. after a restart): start its clock
                    with self._lock:
                        self._known[name] = now
                    continue
                try:
                    session.call(self.ec2, "delete_launch_template", LaunchTemplateName=name)
                except session.AWSError as exc:
                    if not exc.code.startswith("InvalidLaunchTemplateName"):
                        raise
                with self._lock:
                    self._known.pop(name, None)
                deleted.append(name)
        return deleted


def is_ours(template: Mapping[str, Any], cluster: str) -> bool:
    """Whether a ``DescribeLaunchTemplates`` entry is a template karpy made for ``cluster``: its name
    and every tag karpy writes on its own templates (see the module docstring)."""
    name = template.get("LaunchTemplateName")
    if not isinstance(name, str) or not name.startswith(NAME_PREFIX) or not _DIGITS.fullmatch(name[len(NAME_PREFIX):]):
        return False
    tags = {str(t.get("Key")): t.get("Value") for t in template.get("Tags") or () if isinstance(t, Mapping)}
    return tags.get(TAG_CLUSTER) == cluster and tags.get(TAG_EKS_CLUSTER) == cluster and bool(tags.get(TAG_NODECLASS))


def tags_list(tags: Mapping[str, str]) -> Sequence[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
