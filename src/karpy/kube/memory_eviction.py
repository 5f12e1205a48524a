"""PodDisruptionBudget arithmetic for the in-memory cluster's Eviction subresource.

:func:`check_eviction` decides whether one pod may be evicted now, the way the API server's
eviction handler does with the numbers the disruption controller keeps in a budget's status,
computed live from the pods:

* Pods that are not running (``Pending``, ``Succeeded``, ``Failed``) or already terminating can
  always be evicted.
* No budget selects the pod (same namespace, ``spec.selector`` matches its labels; an empty
  selector selects every pod of the namespace): allowed.
* More than one budget selects it: :class:`karpy.kube.errors.InternalError` (500), as upstream.
* Otherwise, with *healthy* = matching pods that are Running, Ready (Running counts as ready when
  the pod has no Ready condition) and not terminating, and *expected* = the replicas of the
  matching pods' controllers (``spec.replicas`` of the owning object when it exists; otherwise
  the number of matching, non-terminal pods of that owner, or 1 for a pod without owner):

  - ``minAvailable: n`` -> desired healthy = n; ``minAvailable: "p%"`` -> ceil(p * expected / 100)
  - ``maxUnavailable: n`` -> desired healthy = expected - n;
    ``maxUnavailable: "p%"`` -> expected - ceil(p * expected / 100)
  - neither -> desired healthy = 0 (policy/v1 does not default either field).

  A healthy pod may be evicted when healthy - desired > 0. An unhealthy pod may be evicted when
  healthy >= desired, or always with ``spec.unhealthyPodEvictionPolicy: AlwaysAllow``. Otherwise
  :class:`karpy.kube.errors.TooManyRequests` (429).

Graceful pod deletion (the in-memory cluster's opt-in ``graceful_pods``): :func:`grace_period` is how long
a deleted pod bound to a node lingers (``terminationGracePeriodSeconds``, default 30 s; ``None`` for pods
removed at once) and :func:`in_grace` tells a terminating pod its kubelet has not yet confirmed stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from karpy.kube import errors, interface, selectors

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

OwnerLookup = Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]
"""``lookup(namespace, owner_reference)`` -> the owning object, or None when it does not exist."""


def is_running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def is_healthy(pod: Mapping[str, Any]) -> bool:
    """Running and Ready (Running counts as Ready without a Ready condition), not terminating."""
    if interface.is_terminating(pod) or not is_running(pod):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return True


def _scaled(value: Any, expected: int, pdb: Mapping[str, Any], field: str) -> int:
    """An IntOrString as a pod count; percentages round up, like the disruption controller."""
    if isinstance(value, bool):
        raise errors.Invalid(f"{_name(pdb)}: spec.{field} must be an integer or a percentage")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        try:
            pct = int(text[:-1])
        except ValueError:
            raise errors.Invalid(f"{_name(pdb)}: spec.{field} {value!r} is not a percentage") from None
        return math.ceil(pct * expected / 100)
    try:
        return int(text)
    except ValueError:
        raise errors.Invalid(f"{_name(pdb)}: spec.{field} {value!r} is not an int or a percentage") from None


def _name(pdb: Mapping[str, Any]) -> str:
    meta = pdb.get("metadata") or {}
    return f"PodDisruptionBudget {meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_query(pdb: Mapping[str, Any]) -> selectors.LabelQuery | None:
    """The budget's pod selector; ``None`` (a missing selector) selects no pod."""
    selector = (pdb.get("spec") or {}).get("selector")
    return None if selector is None else selectors.from_label_selector(selector)


def selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """True when the budget's selector matches the pod (same namespace is the caller's job)."""
    query = pod_query(pdb)
    return query is not None and query.matches(interface.labels_of(pod))


