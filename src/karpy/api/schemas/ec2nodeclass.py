"""``karpenter.k8s.aws/v1`` EC2NodeClass: the schema, printer columns and subresources of its CRD.

Every field of Karpenter's AWS provider's EC2NodeClass (v1.9 and the newest additions:
``capacityReservationSelectorTerms``, ``ipPrefixCount``, ``networkInterfaces``,
``placementGroupSelector``, ``connectionTracking``, ``cpuOptions``), with its enums, patterns,
defaults (``metadataOptions``) and CEL rules (exactly one of role / instanceProfile, selector-term
exclusivity, alias format and family, restricted tags). ``kubelet`` is v1.9's typed form (karpy
reads those fields) and keeps any other upstream KubeletConfiguration field as written, as the
newest Karpenter does.
"""

from __future__ import annotations

from karpy.api import nodeclass as model
from karpy.api.schemas import common, dsl

GROUP = "karpenter.k8s.aws"
KIND = model.EC2_KIND
PLURAL = "ec2nodeclasses"
SINGULAR = "ec2nodeclass"
SHORT_NAMES = ("ec2nc", "ec2ncs")
CATEGORIES = ("karpenter",)

AMI_FAMILIES = model.AMI_FAMILIES
ALIAS_FAMILIES = tuple(model.ALIAS_FAMILIES)
WINDOWS_ALIASES = tuple(a for a in ALIAS_FAMILIES if a.startswith("windows"))
VOLUME_SIZE = (r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|"
               r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|"
               r"([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$")
