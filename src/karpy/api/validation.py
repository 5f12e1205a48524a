"""Karpenter's admission rules for NodePools, NodeClaims and NodeClasses.

Karpenter enforces these with CRD schema patterns, CEL rules and (before v1) webhooks; karpy checks
the same rules on the typed models, after any conversion from older API versions, so that a
manifest Karpenter would reject is rejected here too, with a message saying exactly what to change.

A caller may rely on: every ``validate_*`` function returns *all* problems of one object as a list of
:class:`karpy.api.errors.FieldError` (empty when valid) and never raises; each error names the
object (``"NodePool default"``), the field path (``spec.template.spec.requirements[2].operator``),
what was expected and what was found. :func:`raise_if_invalid` turns a non-empty list into a
:class:`karpy.api.errors.ValidationError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from croniter import croniter

from karpy.api import (
    duration,
    errors,
    labels,
    node,
    nodeclaim,
    nodeclass,
    nodepool,
    quantity,
    selectors,
)

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_CRON_MACRO = re.compile(r"^@(annually|yearly|monthly|weekly|daily|midnight|hourly)$")
_PERCENT = re.compile(r"^(\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%$")
_ALIAS = re.compile(r"^([a-zA-Z0-9]+)@(.+)$")
_VNET_SUBNET = re.compile(
    r"^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+"
    r"/subnets/[^/]+$",
    re.IGNORECASE,
)

MAX_REQUIREMENTS = 100
MAX_BUDGETS = 50
MAX_SELECTOR_TERMS = 30
MAX_BLOCK_DEVICE_MAPPINGS = 50
MAX_VOLUME_SIZE = 64 * 2**40 * quantity.MILLI  # 64Ti
INT_OPERATORS = ("Gt", "Lt", "Gte", "Lte")
RESTRICTED_TAG_KEYS = ("karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass",
                       "eks:eks-cluster-name")
RESTRICTED_TAG_PREFIXES = ("kubernetes.io/cluster/", "aws:")

RESTRICTED_KEY_EXPECTED = (
    "a label key outside the domains Karpenter reserves (karpenter.sh, karpenter.k8s.aws, "
    "karpenter.azure.com) other than a well-known label, and not kubernetes.io/hostname"
)


def raise_if_invalid(errs: Sequence[errors.FieldError]) -> None:
    """Raise :class:`errors.ValidationError` carrying every error, if there is any."""
    if errs:
        raise errors.ValidationError(errs)


class _Collector:
    """Accumulates errors for one object."""

    def __init__(self, obj: str) -> None:
        self.obj = obj
        self.errors: list[errors.FieldError] = []

    def add(self, path: str, expected: str, found: object) -> None:
        self.errors.append(errors.FieldError(self.obj, path, expected, found))


# --- label syntax --------------------------------------------------------------------------------


def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (``[prefix/]name``), or ``None``."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "a qualified name with a non-empty prefix before '/'"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "a qualified name whose prefix is a DNS subdomain (lower case, at most 253 characters)"
    if not name or len(name) > 63 or not _NAME_PART.match(name):
        return ("a qualified name: at most 63 letters, digits, '-', '_' or '.' after the optional "
                "prefix, starting and ending with a letter or digit")
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return ("a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with "
                "a letter or digit")
    return None


def _check_label_key(c: _Collector, path: str, key: str, *, allow_nodepool: bool) -> None:
    problem = qualified_name_problem(key)
    if problem:
        c.add(path, problem, key)
        return
    normalized = labels.NORMALIZED_LABELS.get(key, key)
    if normalized == labels.NODEPOOL and not allow_nodepool:
        c.add(path, f"a key other than {labels.NODEPOOL} (karpy sets it to the NodePool's name)", key)
    elif labels.is_restricted(normalized):
        c.add(path, RESTRICTED_KEY_EXPECTED, key)


# --- shared parts --------------------------------------------------------------------------------


def _check_requirements(
    c: _Collector,
    path: str,
    requirements: Sequence[selectors.NodeSelectorRequirement],
    *,
    allow_nodepool: bool,
) -> None:
    if len(requirements) > MAX_REQUIREMENTS:
        c.add(path, f"at most {MAX_REQUIREMENTS} requirements", len(requirements))
    for i, r in enumerate(requirements):
        at = f"{path}[{i}]"
        _check_label_key(c, f"{at}.key", r.key, allow_nodepool=allow_nodepool)
        if r.operator not in selectors.OPERATORS:
            c.add(f"{at}.operator", "one of " + ", ".join(selectors.OPERATORS), r.operator)
            continue
        for j, v in enumerate(r.values if r.operator not in INT_OPERATORS else ()):
            problem = label_value_problem(v)
            if problem:
                c.add(f"{at}.values[{j}]", problem, v)
        if r.operator == "In" and not r.values:
            c.add(f"{at}.values", f"at least one value for operator In (key {r.key})", list(r.values))
        elif r.operator in ("Exists", "DoesNotExist") and r.values:
            c.add(f"{at}.values", f"no values for operator {r.operator} (key {r.key})", list(r.values))
        elif r.operator in INT_OPERATORS and (len(r.values) != 1 or not r.values[0].isdigit()):
            c.add(f"{at}.values",
                  f"exactly one non-negative integer value for operator {r.operator} (key {r.key})",
                  list(r.values))
        if r.min_values is not None:
            if not 1 <= r.min_values <= 50:
                c.add(f"{at}.minValues", "an integer between 1 and 50", r.min_values)
            elif r.operator == "In" and len(r.values) < r.min_values:
                c.add(f"{at}.minValues",
                      f"at most the number of values given ({len(r.values)}) for operator In",
                      r.min_values)


def _check_taints(
    c: _Collector, path: str, groups: Iterable[tuple[str, Sequence[node.Taint]]]
) -> None:
    seen: set[tuple[str, str]] = set()
    for key, taints in groups:
        for i, t in enumerate(taints):
            at = f"{path}.{key}[{i}]"
            if not t.key:
                c.add(f"{at}.key", "a taint key", t.key)
            else:
                problem = qualified_name_problem(t.key)
                if problem:
                    c.add(f"{at}.key", problem, t.key)
            if t.value:
                problem = label_value_problem(t.value)
                if problem:
                    c.add(f"{at}.value", problem, t.value)
            if t.effect not in node.EFFECTS:
                c.add(f"{at}.effect", "one of " + ", ".join(node.EFFECTS), t.effect)
            pair = (t.key, t.effect)
            if pair in seen:
                c.add(at, "each taint key and effect at most once across taints and startupTaints",
                      f"{t.key}:{t.effect}")
            seen.add(pair)


def _check_node_class_ref(c: _Collector, path: str, ref: nodeclaim.NodeClassRef | None) -> None:
    if ref is None:
        c.add(path, "a reference {group, kind, name} to an EC2NodeClass or AKSNodeClass", None)
        return
    for key, value in (("group", ref.group), ("kind", ref.kind), ("name", ref.name)):
        if not value:
            c.add(f"{path}.{key}", f"a non-empty {key}", value)


def _check_resources(c: _Collector, path: str, resources: Mapping[str, int]) -> None:
    for name, amount in resources.items():
        if amount < 0:
            c.add(f"{path}.{name}", "a non-negative quantity",
                  quantity.format_quantity(name, amount))


def _check_template_labels(c: _Collector, path: str, values: Mapping[str, str]) -> None:
    if len(values) > 100:
        c.add(path, "at most 100 labels", len(values))
    for key, value in values.items():
        _check_label_key(c, f"{path}.{key}", key, allow_nodepool=False)
        problem = label_value_problem(value)
        if problem:
            c.add(f"{path}.{key}", problem, value)


# --- NodePool ------------------------------------------------------------------------------------


def _check_budget(c: _Collector, at: str, b: nodepool.Budget) -> None:
    if not _BUDGET_NODES.match(b.nodes):
        c.add(f"{at}.nodes", "a non-negative whole number of nodes such as 3, or a percentage 0%-100%",
              b.nodes)
    if (b.schedule is None) != (b.duration is None):
        missing = "duration" if b.duration is None else "schedule"
        c.add(f"{at}.{missing}", "schedule and duration set together (or neither)", None)
    if b.schedule is not None:
        text = b.schedule.strip()
        ok = bool(_CRON_MACRO.match(text))
        if not ok and len(text.split()) == 5:
            ok = croniter.is_valid(text)
        if not ok:
            c.add(f"{at}.schedule",
                  "a cron schedule of 5 fields such as '0 9 * * mon-fri' or @daily/@weekly/@hourly... (UTC)",
                  b.schedule)
    for j, reason in enumerate(b.reasons):
        if reason not in nodepool.DISRUPTION_REASONS:
            c.add(f"{at}.reasons[{j}]", "one of " + ", ".join(nodepool.DISRUPTION_REASONS), reason)


def validate_nodepool(np: nodepool.NodePool) -> list[errors.FieldError]:
    c = _Collector(f"{nodepool.KIND} {np.name}")
    tmpl = np.template
    _check_template_labels(c, "spec.template.metadata.labels", tmpl.labels)
    spec_path = "spec.template.spec"
    _check_requirements(c, f"{spec_path}.requirements", tmpl.spec.requirements, allow_nodepool=False)
    _check_taints(c, spec_path, (("taints", tmpl.spec.taints), ("startupTaints", tmpl.spec.startup_taints)))
    _check_node_class_ref(c, f"{spec_path}.nodeClassRef", tmpl.spec.node_class_ref)
    d = np.disruption
    if d.consolidation_policy not in nodepool.ADMITTED_POLICIES:
        hint = " (v1beta1's WhenUnderutilized is now WhenEmptyOrUnderutilized)" if (
            d.consolidation_policy == "WhenUnderutilized") else ""
        c.add("spec.disruption.consolidationPolicy",
              "one of " + ", ".join(nodepool.ADMITTED_POLICIES) + hint, d.consolidation_policy)
    if len(d.budgets) > MAX_BUDGETS:
        c.add("spec.disruption.budgets", f"at most {MAX_BUDGETS} budgets", len(d.budgets))
    for i, b in enumerate(d.budgets):
        _check_budget(c, f"spec.disruption.budgets[{i}]", b)
    if np.weight is not None and not 1 <= np.weight <= 100:
        c.add("spec.weight", "an integer between 1 and 100 (omit it for the lowest priority)", np.weight)
    _check_resources(c, "spec.limits", np.limits)
    _check_static(c, np)
    return c.errors


def _check_static(c: _Collector, np: nodepool.NodePool) -> None:
    """Karpenter v1.14's rules on a static NodePool (``spec.replicas``: its CRD's minimum and CEL rules)."""
    if np.replicas is None:
        return
    if np.replicas < 0:
        c.add("spec.replicas", "a non-negative integer", np.replicas)
    if np.weight is not None:
        c.add("spec.weight", "no weight: 'weight' is not supported on static NodePools", np.weight)
    others = sorted(k for k in np.limits if k != nodepool.NODES_LIMIT)
    if others:
        c.add("spec.limits", "only 'limits.nodes' is supported on static NodePools", ", ".join(others))


# --- NodeClaim -----------------------------------------------------------------------------------


def validate_nodeclaim(nc: nodeclaim.NodeClaim) -> list[errors.FieldError]:
    c = _Collector(f"{nodeclaim.KIND} {nc.name}")
    _check_requirements(c, "spec.requirements", nc.spec.requirements, allow_nodepool=True)
    _check_taints(c, "spec", (("taints", nc.spec.taints), ("startupTaints", nc.spec.startup_taints)))
    _check_node_class_ref(c, "spec.nodeClassRef", nc.spec.node_class_ref)
    _check_resources(c, "spec.resources.requests", nc.spec.resources_requests)
    return c.errors


# --- NodeClasses ---------------------------------------------------------------------------------


def validate_kubelet(k: nodeclass.KubeletConfiguration | None, obj: str, path: str) -> list[errors.FieldError]:
    """The v1 kubelet rules, for settings found elsewhere than a NodeClass (a converted v1beta1
    NodePool keeps its kubelet in an annotation)."""
    c = _Collector(obj)
    _check_kubelet(c, path, k)
    return c.errors


def _at(path: str, *keys: str) -> str:
    """``path.key...``, an empty key written ``[""]`` so that it is seen."""
    for key in keys:
        path = f'{path}[""]' if not key else f"{path}.{key}"
    return path


def _check_kubelet(c: _Collector, path: str, k: nodeclass.KubeletConfiguration | None) -> None:
    if k is None:
        return
    for key, number in (("maxPods", k.max_pods), ("podsPerCore", k.pods_per_core),
                        ("evictionMaxPodGracePeriod", k.eviction_max_pod_grace_period)):
        if number is not None and number < 0:
            c.add(f"{path}.{key}", "a non-negative integer", number)
    for key, reserved in (("systemReserved", k.system_reserved), ("kubeReserved", k.kube_reserved)):
        for name, amount in reserved.items():
            if name not in nodeclass.RESERVED_RESOURCES:
                c.add(_at(path, key, name), "one of " + ", ".join(nodeclass.RESERVED_RESOURCES), name)
            elif amount < 0:
                c.add(_at(path, key, name), "a non-negative quantity",
                      quantity.format_quantity(name, amount))
    for key, thresholds in (("evictionHard", k.eviction_hard), ("evictionSoft", k.eviction_soft)):
        for signal, value in thresholds.items():
            if signal not in nodeclass.EVICTION_SIGNALS:
                c.add(_at(path, key, signal), "one of " + ", ".join(nodeclass.EVICTION_SIGNALS), signal)
                continue
            if not _PERCENT.match(value):
                try:
                    quantity.parse_milli(value)
                except quantity.QuantityError:
                    c.add(_at(path, key, signal), "a percentage such as 10% or a quantity such as 500Mi",
                          value)
    for signal, value in k.eviction_soft_grace_period.items():
        at = _at(path, "evictionSoftGracePeriod", signal)
        if signal not in nodeclass.EVICTION_SIGNALS:
            c.add(at, "one of " + ", ".join(nodeclass.EVICTION_SIGNALS), signal)
            continue
        try:
            duration.parse_duration(value)
        except duration.DurationError:
            c.add(at, duration.EXPECTED, value)
    for signal in k.eviction_soft:
        if signal not in k.eviction_soft_grace_period:
            c.add(_at(path, "evictionSoftGracePeriod", signal),
                  f"a grace period for every evictionSoft signal ({signal})", None)
    for signal in k.eviction_soft_grace_period:
        if signal not in k.eviction_soft:
            c.add(_at(path, "evictionSoft", signal),
                  f"a threshold for every evictionSoftGracePeriod signal ({signal})", None)
    high, low = k.image_gc_high_threshold_percent, k.image_gc_low_threshold_percent
    for key, percent in (("imageGCHighThresholdPercent", high), ("imageGCLowThresholdPercent", low)):
        if percent is not None and not 0 <= percent <= 100:
            c.add(f"{path}.{key}", "a percentage between 0 and 100", percent)
    if high is not None and low is not None and high <= low:
        c.add(f"{path}.imageGCHighThresholdPercent",
              f"a value greater than imageGCLowThresholdPercent ({low})", high)
    if k.cpu_manager_policy is not None and k.cpu_manager_policy not in ("none", "static"):
        c.add(f"{path}.cpuManagerPolicy", "none or static", k.cpu_manager_policy)
    policies = ("restricted", "best-effort", "none", "single-numa-node")
    if k.topology_manager_policy is not None and k.topology_manager_policy not in policies:
        c.add(f"{path}.topologyManagerPolicy", "one of " + ", ".join(policies), k.topology_manager_policy)


def _check_tags(c: _Collector, path: str, tags: Mapping[str, str]) -> None:
    for key in tags:
        if not key:
            c.add(path, "non-empty tag keys", key)
        elif key in RESTRICTED_TAG_KEYS or key.startswith(RESTRICTED_TAG_PREFIXES):
            c.add(f"{path}.{key}",
                  "a tag key other than those Karpenter or AWS set themselves (kubernetes.io/cluster/*, "
                  "karpenter.sh/nodepool, karpenter.sh/nodeclaim, karpenter.k8s.aws/ec2nodeclass, "
                  "eks:eks-cluster-name, aws:*)", key)


def _check_terms(
    c: _Collector, path: str, terms: Sequence[nodeclass.SelectorTerm], allowed: tuple[str, ...], what: str
) -> None:
    if not terms:
        example = "- tags: {karpenter.sh/discovery: my-cluster}"
        if what == "AMI":
            example = "- alias: al2023@latest"
        c.add(path, f"at least one {what} selector term, e.g. {example}", None)
    if len(terms) > MAX_SELECTOR_TERMS:
        c.add(path, f"at most {MAX_SELECTOR_TERMS} terms", len(terms))
    for i, term in enumerate(terms):
        at = f"{path}[{i}]"
        present = term.set_fields()
        if not present:
            c.add(at, "at least one of " + ", ".join(allowed), {})
            continue
        for name in present:
            if name not in allowed:
                c.add(f"{at}.{name}", f"only {', '.join(allowed)} in a {what} selector term", name)
        if "id" in present and len(present) > 1:
            c.add(at, "'id' alone: it cannot be combined with other fields in the same term", list(present))
        for key, value in term.tags.items():
            if not key or not value:
                c.add(f"{at}.tags", "non-empty tag keys and values ('*' matches any value)", {key: value})


def validate_ec2nodeclass(
    nc: nodeclass.EC2NodeClass, *, identity_from_settings: bool = False
) -> list[errors.FieldError]:
    """Rules of ``karpenter.k8s.aws/v1`` EC2NodeClass.

    ``identity_from_settings`` is for classes converted from v1alpha5/v1alpha1, where the instance
    profile could come from the controller's global settings: a missing role/instanceProfile is then
    not an error (the converter warns instead).
    """
    c = _Collector(f"{nodeclass.EC2_KIND} {nc.name}")
    spec = "spec"
    ami_fields = ("tags", "id", "name", "owner", "alias", "ssmParameter")
    _check_terms(c, f"{spec}.amiSelectorTerms", nc.ami_selector_terms, ami_fields, "AMI")
    aliases = [i for i, t in enumerate(nc.ami_selector_terms) if t.alias is not None]
    for i in aliases:
        term = nc.ami_selector_terms[i]
        at = f"{spec}.amiSelectorTerms[{i}]"
        if len(term.set_fields()) > 1:
            c.add(at, "'alias' alone: it cannot be combined with other fields", list(term.set_fields()))
        if len(nc.ami_selector_terms) > 1:
            c.add(at, "'alias' as the only AMI selector term", len(nc.ami_selector_terms))
        m = _ALIAS.match(term.alias or "")
        if not m or m.group(1).lower() not in nodeclass.ALIAS_FAMILIES:
            c.add(f"{at}.alias",
                  "family@version with family one of " + ", ".join(nodeclass.ALIAS_FAMILIES)
                  + " (e.g. al2023@latest)", term.alias)
    if nc.ami_family is not None and nc.ami_family not in nodeclass.AMI_FAMILIES:
        c.add(f"{spec}.amiFamily", "one of " + ", ".join(nodeclass.AMI_FAMILIES), nc.ami_family)
    if nc.ami_family is None and not aliases and nc.ami_selector_terms:
        c.add(f"{spec}.amiFamily", "an amiFamily when amiSelectorTerms has no alias term", None)
    _check_terms(c, f"{spec}.subnetSelectorTerms", nc.subnet_selector_terms, ("tags", "id"), "subnet")
    _check_terms(c, f"{spec}.securityGroupSelectorTerms", nc.security_group_selector_terms,
                 ("tags", "id", "name"), "security group")
    has_role, has_profile = nc.role is not None, nc.instance_profile is not None
    if has_role and has_profile:
        c.add(f"{spec}.instanceProfile", "exactly one of role or instanceProfile, not both",
              nc.instance_profile)
    elif not has_role and not has_profile and not identity_from_settings:
        c.add(f"{spec}.role", "exactly one of role or instanceProfile (the nodes' IAM identity)", None)
    _check_tags(c, f"{spec}.tags", nc.tags)
    bdms = nc.block_device_mappings
    if len(bdms) > MAX_BLOCK_DEVICE_MAPPINGS:
        c.add(f"{spec}.blockDeviceMappings", f"at most {MAX_BLOCK_DEVICE_MAPPINGS} mappings", len(bdms))
    roots = [i for i, b in enumerate(bdms) if b.root_volume]
    if len(roots) > 1:
        c.add(f"{spec}.blockDeviceMappings[{roots[1]}].rootVolume", "at most one mapping with rootVolume",
              True)
    for i, b in enumerate(bdms):
        at = f"{spec}.blockDeviceMappings[{i}].ebs"
        if b.ebs is None:
            continue
        e = b.ebs
        if e.volume_size is None and e.snapshot_id is None:
            c.add(at, "volumeSize or snapshotID", None)
        if e.volume_size is not None and not 0 < e.volume_size <= MAX_VOLUME_SIZE:
            c.add(f"{at}.volumeSize", "a size above 0 and at most 64Ti",
                  quantity.format_quantity("ephemeral-storage", e.volume_size))
        if e.volume_type is not None and e.volume_type not in nodeclass.VOLUME_TYPES:
            c.add(f"{at}.volumeType", "one of " + ", ".join(nodeclass.VOLUME_TYPES), e.volume_type)
        for key, number in (("iops", e.iops), ("throughput", e.throughput)):
            if number is not None and number < 0:
                c.add(f"{at}.{key}", "a non-negative integer", number)
    mo = nc.metadata_options
    mpath = f"{spec}.metadataOptions"
    for key, value, allowed in (("httpEndpoint", mo.http_endpoint, ("enabled", "disabled")),
                                ("httpProtocolIPv6", mo.http_protocol_ipv6, ("enabled", "disabled")),
                                ("httpTokens", mo.http_tokens, ("required", "optional"))):
        if value not in allowed:
            c.add(f"{mpath}.{key}", " or ".join(allowed), value)
    if not 1 <= mo.http_put_response_hop_limit <= 64:
        c.add(f"{mpath}.httpPutResponseHopLimit", "an integer between 1 and 64",
              mo.http_put_response_hop_limit)
    if nc.instance_store_policy is not None and nc.instance_store_policy != "RAID0":
        c.add(f"{spec}.instanceStorePolicy", "RAID0", nc.instance_store_policy)
    _check_kubelet(c, f"{spec}.kubelet", nc.kubelet)
    return c.errors


def validate_aksnodeclass(nc: nodeclass.AKSNodeClass) -> list[errors.FieldError]:
    c = _Collector(f"{nodeclass.AKS_KIND} {nc.name}")
    if nc.image_family not in nodeclass.AKS_IMAGE_FAMILIES:
        c.add("spec.imageFamily", "one of " + ", ".join(nodeclass.AKS_IMAGE_FAMILIES), nc.image_family)
    if not 30 <= nc.os_disk_size_gb <= 2048:
        c.add("spec.osDiskSizeGB", "an integer between 30 and 2048", nc.os_disk_size_gb)
    if nc.vnet_subnet_id is not None and not _VNET_SUBNET.match(nc.vnet_subnet_id):
        c.add("spec.vnetSubnetID",
              "a subnet resource ID /subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Network/"
              "virtualNetworks/<vnet>/subnets/<subnet>", nc.vnet_subnet_id)
    if nc.max_pods is not None and not 10 <= nc.max_pods <= 250:
        c.add("spec.maxPods", "an integer between 10 and 250", nc.max_pods)
    _check_kubelet(c, "spec.kubelet", nc.kubelet)
    return c.errors
