"""What the simulated workload controllers share about the objects they own: generated names,
owner references, pods from templates, template hashes, status writes and the scale-down order.

Used by :mod:`karpy.simulator.workloads` (Deployments, ReplicaSets) and
:mod:`karpy.simulator.daemonsets`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import random
from collections.abc import Iterable, Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import meta
from karpy.controllers import runtime
from karpy.kube import errors, interface

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters Kubernetes uses for generated name suffixes (no vowels, no ambiguous digits)."""

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


MAX_NAME = 63
_SUFFIX = 5
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


# ---------------------------------------------------------------------------------------------
# helpers shared by the simulated workload controllers


def random_suffix(rng: random.Random, length: int = _SUFFIX) -> str:
    return "".join(rng.choice(NAME_ALPHABET) for _ in range(length))


def generate_name(base: str, rng: random.Random, taken: Iterable[str] = ()) -> str:
    """``<base>-<5 random chars>`` as ``metadata.generateName`` would give, avoiding ``taken``.

    The base is cut so the name stays within 63 characters, as the API server does. A set
    ``taken`` is read as is (not copied: a ReplicaSet creating thousands of pods passes its growing set).
    """
    used = taken if isinstance(taken, (set, frozenset)) else set(taken)
    prefix = base[: MAX_NAME - _SUFFIX - 1] + "-"
    while True:
        name = prefix + random_suffix(rng)
        if name not in used:
            return name


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true``, or None."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def controller_key(kind: str, obj: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of ``obj``'s controlling owner when it is of ``kind``, else None."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind:
        return None
    ns = obj.get("metadata", {}).get("namespace") or ""
    return f"{ns}/{ref.get('name')}" if ns else str(ref.get("name"))


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """``obj``'s controller reference points at ``owner`` (by uid when both have one, else name)."""
    ref = controller_ref(obj)
    if ref is None:
        return False
    omd = owner.get("metadata", {})
    if ref.get("kind") != owner.get("kind") or ref.get("name") != omd.get("name"):
        return False
    uid, owner_uid = ref.get("uid"), omd.get("uid")
    return not uid or not owner_uid or uid == owner_uid


def owner_mapper(kind: str) -> runtime.Mapper:
    """A watch mapper from an object to the key of its controlling owner of ``kind``."""

    def mapper(_event: str, obj: dict[str, Any]) -> Iterable[str]:
        key = controller_key(kind, obj)
        return (key,) if key else ()

    return mapper


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def is_active(pod: Mapping[str, Any]) -> bool:
    """Counts toward a controller's replicas: not being deleted and not Succeeded/Failed."""
    phase = pod.get("status", {}).get("phase", "Pending")
    return not is_deleting(pod) and phase not in ("Succeeded", "Failed")


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    for cond in pod.get("status", {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def creation_time(obj: Mapping[str, Any]) -> float:
    value = obj.get("metadata", {}).get("creationTimestamp")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return clock_mod.parse_rfc3339(value)
        except ValueError:
            return 0.0
    return 0.0


def split_key(key: str) -> tuple[str, str]:
    """``"ns/name"`` -> ``("ns", "name")``; ``"name"`` -> ``("", "name")``."""
    ns, _, name = key.rpartition("/")
    return ns, name


def spec_replicas(obj: Mapping[str, Any]) -> int:
    """``spec.replicas`` as stored (1 when unset, as Kubernetes defaults it)."""
    value = obj.get("spec", {}).get("replicas")
    return 1 if value is None else int(value)


def pod_from_template(owner: Mapping[str, Any], name: str, template: Mapping[str, Any],
                      extra_labels: Mapping[str, str] | None = None, *, copy_spec: bool = True) -> dict[str, Any]:
    """A new Pod manifest from a pod template, controlled by ``owner``. ``copy_spec=False`` shares
    the template's ``spec`` (for a manifest passed straight to ``Cluster.create``, which copies it)."""
    tmd = template.get("metadata") or {}
    labels = dict(tmd.get("labels") or {})
    labels.update(extra_labels or {})
    md: dict[str, Any] = {
        "name": name,
        "namespace": owner.get("metadata", {}).get("namespace") or meta.DEFAULT_NAMESPACE,
        "labels": labels,
        "ownerReferences": [interface.owner_reference(owner)],
    }
    if tmd.get("annotations"):
        md["annotations"] = dict(tmd["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": copy.deepcopy(dict(template.get("spec") or {})) if copy_spec else template.get("spec") or {},
        "status": {"phase": "Pending"},
    }


def delete_quietly(cluster: interface.Cluster, kind: str, name: str, namespace: str = "") -> None:
    """Delete, treating "already gone" as success."""
    with contextlib.suppress(errors.NotFound):
        cluster.delete(kind, name, namespace)


def update_status_if_changed(cluster: interface.Cluster, obj: Mapping[str, Any],
                             status: Mapping[str, Any]) -> None:
    """Write ``status`` fields when any differs from ``obj``'s (avoids endless watch loops).

    A merge patch of the status subresource: ``obj`` (which may be a shared, stored object) is not copied.
    """
    current = obj.get("status") or {}
    if all(current.get(k) == v for k, v in status.items()):
        return
    cluster.patch_status(str(obj.get("kind")), interface.name_of(obj), {"status": dict(status)},
                         interface.namespace_of(obj))


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    """A stable short hash of a pod template: FNV-1a (32 bit) of its canonical JSON, spelled in
    :data:`NAME_ALPHABET` so it is a valid label value and name part."""
    return _fnv_name(json.dumps(template, sort_keys=True, separators=(",", ":"), default=str) + str(collision_count))


@functools.lru_cache(maxsize=4096)
def _fnv_name(text: str) -> str:
    """:func:`template_hash` of a template's canonical JSON (with the collision count appended),
    kept per text: a Deployment's template is hashed again at each scale, and the byte loop is
    the cost."""
    h = 0x811C9DC5
    for byte in text.encode():
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return "".join(NAME_ALPHABET[int(d)] for d in str(h))


# ---------------------------------------------------------------------------------------------
# ReplicaSet


def deletion_rank(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """Sort key: pods that sort first are deleted first when scaling down (Kubernetes' order)."""
    md = pod.get("metadata", {})
    status = pod.get("status", {})
    try:
        cost = int((md.get("annotations") or {}).get(DELETION_COST_ANNOTATION, 0))
    except (TypeError, ValueError):
        cost = 0
    return (
        bool(pod.get("spec", {}).get("nodeName")),
        _PHASE_RANK.get(status.get("phase", "Pending"), 0),
        is_pod_ready(pod),
        cost,
        -creation_time(pod),
        md.get("name", ""),
    )
