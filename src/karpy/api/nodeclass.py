"""Provider NodeClasses: AWS ``EC2NodeClass`` (``karpenter.k8s.aws/v1``), and the names of the others.

A NodeClass holds what a NodePool needs to know about the cloud: which image, subnets, security
groups, disks and kubelet settings its nodes get. This module holds the EC2NodeClass; the AKS
``AKSNodeClass`` lives in :mod:`karpy.api.aksnodeclass` and the shared kubelet settings and hash in
:mod:`karpy.api.kubeletconfig`; their names are re-exported here (``nodeclass.AKSNodeClass``,
``nodeclass.KubeletConfiguration``, ``nodeclass.stable_hash`` keep working).

A caller may rely on: models are frozen; ``from_manifest`` reads the newest form (``v1`` for AWS,
``v1beta1`` for Azure; older forms go through :mod:`karpy.api.conversion` first) and raises
:class:`karpy.api.errors.ValidationError` naming object, path, expected and found; ``to_manifest``
writes that form back and ``from_manifest(to_manifest(x)) == x``. ``hash()`` is a stable decimal
string over the fields whose change makes nodes drift (Karpenter's static drift fields), stored in
:data:`karpy.api.labels.NODECLASS_HASH_AWS` / :data:`karpy.api.labels.NODECLASS_HASH_AZURE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import aksnodeclass, capacityreservation, fields, kubeletconfig, meta, nodeclaim, quantity, selectors

EC2_API_VERSION = "karpenter.k8s.aws/v1"
EC2_KIND = "EC2NodeClass"

AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025")
ALIAS_FAMILIES = {"al2": "AL2", "al2023": "AL2023", "bottlerocket": "Bottlerocket",
                  "windows2019": "Windows2019", "windows2022": "Windows2022", "windows2025": "Windows2025"}
"""``amiSelectorTerms[].alias`` family prefix -> ``amiFamily`` it implies."""
VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
HASH_VERSION = "karpy-v1"
"""karpy's own NodeClass hash version (``...nodeclass-hash-version``); Karpenter's are ``v1``..``v4``:
a hash stamped under another version is re-stamped, not taken for NodeClass drift."""

# Re-exported: the kubelet settings, the hash, and the AKSNodeClass (their own modules since they grew).
KubeletConfiguration = kubeletconfig.KubeletConfiguration
EVICTION_SIGNALS = kubeletconfig.EVICTION_SIGNALS
RESERVED_RESOURCES = kubeletconfig.RESERVED_RESOURCES
stable_hash = kubeletconfig.stable_hash
AKS_API_VERSION = aksnodeclass.AKS_API_VERSION
AKS_KIND = aksnodeclass.AKS_KIND
AKS_IMAGE_FAMILIES = aksnodeclass.AKS_IMAGE_FAMILIES
AKSImage = aksnodeclass.AKSImage
AKSNodeClassStatus = aksnodeclass.AKSNodeClassStatus
AKSNodeClass = aksnodeclass.AKSNodeClass


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One ``subnetSelectorTerms`` / ``securityGroupSelectorTerms`` / ``amiSelectorTerms`` entry.

    Which fields are allowed depends on the list (see :mod:`karpy.api.validation`): subnets take
    ``tags`` or ``id``; security groups ``tags``, ``id`` or ``name``; AMIs also ``owner``, ``alias``
    and ``ssmParameter``. Tag value ``"*"`` matches any value.
    """

    tags: Mapping[str, str] = field(default_factory=dict)
    id: str | None = None
    name: str | None = None
    owner: str | None = None
    alias: str | None = None
    ssm_parameter: str | None = None

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.tags.items())), self.id, self.name, self.owner, self.alias,
                     self.ssm_parameter))

    @staticmethod
    def parse(f: fields.Fields) -> SelectorTerm:
        return SelectorTerm(tags=f.str_map("tags"), id=f.str("id"), name=f.str("name"),
                            owner=f.str("owner"), alias=f.str("alias"), ssm_parameter=f.str("ssmParameter"))

    def set_fields(self) -> tuple[str, ...]:
        """The manifest names of the fields this term sets."""
        names = [("tags", bool(self.tags)), ("id", self.id is not None), ("name", self.name is not None),
                 ("owner", self.owner is not None), ("alias", self.alias is not None),
                 ("ssmParameter", self.ssm_parameter is not None)]
        return tuple(n for n, present in names if present)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.alias is not None:
            out["alias"] = self.alias
        if self.id is not None:
            out["id"] = self.id
        if self.name is not None:
            out["name"] = self.name
        if self.owner is not None:
            out["owner"] = self.owner
        if self.ssm_parameter is not None:
            out["ssmParameter"] = self.ssm_parameter
        if self.tags:
            out["tags"] = dict(self.tags)
        return out


