"""PodDisruptionBudget status and the Eviction subresource, as Kubernetes keeps and reads them.

Two halves, both pure (time is an argument):

* :func:`budget_status` is kube-controller-manager's disruption controller for one budget: the
  ``status`` it writes (``observedGeneration``, ``expectedPods``, ``currentHealthy``,
  ``desiredHealthy``, ``disruptionsAllowed``, ``disruptedPods``, the ``DisruptionAllowed``
  condition) from the pods its selector matches and the scale of their controllers:

  - ``maxUnavailable`` (count or percentage) and a percentage ``minAvailable`` take *expected*
    from the scale of each pod's controller (:data:`ScaleOf`: a ReplicaSet owned by a Deployment
    counts the Deployment's ``spec.replicas``, never the ReplicaSet's, which a rollout or a scale
    may have left behind); a selected pod whose controller has no scale (a Job, a custom resource
    without the scale subresource) makes the sync fail: ``disruptionsAllowed: 0`` and the condition
    ``DisruptionAllowed=False`` with reason ``SyncFailed`` (the controller's "fail safe"). Pods
    without any controller are left out of *expected*.
  - an integer ``minAvailable`` needs no controller: *expected* is the number of selected pods.
  - *healthy* counts selected pods that are not terminating, not in ``disruptedPods`` (an eviction
    the API server granted less than :data:`DELETION_TIMEOUT` ago) and Ready (:func:`is_healthy`).
  - ``disruptionsAllowed = max(0, healthy - desired)``, and 0 while *expected* is 0.

* :func:`check_eviction` is the API server's eviction handler, reading only that status (it never
  counts pods or looks up owners): pods that are not Running or already terminating go at once; a
  pod no budget selects goes; more than one budget: :class:`karpy.kube.errors.InternalError` (500,
  "This pod has more than one PodDisruptionBudget"); a budget whose status is older than its spec
  (``observedGeneration < generation``, e.g. never synced) or allows no disruption:
  :class:`karpy.kube.errors.TooManyRequests` (429). An unready pod goes without spending the budget
  under ``unhealthyPodEvictionPolicy: AlwaysAllow``, or when ``currentHealthy >= desiredHealthy >
  0``. Otherwise the caller writes :func:`granted` (one disruption spent, the pod recorded in
  ``disruptedPods``) before deleting the pod.

Graceful pod deletion (the in-memory cluster's opt-in ``graceful_pods``): :func:`grace_period` is how long
a deleted pod bound to a node lingers (``terminationGracePeriodSeconds``, default 30 s, or the grace
period the delete asked for; ``None`` for pods removed at once) and :func:`in_grace` tells a terminating
pod its kubelet has not yet confirmed stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.kube import errors, interface, selectors

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DELETION_TIMEOUT = 120.0
"""Seconds a granted eviction keeps its pod out of ``currentHealthy`` while the pod is not yet deleted
(kube-controller-manager's ``DeletionTimeout``)."""
DISRUPTION_ALLOWED = "DisruptionAllowed"

ScaleOf = Callable[[str, Mapping[str, Any]], int | None]
"""``scale_of(namespace, controller_reference)`` -> the desired replicas of the pod's scalable controller
(a ReplicaSet owned by a Deployment answers with the Deployment's), or None when it has no scale."""


class NoScale(Exception):
    """A selected pod's controller has no scale (kube-controller-manager: "found no controllers")."""


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


def expected_scale(pods: Iterable[Mapping[str, Any]], namespace: str, scale_of: ScaleOf) -> int:
    """The sum of the scales of the selected pods' controllers (each counted once); pods without a
    controller add nothing. :class:`NoScale` when a controller has no scale."""
    scales: dict[str, int] = {}
    for pod in pods:
        ref = next((r for r in interface.owner_references(pod) if r.get("controller")), None)
        if ref is None:
            continue
        uid = str(ref.get("uid") or f"{ref.get('kind')}/{ref.get('name')}")
        if uid in scales:
            continue
        scale = scale_of(namespace, ref)
        if scale is None:
            meta = pod.get("metadata") or {}
            raise NoScale(f"found no controllers for pod {meta.get('name')!r} "
                          f"(its controller {ref.get('kind')}/{ref.get('name')} has no scale)")
        scales[uid] = scale
    return sum(scales.values())


def expected_and_desired(pdb: Mapping[str, Any], selected: Sequence[Mapping[str, Any]],
                         scale_of: ScaleOf) -> tuple[int, int]:
    """``(expectedPods, desiredHealthy)`` as kube-controller-manager computes them (module docstring)."""
    spec = pdb.get("spec") or {}
    namespace = str((pdb.get("metadata") or {}).get("namespace") or "default")
    if spec.get("maxUnavailable") is not None:
        expected = expected_scale(selected, namespace, scale_of)
        return expected, max(0, expected - _scaled(spec["maxUnavailable"], expected, pdb, "maxUnavailable"))
    minimum = spec.get("minAvailable")
    if minimum is None:
        return 0, 0
    if isinstance(minimum, int) and not isinstance(minimum, bool):
        return len(selected), minimum
    expected = expected_scale(selected, namespace, scale_of)
    return expected, _scaled(minimum, expected, pdb, "minAvailable")


def budget_status(pdb: Mapping[str, Any], namespace_pods: Iterable[Mapping[str, Any]], scale_of: ScaleOf,
                  now: float) -> dict[str, Any]:
    """The ``status`` kube-controller-manager's disruption controller writes for ``pdb`` at ``now``."""
    old = pdb.get("status") or {}
    generation = int((pdb.get("metadata") or {}).get("generation") or 1)
    query = pod_query(pdb)
    selected = [] if query is None else [p for p in namespace_pods if query.matches(interface.labels_of(p))]
    try:
        expected, desired = expected_and_desired(pdb, selected, scale_of)
    except (NoScale, errors.Invalid) as exc:
        status = dict(old)
        status["disruptionsAllowed"] = 0
        status["conditions"] = [_condition(False, "SyncFailed", str(exc), now, old)]
        return status
    disrupted = _still_disrupted(old.get("disruptedPods") or {}, selected, now)
    healthy = sum(1 for p in selected if is_healthy(p) and interface.name_of(p) not in disrupted)
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    status = {"observedGeneration": generation, "expectedPods": expected, "currentHealthy": healthy,
              "desiredHealthy": desired, "disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = disrupted
    status["conditions"] = [_allowed_condition(allowed, now, old)]
    return status


def _still_disrupted(disrupted: Mapping[str, Any], selected: Sequence[Mapping[str, Any]],
                     now: float) -> dict[str, str]:
    """The ``disruptedPods`` entries of pods that still exist, are not yet terminating and were granted
    less than :data:`DELETION_TIMEOUT` ago."""
    if not disrupted:
        return {}
    out: dict[str, str] = {}
    for p in selected:
        name = interface.name_of(p)
        stamp = disrupted.get(name)
        if stamp is None or interface.is_terminating(p):
            continue
        try:
            granted_at = clock_mod.parse_rfc3339(str(stamp))
        except ValueError:
            continue
        if granted_at + DELETION_TIMEOUT > now:
            out[name] = str(stamp)
    return out


def recheck_after(status: Mapping[str, Any], now: float) -> float | None:
    """Seconds until the oldest ``disruptedPods`` entry expires (the controller syncs again then)."""
    times = []
    for stamp in (status.get("disruptedPods") or {}).values():
        try:
            times.append(clock_mod.parse_rfc3339(str(stamp)) + DELETION_TIMEOUT - now)
        except ValueError:
            continue
    return max(0.0, min(times)) if times else None


def _allowed_condition(allowed: int, now: float, old: Mapping[str, Any]) -> dict[str, Any]:
    if allowed > 0:
        return _condition(True, "SufficientPods", "", now, old)
    return _condition(False, "InsufficientPods", "", now, old)


def _condition(ok: bool, reason: str, message: str, now: float, old: Mapping[str, Any]) -> dict[str, Any]:
    status = "True" if ok else "False"
    before = next((c for c in old.get("conditions") or () if c.get("type") == DISRUPTION_ALLOWED), None)
    since = before.get("lastTransitionTime") if before and before.get("status") == status else None
    return {"type": DISRUPTION_ALLOWED, "status": status, "reason": reason, "message": message,
            "observedGeneration": int(old.get("observedGeneration") or 0),
            "lastTransitionTime": since or clock_mod.rfc3339(now)}


# ------------------------------------------------------------------------------- the eviction API


def matching_budgets(pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [b for b in pdbs if selects(b, pod)]


def check_eviction(pod: Mapping[str, Any], pdbs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Whether ``pod`` may be evicted now, by the budgets' status (the API server's rules, module
    docstring): the budget whose status the eviction spends (:func:`granted`), ``None`` when none is
    spent; raises TooManyRequests / InternalError when refused."""
    phase = (pod.get("status") or {}).get("phase")
    if interface.is_terminating(pod) or phase != "Running":
        return None
    matching = matching_budgets(pod, pdbs)
    if not matching:
        return None
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
    status = pdb.get("status") or {}
    if not is_healthy(pod):
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return None
        desired = int(status.get("desiredHealthy") or 0)
        if desired > 0 and int(status.get("currentHealthy") or 0) >= desired:
            return None
    generation = int((pdb.get("metadata") or {}).get("generation") or 1)
    if int(status.get("observedGeneration") or 0) < generation:
        raise errors.TooManyRequests(
            f"Cannot evict pod as it would violate the pod's disruption budget: the disruption budget "
            f"{_name(pdb)} is still being processed by the server.",
            kind=kind, name=name, namespace=namespace)
    if int(status.get("disruptionsAllowed") or 0) <= 0:
        raise errors.TooManyRequests(
            f"Cannot evict pod as it would violate the pod's disruption budget: the disruption budget "
            f"{_name(pdb)} needs {int(status.get('desiredHealthy') or 0)} healthy pods and has "
            f"{int(status.get('currentHealthy') or 0)} currently.",
            kind=kind, name=name, namespace=namespace)
    return pdb


def granted(pdb: Mapping[str, Any], pod_name: str, now: float) -> dict[str, Any]:
    """``pdb``'s status after the API server granted the eviction of ``pod_name`` at ``now``: one
    disruption fewer, the pod in ``disruptedPods`` until the controller sees it deleted."""
    status = dict(pdb.get("status") or {})
    status["disruptionsAllowed"] = max(0, int(status.get("disruptionsAllowed") or 0) - 1)
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: clock_mod.rfc3339(now)}
    if status["disruptionsAllowed"] == 0:
        status["conditions"] = [_allowed_condition(0, now, status)]
    return status


# ------------------------------------------------------------------- graceful pod deletion

DEFAULT_POD_GRACE_SECONDS = 30


def grace_period(obj: dict[str, Any], requested: int | None = None) -> int | None:
    """The grace period a deleted pod gets under ``graceful_pods``; None: removed at once.

    ``requested`` is the delete's ``gracePeriodSeconds`` (it overrides the pod's own)."""
    if obj.get("kind") != "Pod" or not (obj.get("spec") or {}).get("nodeName") or \
            (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds") if requested is None else requested
    seconds = DEFAULT_POD_GRACE_SECONDS if grace is None else int(grace)
    return seconds if seconds > 0 else None


def in_grace(obj: dict[str, Any]) -> bool:
    """A terminating pod its kubelet has not yet confirmed stopped (a terminal phase)."""
    return obj.get("kind") == "Pod" and bool(obj["metadata"].get("deletionGracePeriodSeconds")) and \
        (obj.get("status") or {}).get("phase") not in TERMINAL_PHASES
