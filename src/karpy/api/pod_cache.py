"""The parse caches behind :class:`karpy.api.pod.Pod`: equal specs are parsed once, equal conditions shared.

A large cluster holds many pods of one workload: their specs are equal (and, in the in-memory
store, often the very same objects), and pods started together have equal conditions. The
:class:`~karpy.api.pod.Pod` parsers look here before parsing again.

A caller may rely on: every value handed out is a frozen model (or a mapping that must be treated
as read-only), equal to what a fresh parse would give, so sharing it changes no result. The caches
are bounded (:data:`SPEC_CACHE_SIZE` entries per spec cache, four times that for conditions); a
full cache is emptied and refilled, which only costs parsing again. :func:`read_status` is how
every Pod parser reads ``status``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from karpy import clock
from karpy.api import fields, podspec, quantity, stored

SPEC_CACHE_SIZE = 4096
"""Entries kept by each spec cache before it starts afresh."""

SPEC_FIELDS = ("scheduler_name", "priority", "priority_class_name", "containers", "init_containers", "overhead",
               "node_selector", "node_affinity", "pod_affinity", "pod_anti_affinity", "tolerations",
               "topology_spread_constraints", "volumes", "preemption_policy", "restart_policy", "host_network",
               "termination_grace_period_seconds", "resources", "resource_claims")
"""The :class:`karpy.api.pod.Pod` fields read from the spec, but ``node_name``."""
SPEC_FIELD_SET = frozenset(SPEC_FIELDS)

StoredKey = tuple[tuple[str, ...], tuple[int, ...]]
"""A stored spec's entry names (but ``nodeName``) and the ids of their values."""
StoredSpec = tuple[tuple[Any, ...], dict[str, Any], quantity.ResourceList]
"""(the spec's entries, kept alive so that their ids stay theirs; the parsed spec fields; the
request of the first pod parsed from them, which the others share)."""

_SPEC_CACHE: dict[str, dict[str, Any]] = {}
"""Parsed spec fields (everything but ``nodeName``) by the spec's canonical JSON: replicas of one
workload share one parse. The values are frozen models, safe to share."""

_STORED_SPECS: dict[StoredKey, StoredSpec] = {}
""":meth:`karpy.api.pod.Pod.from_stored`'s parses by the identity of a spec's entries."""

_CONDITIONS: dict[tuple[Any, ...], podspec.PodCondition] = {}
"""Parsed pod conditions by their fields' text: equal conditions share one model (pods that started
at the same time have equal conditions)."""
_CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")
_TEXT = (str, type(None))


def spec_key(spec: Mapping[str, Any]) -> str | None:
    """The cache key of a spec: its canonical JSON without ``nodeName`` (``None``: not JSON data)."""
    try:
        return json.dumps({k: v for k, v in spec.items() if k != "nodeName"}, sort_keys=True,
                          separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def cached_spec(key: str | None) -> dict[str, Any] | None:
    """The parsed spec fields remembered under ``key`` (from :func:`spec_key`), or None."""
    return _SPEC_CACHE.get(key) if key is not None else None


def remember_spec(key: str | None, parsed: dict[str, Any]) -> None:
    """Remember the parsed spec fields of the spec whose :func:`spec_key` is ``key`` (None: don't)."""
    if key is not None:
        if len(_SPEC_CACHE) >= SPEC_CACHE_SIZE:
            _SPEC_CACHE.clear()
        _SPEC_CACHE[key] = parsed


def stored_key(spec: dict[str, Any]) -> tuple[StoredKey, tuple[Any, ...]]:
    """``(key, values)`` of a stored spec: its entries but ``nodeName``, by name and identity."""
    names = tuple(k for k in spec if k != "nodeName")
    values = tuple(spec[k] for k in names)
    return (names, tuple(map(id, values))), values


def stored_spec(key: StoredKey) -> StoredSpec | None:
    """What :func:`remember_stored` kept under ``key`` (the entry keeps the values alive: equal ids
    are the same objects), or None."""
    return _STORED_SPECS.get(key)


_SPEC_DICTS: stored.ByIdentity[StoredSpec] = stored.ByIdentity(SPEC_CACHE_SIZE)
"""What :func:`stored_spec` answered for a stored spec dict, by the dict's identity: replicas of one
template that are not bound yet hold the very same spec dict."""


def stored_spec_of(spec: dict[str, Any], parse: Callable[[StoredKey, tuple[Any, ...]], StoredSpec]) -> StoredSpec:
    """The parse of stored ``spec`` (all but ``nodeName``): by the dict's identity, else by its
    entries' (:func:`stored_key`), else ``parse(key, values)``, remembered under both."""
    def by_entries() -> StoredSpec:
        key, values = stored_key(spec)
        hit = stored_spec(key)
        if hit is None:
            hit = parse(key, values)
            remember_stored(key, hit)
        return hit

    return _SPEC_DICTS.get(spec, by_entries)


def remember_stored(key: StoredKey, hit: StoredSpec) -> None:
    """Remember a stored spec's parse under ``key`` (from :func:`stored_key`)."""
    if len(_STORED_SPECS) >= SPEC_CACHE_SIZE:
        _STORED_SPECS.clear()
    _STORED_SPECS[key] = hit


_STORED_CONDITIONS: stored.ByIdentity[tuple[podspec.PodCondition, ...]] = stored.ByIdentity(4 * SPEC_CACHE_SIZE)
"""Parsed condition lists of stored pods by the list's identity: the store keeps one list for equal
lists (pods started together), and a write that leaves the conditions alone keeps the list."""


def read_status(status: fields.Fields, *, shared: bool = False) -> tuple[str, tuple[podspec.PodCondition, ...]]:
    """``(phase, conditions)`` of a pod's ``status`` mapping, as :meth:`Pod.from_manifest` reads them.
    ``shared``: a stored status (never changed in place), whose condition list is read once."""
    phase = status.str("phase", "Pending") or "Pending"
    raw = status.data.get("conditions")
    if not raw or type(raw) is not list:
        return phase, tuple(podspec.PodCondition.parse(c) for c in status.items("conditions"))
    if shared:
        return phase, _STORED_CONDITIONS.get(raw, lambda: _conditions(status, raw))
    return phase, _conditions(status, raw)


def read_start_time(status: fields.Fields) -> float | None:
    """``status.startTime`` (when the kubelet accepted the pod), epoch seconds; None when unset or
    not a timestamp."""
    raw = status.data.get("startTime")
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return clock.parse_rfc3339(raw)
    except ValueError:
        return None


def _conditions(status: fields.Fields, raw: list[Any]) -> tuple[podspec.PodCondition, ...]:
    if len(_CONDITIONS) >= 4 * SPEC_CACHE_SIZE:
        _CONDITIONS.clear()
    out: list[podspec.PodCondition] = []
    for i, c in enumerate(raw):
        key = tuple(map(c.get, _CONDITION_KEYS)) if type(c) is dict else None  # all a condition reads
        if key is None or not all(type(v) in _TEXT for v in key):
            out.append(podspec.PodCondition.parse(fields.Fields(c, status.obj, f"{status.at('conditions')}[{i}]")))
            continue
        found = _CONDITIONS.get(key)
        if found is None:
            found = podspec.PodCondition.parse(fields.Fields(c, status.obj, f"{status.at('conditions')}[{i}]"))
            _CONDITIONS[key] = found
        out.append(found)
    return tuple(out)
