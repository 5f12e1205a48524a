"""``karpenter.sh/v1alpha1`` NodeOverlay: the schema, printer columns and subresources of its CRD.

Karpenter v1.14's NodeOverlay field for field: ``requirements`` (at most 100; ``karpenter.sh`` keys other
than the capacity type and the NodePool and ``kubernetes.io/hostname`` refused), ``price`` and
``priceAdjustment`` with Karpenter's patterns and not both, ``capacity`` of extended resources only,
``weight`` 1 to 10000; a status of conditions (``ValidationSucceeded``, ``Ready``) and the status
subresource. The model is :mod:`karpy.api.nodeoverlay`.
"""

from __future__ import annotations

from karpy.api import labels
from karpy.api import nodeoverlay as model
from karpy.api.schemas import common, dsl

GROUP = "karpenter.sh"
KIND = model.KIND
PLURAL = "nodeoverlays"
SINGULAR = "nodeoverlay"
SHORT_NAMES = ("overlays",)
CATEGORIES = ("karpenter",)
VERSIONS = ("v1alpha1",)
STORAGE_VERSION = "v1alpha1"

_KEY_RULES = [
    dsl.rule(f'self in ["{labels.CAPACITY_TYPE}", "{labels.NODEPOOL}"] || '
             f'!self.find("^([^/]+)").endsWith("{labels.GROUP}")', f'label domain "{labels.GROUP}" is restricted'),
    dsl.rule(f'self != "{labels.HOSTNAME}"', f'label "{labels.HOSTNAME}" is restricted'),
]


def _requirements() -> dsl.Schema:
    item = dsl.obj({
        "key": dsl.string(max_len=316, pattern=common.LABEL_KEY, rules=_KEY_RULES,
                          doc="The label key that the selector applies to."),
        "operator": dsl.string(enum=common.OPERATORS, doc="Represents a key's relationship to a set of values. "
                               "Valid operators are In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, and Lte."),
        "values": dsl.array(dsl.string(max_len=63, pattern=common.LABEL_VALUE), list_type="atomic",
                            doc="The values: non-empty for In and NotIn, empty for Exists and DoesNotExist, "
                                "a single integer for Gt, Lt, Gte and Lte."),
    }, required=["key", "operator"], doc="A node selector requirement: a key, an operator and values.")
    return dsl.array(item, max_items=model.MAX_REQUIREMENTS, list_type="atomic", rules=[
        dsl.rule("self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
                 "requirements with operator 'NotIn' must have a value defined"),
        dsl.rule("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
                 "requirements with operator 'In' must have a value defined"),
        dsl.rule("self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte')"
                 " ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
                 "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"),
    ], doc="requirements constrain when this NodeOverlay is applied during scheduling simulations: well-known "
           "labels (node.kubernetes.io/instance-type, karpenter.sh/nodepool...) and the NodePool's template labels.")


def spec() -> dsl.Schema:
    restricted = ", ".join(f"'{r}'" for r in model.RESTRICTED_RESOURCES)
    capacity = dsl.resource_list("Capacity adds extended resources only, and does not replace any existing "
                                 "resources (not cpu, memory, ephemeral-storage or pods).")
    capacity["x-kubernetes-validations"] = [dsl.rule(f"self.all(x, !(x in [{restricted}]))",
                                                     "invalid resource restricted")]
    return dsl.obj({
        "capacity": capacity,
        "price": dsl.string(pattern=model.PRICE_PATTERN.pattern,
                            doc="Price overrides the price of the matching instance types (an unsigned decimal)."),
        "priceAdjustment": dsl.string(pattern=model.ADJUSTMENT_PATTERN.pattern,
                                      doc="PriceAdjustment changes the price of the matching instance types: a "
                                          "signed amount (-0.5, +1.2) or percentage (+10%, -15%)."),
        "requirements": _requirements(),
        "weight": dsl.integer(fmt="int32", minimum=model.MIN_WEIGHT, maximum=model.MAX_WEIGHT,
                              doc="Weight orders overlapping NodeOverlays: higher weights take precedence; "
                                  "unset counts as 0."),
    }, required=["requirements"], rules=[
        dsl.rule("!has(self.price) || !has(self.priceAdjustment)", "cannot set both 'price' and 'priceAdjustment'"),
    ], doc="NodeOverlaySpec: the instance types selected and what changes for them.")


def schema() -> dsl.Schema:
    return dsl.obj({
        "apiVersion": dsl.string(), "kind": dsl.string(), "metadata": dsl.obj(),
        "spec": spec(),
        "status": dsl.obj({"conditions": common.conditions(strict=True)},
                          doc="NodeOverlayStatus defines the observed state of NodeOverlay"),
    }, required=["spec"], doc="NodeOverlay is the Schema for the NodeOverlays API")


PRINTER_COLUMNS = (
    {"jsonPath": '.status.conditions[?(@.type=="Ready")].status', "name": "Ready", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    {"jsonPath": ".spec.weight", "name": "Weight", "priority": 1, "type": "integer"},
)
SUBRESOURCES: dict[str, dict[str, str]] = {"status": {}}
