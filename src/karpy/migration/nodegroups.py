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
naming the file and field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, labels
from karpy.cloudprovider import catalog

_AMI_ALIASES = {"AL2_": "al2@latest", "AL2023": "al2023@latest", "BOTTLEROCKET": "bottlerocket@latest",
                "WINDOWS_CORE_2019": "windows2019@latest", "WINDOWS_CORE_2022": "windows2022@latest"}
_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
_CA_LABEL = "k8s.io/cluster-autoscaler/node-template/label/"
_CA_TAINT = "k8s.io/cluster-autoscaler/node-template/taint/"


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
    return sorted(doc)[:5] if isinstance(doc, Mapping) else type(doc).__name__


def _str(d: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = d.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise _Bad(key, "a string", value)
    return value


def _int(d: Mapping[str, Any], key: str) -> int:
    value = d.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(key, "a non-negative integer", value)
    return value


def _eks(d: Mapping[str, Any]) -> Group:
    types = d.get("instanceTypes") or ["t3.medium"]  # EKS's default for managed node groups
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise _Bad("instanceTypes", "a list of instance types", types)
    scaling = d.get("scalingConfig")
    if not isinstance(scaling, Mapping):
        raise _Bad("scalingConfig", "{minSize, maxSize, desiredSize}", scaling)
    taints = []
    for i, t in enumerate(d.get("taints") or []):
        if not isinstance(t, Mapping) or t.get("effect") not in _TAINT_EFFECTS or not isinstance(t.get("key"), str):
            raise _Bad(f"taints[{i}]", "{key, value, effect: NO_SCHEDULE|NO_EXECUTE|PREFER_NO_SCHEDULE}", t)
        taint = {"key": t["key"], "effect": _TAINT_EFFECTS[t["effect"]]}
        if t.get("value"):
            taint["value"] = str(t["value"])
        taints.append(taint)
    node_labels = d.get("labels") or {}
    if not isinstance(node_labels, Mapping):
        raise _Bad("labels", "a mapping", node_labels)
    capacity = _str(d, "capacityType", required=False) or "ON_DEMAND"
    if capacity not in ("ON_DEMAND", "SPOT"):
        raise _Bad("capacityType", "ON_DEMAND or SPOT", capacity)
    disk = d.get("diskSize")
    return Group(name=_str(d, "nodegroupName"), instance_types=list(types),
                 capacity_type=labels.CAPACITY_TYPE_SPOT if capacity == "SPOT" else labels.CAPACITY_TYPE_ON_DEMAND,
                 min_size=_scaling(scaling, "minSize"), max_size=_scaling(scaling, "maxSize"),
                 labels={str(k): str(v) for k, v in node_labels.items()}, taints=taints,
                 subnets=[str(s) for s in d.get("subnets") or []], ami_type=_str(d, "amiType", required=False),
                 node_role=_str(d, "nodeRole", required=False),
                 disk_size=disk if isinstance(disk, int) and not isinstance(disk, bool) else None,
                 cluster=_str(d, "clusterName", required=False))


def _scaling(scaling: Mapping[str, Any], key: str) -> int:
    try:
        return _int(scaling, key)
    except _Bad as exc:
        raise _Bad(f"scalingConfig.{exc.path}", exc.expected, exc.found) from None


def _asg(a: Mapping[str, Any]) -> Group:
    if not isinstance(a, Mapping):
        raise _Bad("(item)", "an Auto Scaling group", a)
    overrides = (((a.get("MixedInstancesPolicy") or {}).get("LaunchTemplate") or {}).get("Overrides") or [])
    types = [str(o["InstanceType"]) for o in overrides if isinstance(o, Mapping) and o.get("InstanceType")]
    tags = {str(t.get("Key")): str(t.get("Value", "")) for t in a.get("Tags") or [] if isinstance(t, Mapping)}
    node_labels = {k[len(_CA_LABEL):]: v for k, v in tags.items() if k.startswith(_CA_LABEL)}
    taints = []
    for k, v in tags.items():
        if k.startswith(_CA_TAINT):
            value, _, effect = v.partition(":")
            taints.append({"key": k[len(_CA_TAINT):], "value": value, "effect": effect or "NoSchedule"})
    cluster = next((k.split("/", 2)[2] for k, v in tags.items() if k.startswith("kubernetes.io/cluster/")), "")
    subnets = [s.strip() for s in str(a.get("VPCZoneIdentifier") or "").split(",") if s.strip()]
    distribution = (a.get("MixedInstancesPolicy") or {}).get("InstancesDistribution") or {}
    spot = distribution.get("OnDemandPercentageAboveBaseCapacity")
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
    return Plan(manifests=manifests, steps=_steps(cluster, groups), warnings=warnings)


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
