"""``karpenter.kwok.sh/v1alpha1`` KWOKNodeClass: the NodeClass of ``karpy controller --cloud-provider kwok``.

The CRD of Karpenter's KWOK provider: one optional field (``nodeRegistrationDelay``), and a status
that defaults to a Ready condition (a KWOK node class needs no cloud to resolve). karpy has no model
for it: the KWOK provider reads the object as it is.
"""

from __future__ import annotations

from karpy.api.schemas import common, dsl

GROUP = "karpenter.kwok.sh"
KIND = "KWOKNodeClass"
PLURAL = "kwoknodeclasses"
SINGULAR = "kwoknodeclass"
SHORT_NAMES = ("kwoknc", "kwokncs")
CATEGORIES = ("karpenter",)
VERSIONS = ("v1alpha1",)
STORAGE_VERSION = "v1alpha1"
READY = {"lastTransitionTime": "2024-01-01T01:01:01Z", "message": "", "reason": "Ready", "status": "True",
         "type": "Ready"}


def schema() -> dsl.Schema:
    return dsl.obj({
        "apiVersion": dsl.string(), "kind": dsl.string(), "metadata": dsl.obj(),
        "spec": dsl.obj({"nodeRegistrationDelay": dsl.string(
            pattern=common.DURATION, doc="how long after launch the KWOK node registers")}),
        "status": dsl.obj({"conditions": common.conditions(strict=True, as_map=False)},
                          default={"conditions": [READY]}),
    }, doc="KWOKNodeClass is the Schema for the KWOKNodeClass API")


PRINTER_COLUMNS: tuple[dict[str, object], ...] = ()
SUBRESOURCES: dict[str, dict[str, str]] = {"status": {}}
