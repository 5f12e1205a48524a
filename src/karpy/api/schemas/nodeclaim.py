"""``karpenter.sh/v1`` NodeClaim: the schema, printer columns and subresources of its CRD.

Karpenter v1's NodeClaim field for field: an immutable spec (the NodePool template's fields plus
``resources.requests``) and the status karpy writes (providerID, nodeName, imageID, capacity,
allocatable, conditions, lastPodEventTime). ``kubectl get nodeclaims`` shows Type, Capacity, Zone,
Node, Ready, Age (and ImageID, ID, NodePool, NodeClass, Drifted with ``-o wide``).
"""

from __future__ import annotations

from karpy.api import nodeclaim as model
from karpy.api.schemas import common, dsl

GROUP = "karpenter.sh"
KIND = model.KIND
PLURAL = "nodeclaims"
SINGULAR = "nodeclaim"
SHORT_NAMES: tuple[str, ...] = ()
CATEGORIES = ("karpenter",)


def spec() -> dsl.Schema:
    fields = common.claim_spec_fields()
    fields["nodeClassRef"] = common.node_class_ref(immutable=False)
    fields["resources"] = dsl.obj({"requests": dsl.resource_list("the resources the NodeClaim was sized for")},
                                  doc="Resources models the resource requirements for the NodeClaim to launch")
    # the NodePool-only label restriction ("karpenter.sh/nodepool") does not apply to a claim's requirements
    fields["requirements"]["items"]["properties"]["key"]["x-kubernetes-validations"] = \
        common.label_key_rules(each=False, nodepool_label=False)
    return dsl.obj(dict(sorted(fields.items())), required=["nodeClassRef", "requirements"],
                   rules=[dsl.rule("self == oldSelf", "spec is immutable")],
                   doc="NodeClaimSpec describes the desired state of the NodeClaim")


def status() -> dsl.Schema:
    return dsl.obj({
        "allocatable": dsl.resource_list("the resources of the node available to pods"),
        "capacity": dsl.resource_list("the resources of the node"),
        "conditions": common.conditions(strict=False),
        "imageID": dsl.string(doc="the image the instance was launched with"),
        "lastPodEventTime": dsl.timestamp("the last time a pod was scheduled to or removed from the node"),
        "nodeName": dsl.string(doc="the name of the Node the NodeClaim registered as"),
        "providerID": dsl.string(doc="the cloud provider's ID of the instance"),
    }, doc="NodeClaimStatus defines the observed state of NodeClaim")


def schema() -> dsl.Schema:
    return dsl.obj({
        "apiVersion": dsl.string(), "kind": dsl.string(), "metadata": dsl.obj(),
        "spec": spec(), "status": status(),
    }, required=["spec"], doc="NodeClaim is the Schema for the NodeClaims API")


PRINTER_COLUMNS = (
    {"jsonPath": ".metadata.labels.node\\.kubernetes\\.io/instance-type", "name": "Type", "type": "string"},
    {"jsonPath": ".metadata.labels.karpenter\\.sh/capacity-type", "name": "Capacity", "type": "string"},
    {"jsonPath": ".metadata.labels.topology\\.kubernetes\\.io/zone", "name": "Zone", "type": "string"},
    {"jsonPath": ".status.nodeName", "name": "Node", "type": "string"},
    {"jsonPath": '.status.conditions[?(@.type=="Ready")].status', "name": "Ready", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    {"jsonPath": ".status.imageID", "name": "ImageID", "priority": 1, "type": "string"},
    {"jsonPath": ".status.providerID", "name": "ID", "priority": 1, "type": "string"},
    {"jsonPath": ".metadata.labels.karpenter\\.sh/nodepool", "name": "NodePool", "priority": 1, "type": "string"},
    {"jsonPath": ".spec.nodeClassRef.name", "name": "NodeClass", "priority": 1, "type": "string"},
    {"jsonPath": '.status.conditions[?(@.type=="Drifted")].status', "name": "Drifted", "priority": 1,
     "type": "string"},
)
SUBRESOURCES: dict[str, dict[str, str]] = {"status": {}}
