"""Object helpers of the in-memory cluster: JSON-like copies, merge patches, write preconditions.

:func:`copy_obj` / :func:`copy_dict` deep-copy JSON-like data (dicts, lists, scalars) much faster
than ``copy.deepcopy``; :func:`merge_patch` is RFC 7386 and leaves its arguments unchanged;
:func:`check_preconditions` and :func:`restore_server_fields` are what
:class:`karpy.kube.memory.InMemoryCluster` applies to every update (optimistic concurrency,
server-managed metadata, no new finalizers on a terminating object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.kube import errors, interface

SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


def copy_obj(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars); much faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: copy_obj(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_obj(v) for v in value]
    return value


def copy_dict(obj: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`copy_obj` of one object, typed."""
    return {k: copy_obj(v) for k, v in obj.items()}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value and leaves both arguments unchanged."""
    if not isinstance(patch, dict):
        return copy_obj(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def check_preconditions(old: dict[str, Any], meta: Any) -> None:
    """A write's ``resourceVersion`` / ``uid`` preconditions against the stored ``old``; raises Conflict."""
    kind, ns, name = interface.meta_key(old)
    rv = meta.get("resourceVersion")
    if rv not in (None, "") and str(rv) != old["metadata"]["resourceVersion"]:
        raise errors.Conflict(
            f'Operation cannot be fulfilled on {kind} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            kind=kind,
            name=name,
            namespace=ns,
        )
    uid = meta.get("uid")
    if uid not in (None, "") and uid != old["metadata"]["uid"]:
        raise errors.Conflict(
            f'Precondition failed for {kind} "{name}": uid {uid} is not {old["metadata"]["uid"]}',
            kind=kind,
            name=name,
            namespace=ns,
        )


def restore_server_fields(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Server-managed metadata and status come from the stored version, not the request."""
    meta, old_meta = new["metadata"], old["metadata"]
    meta["name"] = old_meta["name"]
    if "namespace" in old_meta:
        meta["namespace"] = old_meta["namespace"]
    else:
        meta.pop("namespace", None)
    for field in SERVER_META:
        if field in old_meta:
            meta[field] = old_meta[field]
        else:
            meta.pop(field, None)
    if "status" in old:
        new["status"] = old["status"]
    else:
        new.pop("status", None)
    if interface.is_terminating(old):
        before = set(old_meta.get("finalizers") or ())
        added = [f for f in meta.get("finalizers") or () if f not in before]
        if added:
            raise errors.Invalid(
                f"{old['kind']} {old_meta['name']!r}: metadata.finalizers: Forbidden: no new finalizers "
                f"can be added if the object is being deleted, found new finalizers {added}"
            )
