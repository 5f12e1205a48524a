"""Schema pieces shared by karpy's kinds: conditions, requirements, taints, nodeClassRef, durations,
and the label restrictions Karpenter's CRDs enforce with CEL.

The restricted label domains are the union of what Karpenter core, its AWS provider and AKS Node
Auto-Provisioning restrict (one karpy CRD serves both clouds): ``karpenter.sh``,
``karpenter.k8s.aws``, ``karpenter.azure.com`` and ``kubernetes.azure.com``, each with the keys
its provider allows (Karpenter's lists plus karpy's own well-known labels of that domain). The bare
names AKS restricts (``agentpool``, ``accelerator``, ``storageprofile``, ``storagetier``) are not
restricted here: they have no domain, and EKS users label nodes with them.
"""

from __future__ import annotations

from karpy.api import labels
from karpy.api.schemas import dsl

DURATION_OR_NEVER = r"^(([0-9]+(s|m|h))+|Never)$"
DURATION = r"^([0-9]+(s|m|h))+$"
LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"
             r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
CONDITION_TYPE = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                  r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
OPERATORS = ("Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_KARPENTER_SH_ALLOWED = (labels.CAPACITY_TYPE, labels.NODEPOOL)
_AWS_ALLOWED_KARPENTER = (
    "instance-tenancy", "capacity-reservation-type", "capacity-reservation-id",
    "capacity-reservation-interruptible", "ec2nodeclass", "instance-encryption-in-transit-supported",
    "nitro-sandbox", "instance-category", "instance-hypervisor", "instance-family", "instance-generation",
    "instance-local-nvme", "instance-size", "instance-cpu", "instance-cpu-manufacturer",
    "instance-cpu-sustained-clock-speed-mhz", "instance-memory", "instance-ebs-bandwidth",
    "instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer", "instance-gpu-count",
    "instance-gpu-memory", "instance-accelerator-name", "instance-accelerator-manufacturer",
    "instance-accelerator-count", "instance-capability-flex", "placement-group-id", "placement-group-partition",
)
_AZURE_ALLOWED_KARPENTER = (
    "aksnodeclass", "sku-name", "sku-family", "sku-series", "sku-version", "sku-cpu", "sku-memory",
    "sku-networking-accelerated", "sku-storage-premium-capable", "sku-storage-ultra-ssd",
    "sku-storage-ephemeralos-maxsize", "sku-gpu-name", "sku-gpu-manufacturer", "sku-gpu-count", "placement-scope",
)
_AZURE_ALLOWED_KUBERNETES = (
    "mode", "scalesetpriority", "priority", "fips_enabled", "os-sku", "cluster", "sku-cpu", "sku-memory",
    "ebpf-dataplane", "ebpf-host-routing", "network-policy", "hostedvm",
)


def _allowed(domain: str, names: tuple[str, ...], karpys: frozenset[str] = frozenset()) -> list[str]:
    keys = {f"{domain}/{n}" for n in names} | {k for k in karpys if labels.domain(k) == domain}
    return sorted(keys)


RESTRICTED_DOMAINS: tuple[tuple[str, list[str]], ...] = (
    (labels.GROUP, sorted(_KARPENTER_SH_ALLOWED)),
    (labels.AWS_GROUP, _allowed(labels.AWS_GROUP, _AWS_ALLOWED_KARPENTER, labels.AWS_LABELS)),
    (labels.AZURE_GROUP, _allowed(labels.AZURE_GROUP, _AZURE_ALLOWED_KARPENTER, labels.AZURE_LABELS)),
    ("kubernetes.azure.com", _allowed("kubernetes.azure.com", _AZURE_ALLOWED_KUBERNETES)),
)
"""(domain, the keys of that domain a NodePool may still use)."""


def _cel_list(keys: list[str]) -> str:
    return "[" + ", ".join(f'"{k}"' for k in keys) + "]"


def label_key_rules(*, each: bool, nodepool_label: bool = True) -> list[dict[str, str]]:
    """The label restrictions as CEL: on a map's keys (``each``) or on one key (``self``)."""
    out: list[dict[str, str]] = []

    def add(cond: str, message: str) -> None:
        out.append(dsl.rule(f"self.all(x, {cond.replace('@', 'x')})" if each else cond.replace("@", "self"),
                            message))

    for dom, allowed in RESTRICTED_DOMAINS:
        add(f'@ in {_cel_list(allowed)} || !@.find("^([^/]+)").endsWith("{dom}")',
            f'label domain "{dom}" is restricted')
        if dom == labels.GROUP and nodepool_label:
            add(f'@ != "{labels.NODEPOOL}"', f'label "{labels.NODEPOOL}" is restricted')
        if dom == labels.GROUP:
            add(f'@ != "{labels.HOSTNAME}"', f'label "{labels.HOSTNAME}" is restricted')
    return out


def conditions(*, strict: bool, as_map: bool = True) -> dsl.Schema:
    """``status.conditions``: ``metav1.Condition`` (``strict``: message and reason required, as
    NodePool and NodeClass status conditions are; NodeClaim's may leave them empty; ``as_map``: a
    list-map keyed by ``type``, as NodePool and NodeClaim declare it, NodeClasses do not)."""
    reason = (dsl.string(max_len=1024, min_len=1, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
              if strict else dsl.string(max_len=1024, pattern=r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$"))
    required = ["lastTransitionTime", "status", "type"] + (["message", "reason"] if strict else [])
    item = dsl.obj({
        "lastTransitionTime": dsl.timestamp("when the condition last changed status"),
        "message": dsl.string(max_len=32768),
        "observedGeneration": dsl.int64(0),
        "reason": reason,
        "status": dsl.string(enum=("True", "False", "Unknown")),
        "type": dsl.string(max_len=316, pattern=CONDITION_TYPE),
    }, required=required, doc="Condition aliases the upstream type and adds additional helper methods")
    return dsl.array(item, list_type="map" if as_map else None, map_keys=("type",) if as_map else (),
                     doc="Conditions contains signals for health and readiness")


def requirements() -> dsl.Schema:
    """``requirements``: node selector requirements with ``minValues`` and the ``Gte``/``Lte`` operators."""
    item = dsl.obj({
        "key": dsl.string(max_len=316, pattern=LABEL_KEY, rules=label_key_rules(each=False),
                          doc="The label key that the selector applies to."),
        "minValues": dsl.integer(minimum=1, maximum=50,
                                 doc="the minimum number of unique values required for this requirement"),
        "operator": dsl.string(enum=OPERATORS, doc="Represents a key's relationship to a set of values."),
        "values": dsl.array(dsl.string(max_len=63, pattern=LABEL_VALUE), list_type="atomic"),
    }, required=["key", "operator"])
    return dsl.array(item, max_items=100, list_type="atomic", rules=[
        dsl.rule("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
                 "requirements with operator 'In' must have a value defined"),
        dsl.rule("self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte')"
                 " ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
                 "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"),
        dsl.rule("self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
                 "requirements with 'minValues' must have at least that many values specified in the 'values' field"),
    ], doc="Requirements are layered with GetLabels and applied to every node.")


def taints(doc: str) -> dsl.Schema:
    item = dsl.obj({
        "effect": dsl.string(enum=TAINT_EFFECTS),
        "key": dsl.string(min_len=1, pattern=LABEL_KEY),
        "timeAdded": dsl.timestamp(),
        "value": dsl.string(pattern=LABEL_KEY),
    }, required=["effect", "key"])
    return dsl.array(item, list_type="atomic", doc=doc)


def node_class_ref(*, immutable: bool) -> dsl.Schema:
    """``nodeClassRef``: group, kind and name of the provider NodeClass (group and kind immutable on
    a NodePool)."""
    rules = [dsl.rule("self.group == oldSelf.group", "nodeClassRef.group is immutable"),
             dsl.rule("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable")] if immutable else []
    return dsl.obj({
        "group": dsl.string(pattern="^[^/]*$", rules=[dsl.rule("self != ''", "group may not be empty")]),
        "kind": dsl.string(rules=[dsl.rule("self != ''", "kind may not be empty")]),
        "name": dsl.string(rules=[dsl.rule("self != ''", "name may not be empty")]),
    }, required=["group", "kind", "name"], rules=rules,
        doc="NodeClassRef is a reference to an object that defines provider specific configuration")


def expire_after() -> dsl.Schema:
    return dsl.string(pattern=DURATION_OR_NEVER, default="720h",
                      doc="The duration the controller will wait before terminating a node, measured from when the "
                          "node is created (Never: never expire).")


def termination_grace_period() -> dsl.Schema:
    return dsl.string(pattern=DURATION, doc="The maximum duration the controller will wait before forcefully "
                                            "deleting the pods on a node, measured from when deletion is first "
                                            "initiated.")


def claim_spec_fields() -> dict[str, dsl.Schema]:
    """The fields a NodeClaim spec and a NodePool's ``template.spec`` share."""
    return {
        "expireAfter": expire_after(),
        "requirements": requirements(),
        "startupTaints": taints("Taints that will be applied to the node on creation and removed by a "
                                "controller once initialized."),
        "taints": taints("Taints will be applied to the NodeClaim's node."),
        "terminationGracePeriod": termination_grace_period(),
    }


def selector_tags(max_props: int = 20) -> dsl.Schema:
    """``tags`` of a selector term: non-empty keys and values."""
    return dsl.str_map(max_props=max_props, rules=[
        dsl.rule("self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported")])


def resolved_requirements() -> dsl.Schema:
    """Requirements as a NodeClass status reports them (no restrictions)."""
    return dsl.array(dsl.obj({
        "key": dsl.string(), "operator": dsl.string(),
        "values": dsl.array(dsl.string(), list_type="atomic"),
    }, required=["key", "operator"]))
