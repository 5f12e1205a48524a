"""Whether an object an informer decoded can be cached, and how one that cannot is described.

The informer's page path (:meth:`karpy.kube.informer.Informer.read_page`) and watch path keep
only objects every reader can rely on: a mapping with a ``metadata`` mapping, a non-empty string
``metadata.name``, string ``namespace`` / ``resourceVersion`` / ``uid``, label and annotation
maps of strings, and for Pods ``spec`` / ``status`` mappings with lists of objects as
containers, init containers and volumes (the shapes :mod:`karpy.kube.fastdecode` enforces, so
both decoders accept the same Pods). :func:`problem` says what is wrong (naming the field);
:func:`rejected` describes the object as well as it can be read; :func:`decode_page` splits a list
body into its metadata, its items and the items the typed Pod decoder refused. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import orjson

from karpy.kube import client as client_mod
from karpy.kube import errors, fastdecode


def decode_page(
    body: bytes, kind: str, *, typed_pods: bool
) -> tuple[dict[str, Any], list[Any], list[fastdecode.Rejected]]:
    """``(list metadata, items, items refused by the typed decoder)``; only a body that is not a list
    object at all raises (:class:`karpy.kube.errors.InternalError`)."""
    try:
        if typed_pods:
            meta, pods, refused = fastdecode.decode_pod_page(body)
            return meta, list(pods), refused
        data = orjson.loads(body)
    except (fastdecode.DecodeError, orjson.JSONDecodeError) as exc:
        raise errors.InternalError(f"LIST {kind}: undecodable answer {client_mod.truncate(body)}", kind=kind) from exc
    raw_meta = data.get("metadata") or {} if isinstance(data, dict) else None
    raw_items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(raw_meta, dict) or not isinstance(raw_items, (list, type(None))):
        raise errors.InternalError(f"LIST {kind}: expected a list object, found {client_mod.truncate(body)}",
                                   kind=kind)
    return raw_meta, list(raw_items or ()), []


def problem(obj: Any, kind: str) -> str:
    """Why ``obj`` cannot be cached (``""`` when it can): the shape every reader relies on."""
    if not isinstance(obj, dict):
        return f"expected an object, found {type(obj).__name__}"
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return f"metadata: expected an object, found {type(meta).__name__}"
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return f"metadata.name: expected a non-empty string, found {name!r:.60}"
    for field in ("namespace", "resourceVersion", "uid"):
        value = meta.get(field)
        if value is not None and not isinstance(value, str):
            return f"metadata.{field}: expected a string, found {type(value).__name__}"
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is not None and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            return f"metadata.{field}: expected a map of strings"
    if kind == "Pod":
        for section in ("spec", "status"):
            value = obj.get(section, {})
            if not isinstance(value, dict):
                return f"{section}: expected an object, found {type(value).__name__}"
        spec = obj.get("spec") or {}
        for field in ("containers", "initContainers", "volumes"):  # the typed decoder's shapes too
            value = spec.get(field)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
                return f"spec.{field}: expected a list of objects"
    return ""


def rejected(obj: Any, reason: str) -> fastdecode.Rejected:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}

    def text(key: str) -> str:
        value = meta.get(key)
        return value if isinstance(value, str) else ""

    return fastdecode.Rejected(text("namespace"), text("name"), text("resourceVersion"), reason)


def node_name(pod: dict[str, Any]) -> str:
    """A Pod's ``spec.nodeName`` (``""`` when unbound or not a string)."""
    spec = pod.get("spec")
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    return node if isinstance(node, str) else ""
