"""The custom labels a new NodeClaim gets from its requirements, as Karpenter v1 resolves them.

Karpenter (``NodeClaimTemplate.resolveCustomLabelsFromRequirements``, v1.12+) writes a concrete
label at NodeClaim creation for every requirement key that is neither well-known (the cloud
labels those from the instance type) nor restricted (``kubernetes.io/hostname``,
``karpenter.sh/registered``...): ``In`` gets one of its values; ``NotIn``, ``Exists``, ``Gt`` and
``Lt`` get a number the requirement admits. A node labelled so satisfies the requirements it was
launched under, which is what keeps requirements drift from firing on a NodePool nobody changed.

What a caller may rely on: :func:`custom_labels` is deterministic (where Karpenter picks at
random, karpy takes :meth:`karpy.scheduling.requirement.Requirement.any`: the smallest listed
value, or the first integer from 0 or from the ``Gt`` bound that is admitted), every value it
returns is admitted by its requirement, and keys that only admit absence (``DoesNotExist``) get
no label.
"""

from __future__ import annotations

from collections.abc import Iterable

from karpy.api import labels as wk
from karpy.scheduling import requirements as reqs_mod

PROVIDER_LABELS = frozenset({
    "topology.k8s.aws/zone-id", "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/instance-capability-flex",
})
"""Well-known labels of Karpenter's providers that the cloud sets and :mod:`karpy.api.labels` does
not list (never resolved from requirements: the instance decides them)."""


def custom_labels(reqs: reqs_mod.Requirements, provided: Iterable[str] = ()) -> dict[str, str]:
    """A concrete label per custom requirement key of ``reqs`` (see the module docstring).

    ``provided``: keys the NodeClaim's instance types label themselves (left to the cloud)."""
    skip = frozenset(provided)
    out: dict[str, str] = {}
    for key, r in reqs.items():
        if key in wk.WELL_KNOWN_LABELS or key in wk.RESTRICTED_LABELS or key in PROVIDER_LABELS or key in skip:
            continue
        value = r.any()
        if value is not None:
            out[key] = value
    return out
