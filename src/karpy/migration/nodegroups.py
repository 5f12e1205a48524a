"""``karpy migrate``: from Cluster Autoscaler node groups to NodePools and an EC2NodeClass, with the steps.

Input is what the AWS CLI prints (JSON), one or several files:

* ``aws eks describe-nodegroup`` (``{"nodegroup": {...}}``): ``nodegroupName``, ``instanceTypes``,
  ``capacityType`` (``ON_DEMAND`` / ``SPOT``), ``scalingConfig`` (``minSize``, ``maxSize``,
  ``desiredSize``), ``labels``, ``taints`` (``NO_SCHEDULE`` ...), ``subnets``, ``amiType``,
  ``nodeRole``, ``diskSize``, ``clusterName``;
* ``aws autoscaling describe-auto-scaling-groups`` (``{"AutoScalingGroups": [...]}``): the group's
  instance types (``MixedInstancesPolicy`` overrides, else its launch template name is reported as
  unknown), ``MinSize``/``MaxSize``, subnets from ``VPCZoneIdentifier``, and Cluster Autoscaler's
  node-template tags (``k8s.io/cluster-autoscaler/node-template/label/<key>`` and ``/taint/<key>``).

:func:`plan` gives, per node group, a v1 NodePool that covers it (its instance types, capacity type,
labels, taints; ``limits.cpu`` from max size times its largest type's vCPUs) and one EC2NodeClass for
the cluster (the node role, the AMI family as an alias, the node groups' subnets by id, security
groups by Karpenter's discovery tag, the root volume size), plus the migration steps of the EKS field
report filled in for this cluster. Input problems raise :class:`karpy.api.errors.ValidationError`
naming the file and field (``AutoScalingGroups[0].MixedInstancesPolicy.InstancesDistribution: expected
an object``), as the manifest loader does: a value of the wrong type anywhere, numbers out of range
(sizes up to :data:`MAX_GROUP_SIZE`, ``diskSize`` up to :data:`MAX_DISK_GIB`); and the NodePools and
EC2NodeClass it writes go through the manifest loader before they are returned (a node-template label
no NodePool may carry is an error naming the node group).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from karpy.api import errors, labels, manifest
from karpy.cloudprovider import catalog

_AMI_ALIASES = {"AL2_": "al2@latest", "AL2023": "al2023@latest", "BOTTLEROCKET": "bottlerocket@latest",
                "WINDOWS_CORE_2019": "windows2019@latest", "WINDOWS_CORE_2022": "windows2022@latest"}
_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
_CA_LABEL = "k8s.io/cluster-autoscaler/node-template/label/"
_CA_TAINT = "k8s.io/cluster-autoscaler/node-template/taint/"
MAX_GROUP_SIZE = 100_000
"""The largest node-group size read (an Auto Scaling group's hard limit is far below); more is an error,
not a ``limits.cpu`` thousands of digits long."""
MAX_DISK_GIB = 65_536
"""The largest ``diskSize`` read (EBS volumes hold at most 64 TiB)."""


@dataclass(slots=True)
class Group:
    name: str
    instance_types: list[str]
    capacity_type: str
    min_size: int
    max_size: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    subnets: list[str] = field(default_factory=list)
    ami_type: str = ""
    node_role: str = ""
    disk_size: int | None = None
    cluster: str = ""


@dataclass(slots=True)
class Plan:
    manifests: list[dict[str, Any]]
    steps: str
    warnings: list[str]


def read_groups(inputs: Sequence[tuple[str, str]]) -> list[Group]:
    problems: list[errors.FieldError] = []
    groups: list[Group] = []
    for source, text in inputs:
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            problems.append(errors.FieldError(source, "(file)", "the JSON the AWS CLI prints", str(exc)[:80]))
            continue
        if isinstance(doc, Mapping) and isinstance(doc.get("nodegroup"), Mapping):
            _collect(problems, groups, source, "nodegroup", lambda d=doc["nodegroup"]: _eks(d))
        elif isinstance(doc, Mapping) and isinstance(doc.get("AutoScalingGroups"), list):
            for i, asg in enumerate(doc["AutoScalingGroups"]):
                _collect(problems, groups, source, f"AutoScalingGroups[{i}]", lambda a=asg: _asg(a))
        else:
            problems.append(errors.FieldError(source, "(root)", "aws eks describe-nodegroup or aws autoscaling "
                                              "describe-auto-scaling-groups output", _keys(doc)))
    if problems:
        raise errors.ValidationError(problems)
    return groups


def _collect(problems: list[errors.FieldError], groups: list[Group], source: str, where: str, fn: Any) -> None:
    try:
        groups.append(fn())
    except _Bad as exc:
        problems.append(errors.FieldError(source, f"{where}.{exc.path}", exc.expected, exc.found))


class _Bad(Exception):
    def __init__(self, path: str, expected: str, found: Any) -> None:
        super().__init__(path)
        self.path, self.expected, self.found = path, expected, found


def _keys(doc: Any) -> Any:
    return sorted(str(k) for k in doc)[:5] if isinstance(doc, Mapping) else type(doc).__name__


def _str(d: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = d.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise _Bad(key, "a string", value)
    return value


def _int(d: Mapping[str, Any], key: str, *, high: int = MAX_GROUP_SIZE) -> int:
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise _Bad(key, f"an integer from 0 to {high}", value)
    return value


def _map(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The object at ``key`` (empty when absent); anything else is an error naming the field."""
    value = d.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Bad(key, "an object", value)
    return value


def _list(d: Mapping[str, Any], key: str) -> list[Any]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(key, "a list", value)
    return value


def _strings(d: Mapping[str, Any], key: str) -> list[str]:
    values = _list(d, key)
    for i, v in enumerate(values):
        if not isinstance(v, str) or not v:
            raise _Bad(f"{key}[{i}]", "a non-empty string", v)
    return values


def _string_map(d: Mapping[str, Any], key: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in _map(d, key).items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise _Bad(f"{key}.{k}", "a string value under a non-empty string key", v)
        out[k] = v
    return out


def _under(prefix: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args)`` with the path of an error put under ``prefix``."""
    try:
        return fn(*args, **kwargs)
    except _Bad as exc:
        raise _Bad(f"{prefix}.{exc.path}", exc.expected, exc.found) from None


def _eks(d: Mapping[str, Any]) -> Group:
    types = _strings(d, "instanceTypes") or ["t3.medium"]  # EKS's default for managed node groups
    if "scalingConfig" not in d or not isinstance(d["scalingConfig"], Mapping):
        raise _Bad("scalingConfig", "{minSize, maxSize, desiredSize}", d.get("scalingConfig"))
    scaling = d["scalingConfig"]
    taints = []
    for i, t in enumerate(_list(d, "taints")):
        effect = t.get("effect") if isinstance(t, Mapping) else None
        if not isinstance(t, Mapping) or not isinstance(effect, str) or effect not in _TAINT_EFFECTS \
                or not isinstance(t.get("key"), str) or not t["key"] or not isinstance(t.get("value"), str | None):
            raise _Bad(f"taints[{i}]", "{key, value, effect: NO_SCHEDULE|NO_EXECUTE|PREFER_NO_SCHEDULE}", t)
        taint = {"key": t["key"], "effect": _TAINT_EFFECTS[effect]}
        if t.get("value"):
            taint["value"] = t["value"]
        taints.append(taint)
    capacity = _str(d, "capacityType", required=False) or "ON_DEMAND"
    if capacity not in ("ON_DEMAND", "SPOT"):
        raise _Bad("capacityType", "ON_DEMAND or SPOT", capacity)
    disk = None if d.get("diskSize") is None else _int(d, "diskSize", high=MAX_DISK_GIB)
    return Group(name=_str(d, "nodegroupName"), instance_types=list(types),
                 capacity_type=labels.CAPACITY_TYPE_SPOT if capacity == "SPOT" else labels.CAPACITY_TYPE_ON_DEMAND,
                 min_size=_under("scalingConfig", _int, scaling, "minSize"),
                 max_size=_under("scalingConfig", _int, scaling, "maxSize"),
                 labels=_string_map(d, "labels"), taints=taints, subnets=_strings(d, "subnets"),
                 ami_type=_str(d, "amiType", required=False), node_role=_str(d, "nodeRole", required=False),
                 disk_size=disk or None, cluster=_str(d, "clusterName", required=False))


def _asg(a: Mapping[str, Any]) -> Group:
    if not isinstance(a, Mapping):
        raise _Bad("(item)", "an Auto Scaling group", a)
    policy = _map(a, "MixedInstancesPolicy")
    template = _under("MixedInstancesPolicy", _map, policy, "LaunchTemplate")
    overrides = _under("MixedInstancesPolicy.LaunchTemplate", _list, template, "Overrides")
    types = []
    for i, o in enumerate(overrides):
        at = f"MixedInstancesPolicy.LaunchTemplate.Overrides[{i}]"
        if not isinstance(o, Mapping):
            raise _Bad(at, "an object", o)
        if o.get("InstanceType") is not None:
            types.append(_under(at, _str, o, "InstanceType"))
    tags: dict[str, str] = {}
    for i, t in enumerate(_list(a, "Tags")):
        if not isinstance(t, Mapping):
            raise _Bad(f"Tags[{i}]", "an object {Key, Value}", t)
        tags[_under(f"Tags[{i}]", _str, t, "Key")] = _under(f"Tags[{i}]", _str, t, "Value", required=False)
    node_labels = {k[len(_CA_LABEL):]: v for k, v in tags.items() if k.startswith(_CA_LABEL)}
    taints = []
    for k, v in tags.items():
        if k.startswith(_CA_TAINT):
            value, _, effect = v.partition(":")
            if effect not in ("", *_TAINT_EFFECTS.values()):
                raise _Bad(f"Tags[{k}]", "a taint as value:NoSchedule|NoExecute|PreferNoSchedule", v)
            taints.append({"key": k[len(_CA_TAINT):], "value": value, "effect": effect or "NoSchedule"})
    cluster = next((k.split("/", 2)[2] for k in tags if k.startswith("kubernetes.io/cluster/")), "")
    subnets = [s.strip() for s in _str(a, "VPCZoneIdentifier", required=False).split(",") if s.strip()]
    distribution = _under("MixedInstancesPolicy", _map, policy, "InstancesDistribution")
    spot = None
    if distribution.get("OnDemandPercentageAboveBaseCapacity") is not None:
        spot = _under("MixedInstancesPolicy.InstancesDistribution", _int, distribution,
                      "OnDemandPercentageAboveBaseCapacity", high=100)
    return Group(name=_str(a, "AutoScalingGroupName"), instance_types=types,
                 capacity_type=labels.CAPACITY_TYPE_SPOT if spot == 0 else labels.CAPACITY_TYPE_ON_DEMAND,
                 min_size=_int(a, "MinSize"), max_size=_int(a, "MaxSize"), labels=node_labels, taints=taints,
                 subnets=subnets, cluster=cluster)


def plan(groups: Sequence[Group], *, cluster_name: str = "", region: str | None = None) -> Plan:
    """NodePools and an EC2NodeClass covering ``groups``, and the migration steps."""
    warnings: list[str] = []
    cluster = cluster_name or next((g.cluster for g in groups if g.cluster), "") or "my-cluster"
    vcpus = {it.name: it.capacity.get("cpu", 0) // 1000 for it in catalog.load("aws", region=region)}
    roles = sorted({g.node_role.rsplit("/", 1)[-1] for g in groups if g.node_role})
    ami = next((alias for g in groups for prefix, alias in _AMI_ALIASES.items() if g.ami_type.startswith(prefix)),
               "al2023@latest")
    node_class: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": roles[0] if roles else f"KarpenterNodeRole-{cluster}", "amiSelectorTerms": [{"alias": ami}],
                 "subnetSelectorTerms": [{"id": s} for s in sorted({s for g in groups for s in g.subnets})]
                 or [{"tags": {"karpenter.sh/discovery": cluster}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster}}]}}
    if len(roles) > 1:
        warnings.append(f"node groups use {len(roles)} node roles ({', '.join(roles)}); the EC2NodeClass uses "
                        f"{roles[0]}: give each its own EC2NodeClass if they must differ")
    disks = sorted({g.disk_size for g in groups if g.disk_size})
    if disks:
        node_class["spec"]["blockDeviceMappings"] = [{"deviceName": "/dev/xvda", "ebs": {
            "volumeSize": f"{disks[-1]}Gi", "volumeType": "gp3", "encrypted": True}}]
    manifests: list[dict[str, Any]] = [node_class]
    for g in groups:
        if not g.instance_types:
            warnings.append(f"node group {g.name}: no instance types in the input (a launch template without "
                            "overrides); its NodePool allows Karpenter's recommended c/m/r families instead")
        unknown = [t for t in g.instance_types if t not in vcpus]
        if unknown:
            warnings.append(f"node group {g.name}: instance types not in the catalog: {', '.join(unknown)}")
        reqs: list[dict[str, Any]] = [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": [g.capacity_type]}]
        if g.instance_types:
            reqs.append({"key": labels.INSTANCE_TYPE, "operator": "In", "values": sorted(g.instance_types)})
        else:
            reqs.append({"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]})
        biggest = max((vcpus.get(t, 0) for t in g.instance_types), default=0)
        template: dict[str, Any] = {}
        if g.labels:
            template["metadata"] = {"labels": dict(sorted(g.labels.items()))}
        template["spec"] = {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                            "requirements": reqs}
        if g.taints:
            template["spec"]["taints"] = g.taints
        pool: dict[str, Any] = {
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": _dns(g.name)},
            "spec": {"template": template, "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                                          "consolidateAfter": "1m"}}}
        if biggest and g.max_size:
            pool["spec"]["limits"] = {"cpu": str(biggest * g.max_size)}
        manifests.append(pool)
    _validate(manifests, groups)
    return Plan(manifests=manifests, steps=_steps(cluster, groups), warnings=warnings)


def _validate(manifests: Sequence[dict[str, Any]], groups: Sequence[Group]) -> None:
    """Read what :func:`plan` wrote with the manifest loader; its errors name the node group they come from."""
    try:
        manifest.load_documents(yaml.safe_dump_all(list(manifests), sort_keys=False), source="migrate")
    except errors.ValidationError as exc:
        problems = []
        for e in exc.errors:
            number = e.obj.removeprefix("migrate ").removeprefix("document ").split(" ", 1)[0]
            index = int(number) - 2 if number.isdigit() else -1
            where = f"node group {groups[index].name}" if 0 <= index < len(groups) else "the EC2NodeClass"
            problems.append(errors.FieldError(f"{where} ({e.obj.split('(', 1)[-1].rstrip(')')})", e.path,
                                              e.expected, e.found))
        raise errors.ValidationError(problems) from None


def _dns(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "-" else "-" for c in name.lower()).strip("-")
    return out[:63] or "nodepool"


def _steps(cluster: str, groups: Sequence[Group]) -> str:
    names = ", ".join(g.name for g in groups) or "(none)"
    lines = [
        f"# Migrating {cluster} from Cluster Autoscaler to karpy",
        "",
        "1. Give every application a PodDisruptionBudget first (e.g. maxUnavailable: 50%): moving pods off the",
        "   node groups evicts them, and a budget keeps enough replicas running.",
        "   kubectl get poddisruptionbudgets -A",
        "2. Prepare AWS: the node role KarpenterNodeRole-" + cluster + " (or reuse the node groups' role), the",
        "   controller role bound to karpy's service account (IRSA), docs/aws-iam.md; tag the subnets and",
        f"   security groups with karpenter.sh/discovery={cluster}; map the node role in aws-auth.",
        "3. Install karpy (charts/karpy or the kustomize base) with settings.clusterName=" + cluster + ", and apply",
        "   the NodePools and EC2NodeClass printed by this command. Check `karpy whatif` on a dump first.",
        "4. Stop Cluster Autoscaler:",
        "   kubectl scale deploy/cluster-autoscaler -n kube-system --replicas=0",
        f"5. Shrink the node groups ({names}), keeping a small floor for karpy's own pods, e.g.:",
    ]
    lines += [f"   aws eks update-nodegroup-config --cluster-name {cluster} --nodegroup-name {g.name} "
              f"--scaling-config minSize=1,maxSize={max(1, g.max_size)},desiredSize=1" for g in groups]
    lines += [
        "6. Watch karpy take over the evicted pods:",
        "   kubectl logs -f -n karpy -l app.kubernetes.io/name=karpy \\",
        "     | grep -E 'found provisionable|launched nodeclaim'",
        "   kubectl get nodeclaims -w",
        "",
    ]
    return "\n".join(lines)
