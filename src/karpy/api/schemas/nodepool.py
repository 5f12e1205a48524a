"""``karpenter.sh/v1`` NodePool: the schema, printer columns and subresources of its CRD.

Karpenter v1's NodePool field for field, with its defaults (``disruption: {consolidateAfter: 0s}``,
one budget of ``10%``, ``expireAfter: 720h``, ``consolidationPolicy: WhenEmptyOrUnderutilized``),
patterns and CEL rules; status and scale (``spec.replicas`` / ``status.nodes``) subresources.
"""

from __future__ import annotations

from karpy.api import nodepool as model
from karpy.api.schemas import common, dsl

GROUP = "karpenter.sh"
KIND = model.KIND
PLURAL = "nodepools"
SINGULAR = "nodepool"
SHORT_NAMES: tuple[str, ...] = ()
CATEGORIES = ("karpenter",)
CONSOLIDATION_POLICIES = model.ADMITTED_POLICIES
"""Karpenter v1.14's policies, ``Balanced`` included (:mod:`karpy.disruption.balanced`)."""

BUDGET_NODES = r"^((100|[0-9]{1,2})%|[0-9]+)$"
BUDGET_DURATION = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"
BUDGET_SCHEDULE = (r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|"
                   r"((.+)\s(.+)\s(.+)\s(.+)\s(.+))$")


def _budgets() -> dsl.Schema:
    budget = dsl.obj({
        "duration": dsl.string(pattern=BUDGET_DURATION, doc="how long a scheduled budget is active (e.g. 10h30m)"),
        "nodes": dsl.string(pattern=BUDGET_NODES, default=model.DEFAULT_BUDGET_NODES,
                            doc="the maximum number (or percentage) of nodes disrupted at once"),
        "reasons": dsl.array(dsl.string(enum=("Underutilized", "Empty", "Drifted")), max_items=50, list_type="set",
                             doc="the disruption reasons the budget applies to (all when unset)"),
        "schedule": dsl.string(pattern=BUDGET_SCHEDULE, doc="a cron schedule (UTC) for when the budget is active"),
    }, required=["nodes"])
    return dsl.array(budget, max_items=50, list_type="atomic", default=[{"nodes": model.DEFAULT_BUDGET_NODES}],
                     rules=[dsl.rule("self.all(x, has(x.schedule) == has(x.duration))",
                                     "'schedule' must be set with 'duration'")],
                     doc="Budgets limit how many nodes may be voluntarily disrupted at once.")


def _template() -> dsl.Schema:
    label_value = dsl.string(max_len=63, pattern=common.LABEL_VALUE)
    metadata = dsl.obj({
        "annotations": dsl.str_map(map_type="granular", doc="annotations applied to the NodeClaims and Nodes"),
        "labels": dsl.str_map(label_value, max_props=100, map_type="atomic",
                              rules=common.label_key_rules(each=True),
                              doc="labels applied to the NodeClaims and Nodes"),
    })
    spec_fields = common.claim_spec_fields()
    spec_fields["nodeClassRef"] = common.node_class_ref(immutable=True)
    spec = dsl.obj(dict(sorted(spec_fields.items())), required=["nodeClassRef", "requirements"],
                   doc="the NodeClaim spec every node of the pool gets")
    return dsl.obj({"metadata": metadata, "spec": spec}, required=["spec"],
                   doc="Template contains the template of possibilities for the provisioning logic to launch "
                       "a NodeClaim with.")


def spec() -> dsl.Schema:
    return dsl.obj({
        "disruption": dsl.obj({
            "budgets": _budgets(),
            "consolidateAfter": dsl.string(pattern=common.DURATION_OR_NEVER,
                                           doc="how long after a pod is added or removed a node may be "
                                               "consolidated (Never: never)"),
            "consolidationPolicy": dsl.string(enum=CONSOLIDATION_POLICIES, default=model.WHEN_EMPTY_OR_UNDERUTILIZED,
                                              doc="which nodes consolidation considers"),
        }, required=["consolidateAfter"], default={"consolidateAfter": "0s"},
            doc="Disruption contains the parameters that relate to Karpenter's disruption logic"),
        "limits": dsl.resource_list("Limits define a set of bounds for provisioning capacity."),
        "replicas": dsl.int64(0, doc="a static NodePool: keep this many nodes regardless of pods"),
        "template": _template(),
        "weight": dsl.integer(fmt="int32", minimum=1, maximum=100,
                              doc="the priority of the NodePool (higher first)"),
    }, required=["template"], rules=[
        dsl.rule("has(self.replicas) == has(oldSelf.replicas)",
                 "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
                 "provisioning modes"),
        dsl.rule("!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || "
                 "(size(self.limits) == 1 && 'nodes' in self.limits))",
                 "only 'limits.nodes' is supported on static NodePools"),
        dsl.rule("!has(self.replicas) || !has(self.weight)", "'weight' is not supported on static NodePools"),
    ], doc="NodePoolSpec is the top level nodepool specification.")


def status() -> dsl.Schema:
    return dsl.obj({
        "conditions": common.conditions(strict=True),
        "nodeClassObservedGeneration": dsl.int64(doc="the generation of the NodeClass the status was computed on"),
        "nodes": dsl.int64(default=0, doc="the number of nodes of the NodePool"),
        "resources": dsl.resource_list("the resources in use by the NodePool's nodes"),
    }, doc="NodePoolStatus defines the observed state of NodePool")


def schema() -> dsl.Schema:
    return dsl.obj({
        "apiVersion": dsl.string(), "kind": dsl.string(), "metadata": dsl.obj(),
        "spec": spec(), "status": status(),
    }, required=["spec"], doc="NodePool is the Schema for the NodePools API")


PRINTER_COLUMNS = (
    {"jsonPath": ".spec.template.spec.nodeClassRef.name", "name": "NodeClass", "type": "string"},
    {"jsonPath": ".status.nodes", "name": "Nodes", "type": "string"},
    {"jsonPath": '.status.conditions[?(@.type=="Ready")].status', "name": "Ready", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    {"jsonPath": ".spec.weight", "name": "Weight", "priority": 1, "type": "integer"},
    {"jsonPath": ".status.resources.cpu", "name": "CPU", "priority": 1, "type": "string"},
    {"jsonPath": ".status.resources.memory", "name": "Memory", "priority": 1, "type": "string"},
)
SUBRESOURCES = {"scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.nodes"},
                "status": {}}