EVICTION_VALUE = (r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
                  r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$")
RESTRICTED_TAGS = (("eks:eks-cluster-name", "k != 'eks:eks-cluster-name'"),
                   ("kubernetes.io/cluster/", "!k.startsWith('kubernetes.io/cluster')"),
                   ("karpenter.sh/nodepool", "k != 'karpenter.sh/nodepool'"),
                   ("karpenter.sh/nodeclaim", "k != 'karpenter.sh/nodeclaim'"),
                   ("karpenter.k8s.aws/ec2nodeclass", "k != 'karpenter.k8s.aws/ec2nodeclass'"))


def _cel_strs(values: tuple[str, ...]) -> str:
    return "[" + ",".join(f"'{v}'" for v in values) + "]"


def _has_one_of(names: tuple[str, ...]) -> str:
    return " || ".join(f"has(x.{n})" for n in names)


def _exclusive(field: str, others: tuple[str, ...], what: str, *, every: bool = False) -> dict[str, str]:
    quantifier = "!self.all" if every else "!self.exists"
    expr = f"{quantifier}(x, has(x.{field}) && ({' || '.join(f'has(x.{o})' for o in others)}))"
    return dsl.rule(expr, f"'{field}' is mutually exclusive, cannot be set with a combination of other fields in "
                          f"{what}")


def _ami_terms() -> dsl.Schema:
    alias_rules = [
        dsl.rule("self.matches('^[a-zA-Z0-9]+@.+$')",
                 "'alias' is improperly formatted, must match the format 'family@version'"),
        dsl.rule(f"self.split('@')[0] in {_cel_strs(ALIAS_FAMILIES)}",
                 "family is not supported, must be one of the following: "
                 + ", ".join(f"'{f}'" for f in ALIAS_FAMILIES)),
        dsl.rule(f"self.split('@')[0] in {_cel_strs(WINDOWS_ALIASES)} ? self.split('@')[1] == 'latest' : true",
                 "windows families may only specify version 'latest'"),
    ]
    term = dsl.obj({
        "alias": dsl.string(max_len=30, rules=alias_rules, doc="family@version of an EKS-optimized AMI"),
        "id": dsl.string(pattern="ami-[0-9a-z]+"),
        "name": dsl.string(),
        "owner": dsl.string(),
        "ssmParameter": dsl.string(doc="an SSM parameter whose value is an AMI id"),
        "tags": common.selector_tags(),
    })
    return dsl.array(term, min_items=1, max_items=30, rules=[
        dsl.rule(f"self.all(x, {_has_one_of(('tags', 'id', 'name', 'alias', 'ssmParameter'))})",
                 "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"),
        _exclusive("id", ("alias", "tags", "name", "owner"), "amiSelectorTerms"),
        _exclusive("alias", ("id", "tags", "name", "owner"), "amiSelectorTerms"),
        dsl.rule("!(self.exists(x, has(x.alias)) && self.size() != 1)",
                 "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"),
    ], doc="AMISelectorTerms is a list of or AMI selector terms. The terms are ORed.")


def _subnet_terms() -> dsl.Schema:
    term = dsl.obj({"id": dsl.string(pattern="subnet-[0-9a-z]+"), "tags": common.selector_tags()})
    return dsl.array(term, max_items=30, rules=[
        dsl.rule("self.size() != 0", "subnetSelectorTerms cannot be empty"),
        dsl.rule("self.all(x, has(x.tags) || has(x.id))", "expected at least one, got none, ['tags', 'id']"),
        _exclusive("id", ("tags",), "a subnet selector term", every=True),
    ], doc="SubnetSelectorTerms is a list of subnet selector terms. The terms are ORed.")


def _security_group_terms() -> dsl.Schema:
    term = dsl.obj({"id": dsl.string(pattern="sg-[0-9a-z]+"), "name": dsl.string(), "tags": common.selector_tags()})
    return dsl.array(term, max_items=30, rules=[
        dsl.rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty"),
        dsl.rule("self.all(x, has(x.tags) || has(x.id) || has(x.name))",
                 "expected at least one, got none, ['tags', 'id', 'name']"),
        _exclusive("id", ("tags", "name"), "a security group selector term", every=True),
        _exclusive("name", ("tags", "id"), "a security group selector term", every=True),
    ], doc="SecurityGroupSelectorTerms is a list of security group selector terms. The terms are ORed.")


def _capacity_reservation_terms() -> dsl.Schema:
    term = dsl.obj({
        "id": dsl.string(pattern="^cr-[0-9a-z]+$"),
        "instanceMatchCriteria": dsl.string(enum=("open", "targeted")),
        "ownerID": dsl.string(pattern="^[0-9]{12}$"),
        "tags": common.selector_tags(),
    })
    return dsl.array(term, max_items=30, rules=[
        dsl.rule("self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
                 "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"),
        dsl.rule("!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
                 "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation "
                 "selector term"),
    ], doc="CapacityReservationSelectorTerms is a list of capacity reservation selector terms.")


def _block_device_mappings() -> dsl.Schema:
    ebs = dsl.obj({
        "deleteOnTermination": dsl.boolean(),
        "encrypted": dsl.boolean(),
        "iops": dsl.int64(),
        "kmsKeyID": dsl.string(),
        "snapshotID": dsl.string(),
        "throughput": dsl.int64(),
        "volumeInitializationRate": dsl.int32(100, 300),
        "volumeSize": dsl.string(pattern=VOLUME_SIZE, doc="the size of the volume (e.g. 20Gi)"),
        "volumeType": dsl.string(enum=model.VOLUME_TYPES),
    }, rules=[
        dsl.rule("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"),
        dsl.rule("!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
                 "snapshotID must be set when volumeInitializationRate is set"),
    ])
    mapping = dsl.obj({"deviceName": dsl.string(), "ebs": ebs, "rootVolume": dsl.boolean()})
    return dsl.array(mapping, max_items=50, rules=[
        dsl.rule("self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
                 "must have only one blockDeviceMappings with rootVolume"),
    ], doc="BlockDeviceMappings to be applied to provisioned nodes.")


def _eviction_map(name: str, value: dsl.Schema) -> dsl.Schema:
    signals = _cel_strs(model.EVICTION_SIGNALS)
    return dsl.str_map(value, rules=[dsl.rule(f"self.all(x, x in {signals})",
                                              f"valid keys for {name} are {signals}")])


def _reserved(name: str) -> dsl.Schema:
    keys = model.RESERVED_RESOURCES
    return dsl.str_map(dsl.string(pattern=dsl.QUANTITY_PATTERN), rules=[
        dsl.rule("self.all(x, " + " || ".join(f"x=='{k}'" for k in keys) + ")",
                 f"valid keys for {name} are {_cel_strs(keys)}"),
        dsl.rule("self.all(x, !self[x].startsWith('-'))", f"{name} value cannot be a negative resource quantity"),
    ])


def kubelet() -> dsl.Schema:
    """Karpenter v1.9's typed kubelet settings; other KubeletConfiguration fields are kept as written."""
    return dsl.preserve_unknown({
        "clusterDNS": dsl.array(dsl.string()),
        "cpuCFSQuota": dsl.boolean(),
        "evictionHard": _eviction_map("evictionHard", dsl.string(pattern=EVICTION_VALUE)),
        "evictionMaxPodGracePeriod": dsl.int32(),
        "evictionSoft": _eviction_map("evictionSoft", dsl.string(pattern=EVICTION_VALUE)),
        "evictionSoftGracePeriod": _eviction_map("evictionSoftGracePeriod", dsl.string()),
        "imageGCHighThresholdPercent": dsl.int32(0, 100),
        "imageGCLowThresholdPercent": dsl.int32(0, 100),
        "kubeReserved": _reserved("kubeReserved"),
        "maxPods": dsl.int32(0),
        "podsPerCore": dsl.int32(0),
        "systemReserved": _reserved("systemReserved"),
    }, rules=[
        dsl.rule("has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? "
                 "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true",
                 "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"),
        dsl.rule("has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
                 "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"),
        dsl.rule("has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft))"
                 ":true", "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"),
    ], doc="Kubelet defines args to be used when configuring kubelet on provisioned nodes.")


def _network_interfaces() -> dsl.Schema:
    item = dsl.obj({"deviceIndex": dsl.int32(0), "interfaceType": dsl.string(enum=("interface", "efa-only")),
                    "networkCardIndex": dsl.int32(0)}, required=["deviceIndex", "interfaceType", "networkCardIndex"])
    return dsl.array(item, max_items=150, rules=[
        dsl.rule("self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && "
                 "x.interfaceType == 'interface')",
                 "networkInterfaces must include a primary interface with interfaceType='interface'"),
        dsl.rule("self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == "
                 "y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex"
                 " == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                 "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have "
                 "at most one efa device per network card"),
    ])


def _alias_family_rule(alias: str, family: str) -> dict[str, str]:
    article = "an" if family[0] in "AEIOU" else "a"
    return dsl.rule(
        f"!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == "
        f"'{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)",
        f"if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias")


def spec() -> dsl.Schema:
    families = model.ALIAS_FAMILIES
    tag_rules = [dsl.rule("self.all(k, k != '')", "empty tag keys aren't supported")]
    tag_rules += [dsl.rule(f"self.all(k, {cond})", f"tag contains a restricted tag matching {tag}")
                  for tag, cond in RESTRICTED_TAGS]
    hop = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1,
           "httpTokens": "required"}
    return dsl.obj({
        "amiFamily": dsl.string(enum=AMI_FAMILIES, doc="the AMI family (bootstrap format) of the nodes"),
        "amiSelectorTerms": _ami_terms(),
        "associatePublicIPAddress": dsl.boolean(),
        "blockDeviceMappings": _block_device_mappings(),
        "capacityReservationSelectorTerms": _capacity_reservation_terms(),
        "connectionTracking": dsl.obj({
            "tcpEstablishedTimeout": dsl.int32(60, 432000),
            "udpStreamTimeout": dsl.int32(60, 180),
            "udpTimeout": dsl.int32(30, 60),
        }, rules=[dsl.rule("has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                           "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set")]),
        "context": dsl.string(),
        "cpuOptions": dsl.obj({"nestedVirtualization": dsl.string(enum=("enabled", "disabled"))}),
        "detailedMonitoring": dsl.boolean(),
        "instanceProfile": dsl.string(rules=[dsl.rule("self != ''", "instanceProfile cannot be empty")]),
        "instanceStorePolicy": dsl.string(enum=("RAID0",)),
        "ipPrefixCount": dsl.int32(0),
        "kubelet": kubelet(),
        "metadataOptions": dsl.obj({
            "httpEndpoint": dsl.string(enum=("enabled", "disabled"), default="enabled"),
            "httpProtocolIPv6": dsl.string(enum=("enabled", "disabled"), default="disabled"),
            "httpPutResponseHopLimit": dsl.int64(1, 64, default=1),
            "httpTokens": dsl.string(enum=("required", "optional"), default="required"),
        }, default=hop, doc="MetadataOptions for the generated launch template of provisioned nodes."),
        "networkInterfaces": _network_interfaces(),
        "placementGroupSelector": dsl.obj({"id": dsl.string(pattern="^pg-[0-9a-z]+$"),
                                           "name": dsl.string(min_len=1)}, rules=[
            dsl.rule("has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"),
            dsl.rule("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
        ]),
        "role": dsl.string(rules=[dsl.rule("self != ''", "role cannot be empty")],
                           doc="the IAM role of the nodes' instance profile"),
        "securityGroupSelectorTerms": _security_group_terms(),
        "subnetSelectorTerms": _subnet_terms(),
        "tags": dsl.str_map(rules=tag_rules, doc="Tags to be applied on ec2 resources like instances and launch "
                                                 "templates."),
        "userData": dsl.string(),
    }, required=["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"], rules=[
        dsl.rule("(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
                 "must specify exactly one of ['role', 'instanceProfile']"),
        *(_alias_family_rule(alias, family) for alias, family in families.items()),
        dsl.rule("self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
                 "must specify amiFamily if amiSelectorTerms does not contain an alias"),
    ], doc="EC2NodeClassSpec is the top level specification for the AWS Karpenter Provider.")


def status() -> dsl.Schema:
    return dsl.obj({
        "amis": dsl.array(dsl.obj({"deprecated": dsl.boolean(), "id": dsl.string(), "name": dsl.string(),
                                   "requirements": common.resolved_requirements()}, required=["id", "requirements"])),
        "capacityReservations": dsl.array(dsl.obj({
            "availabilityZone": dsl.string(), "endTime": dsl.timestamp(),
            "id": dsl.string(pattern="^cr-[0-9a-z]+$"),
            "instanceMatchCriteria": dsl.string(enum=("open", "targeted")),
            "instanceType": dsl.string(), "interruptible": dsl.boolean(),
            "ownerID": dsl.string(pattern="^[0-9]{12}$"),
            "reservationType": dsl.string(enum=("default", "capacity-block"), default="default"),
            "state": dsl.string(enum=("active", "expiring"), default="active"),
        }, required=["availabilityZone", "id", "instanceMatchCriteria", "instanceType", "ownerID"])),
        "conditions": common.conditions(strict=True, as_map=False),
        "instanceProfile": dsl.string(),
        "securityGroups": dsl.array(dsl.obj({"id": dsl.string(), "name": dsl.string()}, required=["id"])),
        "subnets": dsl.array(dsl.obj({"id": dsl.string(), "zone": dsl.string(), "zoneID": dsl.string()},
                                     required=["id", "zone"])),
    }, doc="EC2NodeClassStatus contains the resolved state of the EC2NodeClass")


def schema() -> dsl.Schema:
    return dsl.obj({"apiVersion": dsl.string(), "kind": dsl.string(), "metadata": dsl.obj(),
                    "spec": spec(), "status": status()},
                   doc="EC2NodeClass is the Schema for the EC2NodeClass API")


PRINTER_COLUMNS = (
    {"jsonPath": '.status.conditions[?(@.type=="Ready")].status', "name": "Ready", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    {"jsonPath": ".spec.role", "name": "Role", "priority": 1, "type": "string"},
)
SUBRESOURCES: dict[str, dict[str, str]] = {"status": {}}