@dataclass(frozen=True, slots=True)
class BlockDevice:
    """``blockDeviceMappings[].ebs``; ``volume_size`` in milli-units of bytes (a quantity)."""

    volume_size: int | None = None
    volume_type: str | None = None
    iops: int | None = None
    throughput: int | None = None
    encrypted: bool | None = None
    kms_key_id: str | None = None
    delete_on_termination: bool | None = None
    snapshot_id: str | None = None

    @staticmethod
    def parse(f: fields.Fields) -> BlockDevice:
        size = f.raw("volumeSize")
        volume_size: int | None = None
        if size is not None:
            try:
                volume_size = quantity.parse_milli(size)
            except (quantity.QuantityError, TypeError):
                raise f.fail("volumeSize", "a quantity such as 20Gi or 100G", size) from None
        return BlockDevice(
            volume_size=volume_size, volume_type=f.str("volumeType"), iops=f.int("iops"),
            throughput=f.int("throughput"), encrypted=f.bool("encrypted"), kms_key_id=f.str("kmsKeyID"),
            delete_on_termination=f.bool("deleteOnTermination"), snapshot_id=f.str("snapshotID"),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.delete_on_termination is not None:
            out["deleteOnTermination"] = self.delete_on_termination
        if self.encrypted is not None:
            out["encrypted"] = self.encrypted
        if self.iops is not None:
            out["iops"] = self.iops
        if self.kms_key_id is not None:
            out["kmsKeyID"] = self.kms_key_id
        if self.snapshot_id is not None:
            out["snapshotID"] = self.snapshot_id
        if self.throughput is not None:
            out["throughput"] = self.throughput
        if self.volume_size is not None:
            out["volumeSize"] = quantity.format_quantity("ephemeral-storage", self.volume_size)
        if self.volume_type is not None:
            out["volumeType"] = self.volume_type
        return out


@dataclass(frozen=True, slots=True)
class BlockDeviceMapping:
    device_name: str | None = None
    ebs: BlockDevice | None = None
    root_volume: bool = False

    @staticmethod
    def parse(f: fields.Fields) -> BlockDeviceMapping:
        ebs = BlockDevice.parse(f.sub("ebs")) if f.has("ebs") else None
        return BlockDeviceMapping(device_name=f.str("deviceName"), ebs=ebs,
                                  root_volume=bool(f.bool("rootVolume", False)))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.device_name is not None:
            out["deviceName"] = self.device_name
        if self.ebs is not None:
            out["ebs"] = self.ebs.to_dict()
        if self.root_volume:
            out["rootVolume"] = True
        return out


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    """Instance metadata service options; defaults are Karpenter v1's."""

    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = "disabled"
    http_put_response_hop_limit: int = 1
    http_tokens: str = "required"

    @staticmethod
    def parse(f: fields.Fields) -> MetadataOptions:
        return MetadataOptions(
            http_endpoint=f.str("httpEndpoint", "enabled") or "enabled",
            http_protocol_ipv6=f.str("httpProtocolIPv6", "disabled") or "disabled",
            http_put_response_hop_limit=f.int("httpPutResponseHopLimit", 1) or 0,
            http_tokens=f.str("httpTokens", "required") or "required",
        )

    def to_dict(self) -> dict[str, Any]:
        return {"httpEndpoint": self.http_endpoint, "httpProtocolIPv6": self.http_protocol_ipv6,
                "httpPutResponseHopLimit": self.http_put_response_hop_limit, "httpTokens": self.http_tokens}


@dataclass(frozen=True, slots=True)
class ResolvedResource:
    """A subnet, security group or AMI the controller resolved into ``status``."""

    id: str
    name: str = ""
    zone: str = ""
    zone_id: str = ""
    requirements: tuple[selectors.NodeSelectorRequirement, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> ResolvedResource:
        return ResolvedResource(
            id=f.req_str("id"), name=f.str("name", "") or "", zone=f.str("zone", "") or "",
            zone_id=f.str("zoneID", "") or "", requirements=nodeclaim.parse_requirements(f),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.name:
            out["name"] = self.name
        if self.zone:
            out["zone"] = self.zone
        if self.zone_id:
            out["zoneID"] = self.zone_id
        if self.requirements:
            out["requirements"] = [r.to_dict() for r in self.requirements]
        return out


@dataclass(frozen=True, slots=True)
class EC2NodeClassStatus:
    subnets: tuple[ResolvedResource, ...] = ()
    security_groups: tuple[ResolvedResource, ...] = ()
    amis: tuple[ResolvedResource, ...] = ()
    instance_profile: str = ""
    conditions: tuple[nodeclaim.Condition, ...] = ()

    @staticmethod
    def parse(f: fields.Fields) -> EC2NodeClassStatus:
        return EC2NodeClassStatus(
            subnets=tuple(ResolvedResource.parse(s) for s in f.items("subnets")),
            security_groups=tuple(ResolvedResource.parse(s) for s in f.items("securityGroups")),
            amis=tuple(ResolvedResource.parse(s) for s in f.items("amis")),
            instance_profile=f.str("instanceProfile", "") or "",
            conditions=nodeclaim.parse_conditions(f),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.amis:
            out["amis"] = [a.to_dict() for a in self.amis]
        if self.conditions:
            out["conditions"] = [c.to_dict() for c in self.conditions]
        if self.instance_profile:
            out["instanceProfile"] = self.instance_profile
        if self.security_groups:
            out["securityGroups"] = [s.to_dict() for s in self.security_groups]
        if self.subnets:
            out["subnets"] = [s.to_dict() for s in self.subnets]
        return out


INTERFACE_TYPES = ("interface", "efa-only")


def _network_interface(f: fields.Fields) -> dict[str, Any]:
    kind = f.str("interfaceType", "interface") or "interface"
    if kind not in INTERFACE_TYPES:
        raise f.fail("interfaceType", " or ".join(INTERFACE_TYPES), kind)
    return {"networkCardIndex": f.int("networkCardIndex", 0) or 0, "deviceIndex": f.int("deviceIndex", 0) or 0,
            "interfaceType": kind}


def _ints(f: fields.Fields, keys: tuple[str, ...]) -> dict[str, int]:
    return {k: v for k in keys if (v := f.int(k)) is not None}


@dataclass(frozen=True, slots=True)
class EC2NodeClass:
    """A ``karpenter.k8s.aws/v1`` EC2NodeClass."""

    metadata: meta.ObjectMeta
    ami_family: str | None = None
    ami_selector_terms: tuple[SelectorTerm, ...] = ()
    subnet_selector_terms: tuple[SelectorTerm, ...] = ()
    security_group_selector_terms: tuple[SelectorTerm, ...] = ()
    capacity_reservation_selector_terms: tuple[capacityreservation.Term, ...] = ()
    role: str | None = None
    instance_profile: str | None = None
    block_device_mappings: tuple[BlockDeviceMapping, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    detailed_monitoring: bool | None = None
    associate_public_ip_address: bool | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    user_data: str | None = None
    context: str | None = None
    instance_store_policy: str | None = None
    ip_prefix_count: int | None = None
    network_interfaces: tuple[Mapping[str, Any], ...] = ()
    """``{"networkCardIndex": int, "deviceIndex": int, "interfaceType": "interface"|"efa-only"}``."""
    connection_tracking: Mapping[str, int] = field(default_factory=dict)
    cpu_options: Mapping[str, str] = field(default_factory=dict)
    placement_group_selector: Mapping[str, str] = field(default_factory=dict)
    """``name`` or ``id`` of a placement group."""
    kubelet: KubeletConfiguration | None = None
    status: EC2NodeClassStatus = field(default_factory=EC2NodeClassStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def resolved_ami_family(self) -> str | None:
        """``amiFamily``, or the family an ``alias`` term implies (``al2023@latest`` -> ``AL2023``)."""
        if self.ami_family:
            return self.ami_family
        for term in self.ami_selector_terms:
            if term.alias:
                return ALIAS_FAMILIES.get(term.alias.split("@", 1)[0].lower())
        return None

    @classmethod
    def from_manifest(cls, d: Mapping[str, Any]) -> EC2NodeClass:
        f = meta.reader(EC2_KIND, d)
        spec = f.sub("spec")
        return cls(
            metadata=meta.ObjectMeta.parse(f.sub("metadata"), namespaced=False),
            ami_family=spec.str("amiFamily"),
            ami_selector_terms=tuple(SelectorTerm.parse(t) for t in spec.items("amiSelectorTerms")),
            subnet_selector_terms=tuple(SelectorTerm.parse(t) for t in spec.items("subnetSelectorTerms")),
            security_group_selector_terms=tuple(
                SelectorTerm.parse(t) for t in spec.items("securityGroupSelectorTerms")
            ),
            capacity_reservation_selector_terms=tuple(
                capacityreservation.Term.parse(t) for t in spec.items("capacityReservationSelectorTerms")),
            role=spec.str("role"),
            instance_profile=spec.str("instanceProfile"),
            block_device_mappings=tuple(
                BlockDeviceMapping.parse(b) for b in spec.items("blockDeviceMappings")
            ),
            metadata_options=MetadataOptions.parse(spec.sub("metadataOptions")),
            detailed_monitoring=spec.bool("detailedMonitoring"),
            associate_public_ip_address=spec.bool("associatePublicIPAddress"),
            tags=spec.str_map("tags"),
            user_data=spec.str("userData"),
            context=spec.str("context"),
            instance_store_policy=spec.str("instanceStorePolicy"),
            ip_prefix_count=spec.int("ipPrefixCount"),
            network_interfaces=tuple(_network_interface(n) for n in spec.items("networkInterfaces")),
            connection_tracking=_ints(spec.sub("connectionTracking"),
                                      ("tcpEstablishedTimeout", "udpStreamTimeout", "udpTimeout")),
            cpu_options={k: v for k in ("nestedVirtualization",)
                         if (v := spec.sub("cpuOptions").str(k)) is not None},
            placement_group_selector={k: v for k in ("name", "id")
                                      if (v := spec.sub("placementGroupSelector").str(k)) is not None},
            kubelet=KubeletConfiguration.parse(spec.sub("kubelet")) if spec.has("kubelet") else None,
            status=EC2NodeClassStatus.parse(f.sub("status")),
        )

    def spec_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if self.ami_family is not None:
            spec["amiFamily"] = self.ami_family
        spec["amiSelectorTerms"] = [t.to_dict() for t in self.ami_selector_terms]
        if self.associate_public_ip_address is not None:
            spec["associatePublicIPAddress"] = self.associate_public_ip_address
        if self.block_device_mappings:
            spec["blockDeviceMappings"] = [b.to_dict() for b in self.block_device_mappings]
        if self.capacity_reservation_selector_terms:
            spec["capacityReservationSelectorTerms"] = [t.to_dict() for t in self.capacity_reservation_selector_terms]
        if self.context is not None:
            spec["context"] = self.context
        if self.connection_tracking:
            spec["connectionTracking"] = dict(self.connection_tracking)
        if self.cpu_options:
            spec["cpuOptions"] = dict(self.cpu_options)
        if self.ip_prefix_count is not None:
            spec["ipPrefixCount"] = self.ip_prefix_count
        if self.network_interfaces:
            spec["networkInterfaces"] = [dict(n) for n in self.network_interfaces]
        if self.placement_group_selector:
            spec["placementGroupSelector"] = dict(self.placement_group_selector)
        if self.detailed_monitoring is not None:
            spec["detailedMonitoring"] = self.detailed_monitoring
        if self.instance_profile is not None:
            spec["instanceProfile"] = self.instance_profile
        if self.instance_store_policy is not None:
            spec["instanceStorePolicy"] = self.instance_store_policy
        if self.kubelet is not None:
            spec["kubelet"] = self.kubelet.to_dict()
        spec["metadataOptions"] = self.metadata_options.to_dict()
        if self.role is not None:
            spec["role"] = self.role
        spec["securityGroupSelectorTerms"] = [t.to_dict() for t in self.security_group_selector_terms]
        spec["subnetSelectorTerms"] = [t.to_dict() for t in self.subnet_selector_terms]
        if self.tags:
            spec["tags"] = dict(self.tags)
        if self.user_data is not None:
            spec["userData"] = self.user_data
        return spec

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": EC2_API_VERSION, "kind": EC2_KIND,
                               "metadata": self.metadata.to_dict(), "spec": self.spec_dict()}
        status = self.status.to_dict()
        if status:
            out["status"] = status
        return out

    def hash(self) -> str:
        """Hash of the static drift fields. Selector terms, ``role`` and ``instanceProfile`` are
        excluded: subnets, security groups and AMIs drift dynamically (by what they resolve to)."""
        spec = self.spec_dict()
        for key in ("amiSelectorTerms", "subnetSelectorTerms", "securityGroupSelectorTerms",
                    "capacityReservationSelectorTerms", "role", "instanceProfile"):
            spec.pop(key, None)
        return stable_hash(spec)


def root_volume_size(nc: EC2NodeClass) -> int | None:
    """Milli-units of bytes of the root volume (``rootVolume: true``, else the last mapping), if set."""
    mappings = nc.block_device_mappings
    if not mappings:
        return None
    root = next((m for m in mappings if m.root_volume), mappings[-1])
    return root.ebs.volume_size if root.ebs is not None else None
