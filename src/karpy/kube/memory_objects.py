"""Object helpers of the in-memory cluster: JSON-like copies, merge patches, write preconditions.

:func:`copy_obj` / :func:`copy_dict` deep-copy JSON-like data (dicts, lists, scalars) much faster
than ``copy.deepcopy``; :func:`merge_patch` is RFC 7386 and leaves its arguments unchanged;
:func:`check_preconditions` and :func:`restore_server_fields` are what
:class:`karpy.kube.memory.InMemoryCluster` applies to every update (optimistic concurrency,
server-managed metadata, no new finalizers on a terminating object). :class:`Seals` is its
``check_shared`` mode: a private copy of every stored object, compared whenever the store meets
the object again, to catch callers that change shared objects in place.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.kube import errors, interface

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_obj(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars); much faster than ``copy.deepcopy``.

    Dicts and lists (and their subclasses) become new plain dicts and lists; anything else is shared.
    """
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else copy_obj(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _SCALARS else copy_obj(v) for v in value]
    return value


def copy_dict(obj: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`copy_obj` of one object, typed."""
    return {k: v if type(v) in _SCALARS else copy_obj(v) for k, v in obj.items()}


def copy_all(objs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Deep copies of ``objs`` that keep the sharing among them: a dict or list several of them hold
    (pods of one template share a ``spec``) is copied once, and the copies share it."""
    memo: dict[int, Any] = {}

    def copy(value: Any) -> Any:
        if type(value) in _SCALARS:
            return value
        hit = memo.get(id(value))
        if hit is not None:
            return hit
        if isinstance(value, dict):
            out: Any = {k: copy(v) for k, v in value.items()}
        elif isinstance(value, list):
            out = [copy(v) for v in value]
        else:
            return value
        memo[id(value)] = out
        return out

    kept = list(objs)  # alive while copying: ids stay unique
    return [copy(o) for o in kept]


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


def new_object(obj: Any, specs: dict[str, Any] | None = None) -> tuple[dict[str, Any], str, str]:
    """A private copy of an object to create, with its apiVersion and namespace filled in:
    ``(copy, kind, namespace)``; ``Invalid`` without a kind or metadata.

    ``specs`` (controller uid -> the stored ``spec`` of the last Pod created for it): a Pod whose
    spec equals its controller's last one shares that stored dict instead of a copy (replicas of
    one template hold one spec; the store never changes a stored dict in place).
    """
    if not isinstance(obj, dict) or not obj.get("kind"):
        raise errors.Invalid("an object needs a kind")
    kind = str(obj["kind"])
    owner = _controller_uid(obj) if specs is not None and kind == "Pod" else ""
    shared = specs.get(owner) if specs is not None and owner else None
    if shared is not None and obj.get("spec") == shared:
        new = {k: shared if k == "spec" else copy_obj(v) for k, v in obj.items()}
    else:
        new = copy_dict(obj)
        if specs is not None and owner and isinstance(new.get("spec"), dict):
            specs[owner] = new["spec"]
    meta = new.get("metadata")
    if not isinstance(meta, dict):
        raise errors.Invalid(f"{kind}: an object needs a metadata mapping", kind=kind)
    info = interface.kind_info(kind)
    if not new.get("apiVersion"):
        if info is None:
            raise errors.Invalid(f"{kind}: apiVersion is required for a custom kind", kind=kind)
        new["apiVersion"] = info.api_version
    ns = interface.scoped_namespace(kind, meta.get("namespace"))
    if ns:
        meta["namespace"] = ns
    else:
        meta.pop("namespace", None)
    return new, kind, ns


def _controller_uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    for ref in (meta.get("ownerReferences") or ()) if isinstance(meta, dict) else ():
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def check_new_name(kind: str, meta: dict[str, Any]) -> str:
    """The name of an object to create, after checking it and its ownerReferences (``Invalid``)."""
    name = meta["name"]
    if not isinstance(name, str) or len(name) > 253 or not _NAME_RE.match(name):
        raise errors.Invalid(
            f"{kind}: metadata.name {name!r} must be a lowercase RFC 1123 subdomain",
            kind=kind,
            name=str(name),
        )
    refs = meta.get("ownerReferences") or []
    if any(not r.get("uid") or not r.get("name") or not r.get("kind") for r in refs):
        raise errors.Invalid(f"{kind} {name!r}: every ownerReference needs kind, name and uid", kind=kind)
    if sum(1 for r in refs if r.get("controller")) > 1:
        raise errors.Invalid(f"{kind} {name!r}: only one ownerReference can be a controller", kind=kind)
    return name


def uuid4_text(bits: int) -> str:
    """``str(uuid.UUID(int=bits, version=4))`` without building a UUID object."""
    value = (bits & ~(0xC000 << 48)) | (0x8000 << 48)
    value = (value & ~(0xF000 << 64)) | (4 << 76)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def stamp_new(new: dict[str, Any], uid: uuid.UUID | str, now: str) -> None:
    """Server fields of a new object: uid, creationTimestamp, generation 1, a Pod's Pending phase."""
    meta = new["metadata"]
    for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
        meta.pop(field, None)
    meta["uid"] = str(uid)
    meta["creationTimestamp"] = now
    meta["generation"] = 1
    kind = new["kind"]
    if kind == "Pod" and not new.get("status"):
        new["status"] = {"phase": "Pending"}
    elif kind == "Namespace" and not new.get("status"):
        new["status"] = {"phase": "Active"}


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


class SharedObjectMutatedError(AssertionError):
    """A caller changed a stored (shared, read-only) object, or passed one back to a write: copy first."""


class Seals:
    """Private copies of stored objects, to catch in-place changes (a no-op when not ``enabled``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._sealed: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    def seal(self, stored: dict[str, Any]) -> None:
        """``stored`` was just committed: remember its content."""
        if self.enabled:
            self._sealed[id(stored)] = (stored, copy_dict(stored))

    def check(self, stored: dict[str, Any]) -> dict[str, Any]:
        """``stored`` itself, after checking it still has the content it was committed with."""
        if self.enabled:
            sealed = self._sealed.get(id(stored))
            if sealed is not None and sealed[0] is stored and sealed[1] != stored:
                kind, ns, name = interface.meta_key(sealed[1])
                raise SharedObjectMutatedError(
                    f"{kind} {ns}/{name}: a stored object (returned by a write, list() or a watch) was "
                    "changed in place; copy it before changing it")
        return stored

    def unseal(self, stored: dict[str, Any]) -> None:
        """``stored`` is replaced or removed: check it one last time and forget it."""
        if self.enabled:
            self.check(stored)
            self._sealed.pop(id(stored), None)

    def verify(self) -> None:
        """Check every stored object."""
        for stored, _ in list(self._sealed.values()):
            self.check(stored)


def bound_pod(old: dict[str, Any], node_name: str, now: str) -> dict[str, Any]:
    """What the ``pods/binding`` subresource writes: ``old`` with ``spec.nodeName`` and a
    ``PodScheduled=True`` condition (first, replacing any other, its ``lastTransitionTime`` ``now``).
    Raises Conflict, as the API server does, if the pod is already bound or being deleted."""
    name, namespace = old["metadata"].get("name", ""), old["metadata"].get("namespace", "")
    bound = (old.get("spec") or {}).get("nodeName")
    if bound:
        raise errors.Conflict(f'pod {name} is already assigned to node "{bound}"',
                              kind="Pod", name=name, namespace=namespace)
    if interface.is_terminating(old):
        raise errors.Conflict(f"pod {name} is being deleted, cannot be assigned to a host",
                              kind="Pod", name=name, namespace=namespace)
    new = dict(old)
    new["metadata"] = dict(old["metadata"])
    new["spec"] = {**(old.get("spec") or {}), "nodeName": node_name}
    status = dict(old.get("status") or {})
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
    status["conditions"] = [scheduled, *(c for c in status.get("conditions") or ()
                                         if c.get("type") != "PodScheduled")]
    new["status"] = status
    return new