def expected_count(pods: Sequence[Mapping[str, Any]], namespace: str, lookup: OwnerLookup) -> int:
    """The scale the matching pods should have: their controllers' replicas, else pod counts."""
    total = 0
    pods_by_owner: dict[str, tuple[Mapping[str, Any], int]] = {}
    for pod in pods:
        controller = interface.owner(pod)
        if controller is None:
            total += 1
            continue
        uid = str(controller.get("uid", ""))
        _, count = pods_by_owner.get(uid, (controller, 0))
        pods_by_owner[uid] = (controller, count + 1)
    for ref, count in pods_by_owner.values():
        owner_obj = lookup(namespace, ref)
        replicas = ((owner_obj or {}).get("spec") or {}).get("replicas")
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            total += replicas
        else:
            total += count
    return total


def desired_healthy(pdb: Mapping[str, Any], expected: int) -> int:
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - _scaled(spec["maxUnavailable"], expected, pdb, "maxUnavailable"))
    if spec.get("minAvailable") is not None:
        return _scaled(spec["minAvailable"], expected, pdb, "minAvailable")
    return 0


def disruptions_allowed(
    pdb: Mapping[str, Any], namespace_pods: Iterable[Mapping[str, Any]], lookup: OwnerLookup
) -> tuple[int, int, int]:
    """``(healthy, desired_healthy, disruptions_allowed)`` for one budget right now."""
    query = pod_query(pdb)
    selected = [] if query is None else [p for p in namespace_pods if query.matches(interface.labels_of(p))]
    return allowed_among(pdb, selected, lookup)


def allowed_among(
    pdb: Mapping[str, Any], selected: Iterable[Mapping[str, Any]], lookup: OwnerLookup
) -> tuple[int, int, int]:
    """:func:`disruptions_allowed` over ``selected``, the pods of its namespace its selector already
    matched (a caller that matched them by group)."""
    namespace = str((pdb.get("metadata") or {}).get("namespace") or "default")
    matching = [p for p in selected if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES]
    live = [p for p in matching if not interface.is_terminating(p)]
    healthy = sum(1 for p in live if is_healthy(p))
    desired = desired_healthy(pdb, expected_count(live, namespace, lookup))
    return healthy, desired, max(0, healthy - desired)


def check_eviction(
    pod: Mapping[str, Any],
    pdbs: Sequence[Mapping[str, Any]],
    namespace_pods: Iterable[Mapping[str, Any]],
    lookup: OwnerLookup,
) -> None:
    """Return when ``pod`` may be evicted now; raise TooManyRequests / InternalError otherwise."""
    phase = (pod.get("status") or {}).get("phase")
    if interface.is_terminating(pod) or phase != "Running":
        return
    matching = [b for b in pdbs if selects(b, pod)]
    if not matching:
        return
    kind, namespace, name = interface.meta_key(pod)
    if len(matching) > 1:
        raise errors.InternalError(
            "This pod has more than one PodDisruptionBudget, "
            "which the eviction subresource does not support.",
            kind=kind,
            name=name,
            namespace=namespace,
        )
    pdb = matching[0]
    healthy, desired, allowed = disruptions_allowed(pdb, namespace_pods, lookup)
    if is_healthy(pod):
        if allowed > 0:
            return
    elif (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow" or healthy >= desired:
        return
    raise errors.TooManyRequests(
        f"Cannot evict pod as it would violate the pod's disruption budget {_name(pdb)} "
        f"(healthy {healthy}, desired healthy {desired}).",
        kind=kind,
        name=name,
        namespace=namespace,
    )


# ------------------------------------------------------------------- graceful pod deletion

DEFAULT_POD_GRACE_SECONDS = 30


def grace_period(obj: dict[str, Any]) -> int | None:
    """The grace period a deleted pod gets under ``graceful_pods``; None: removed at once."""
    if obj.get("kind") != "Pod" or not (obj.get("spec") or {}).get("nodeName") or \
            (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds")
    seconds = DEFAULT_POD_GRACE_SECONDS if grace is None else int(grace)
    return seconds if seconds > 0 else None


def in_grace(obj: dict[str, Any]) -> bool:
    """A terminating pod its kubelet has not yet confirmed stopped (a terminal phase)."""
    return obj.get("kind") == "Pod" and bool(obj["metadata"].get("deletionGracePeriodSeconds")) and \
        (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES
