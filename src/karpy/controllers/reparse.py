"""Parsing watched objects into :mod:`karpy.api` models, reusing what did not change.

:data:`PARSERS` parses each kind :class:`karpy.controllers.state.ClusterState` watches.
:func:`reparse` parses a new version of an object given the previous version and its model. A store
that never changes an object in place (the in-memory cluster; a watch that hands out new dicts)
keeps the dicts a write did not touch, so identity says "unchanged":

* the same ``spec`` dict: a Pod's spec models, a NodeClaim's spec and a Node's spec fields are
  reused; a NodeClaim's ``status`` and a Node's status fields likewise; a Pod spec that differs only
  by ``nodeName`` (a binding) keeps the rest;
* a ``metadata`` dict whose every entry but ``resourceVersion`` is the same object as before (a
  status write): the metadata model is reused with the new resourceVersion.

The result always equals a full parse of the new version (tests check it); when identity says
nothing, it is a full parse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from karpy.api import meta, workloads
from karpy.api import node as node_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import nodepool as nodepool_mod
from karpy.api import pod as pod_mod

PARSERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "Node": node_mod.Node.from_stored,
    "NodeClaim": nodeclaim_mod.NodeClaim.from_stored,
    "Pod": pod_mod.Pod.from_stored,
    "NodePool": nodepool_mod.NodePool.from_manifest,
    "DaemonSet": workloads.DaemonSet.from_manifest,
    "PodDisruptionBudget": workloads.PodDisruptionBudget.from_manifest,
}


def reparse(kind: str, obj: Mapping[str, Any], before: Mapping[str, Any], model: Any) -> Any:
    """``obj``'s model, reusing the parts of ``model`` (parsed from ``before``) whose dicts ``obj``
    still holds (see the module docstring)."""
    spec = obj.get("spec")
    if kind == "Node":  # heartbeats and condition changes: the spec (and often the metadata) is the same
        return node_mod.Node.from_stored(obj, (before, model), _same_metadata(obj, before, model.metadata))
    if kind == "Pod" and _only_node_name_changed(spec, before.get("spec")):
        f = meta.reader("Pod", obj)  # a binding: everything but spec.nodeName is the parsed spec
        metadata = _same_metadata(obj, before, model.metadata)
        phase, conditions = pod_mod.read_status(f.sub("status"), shared=True)
        return model.evolve(
            metadata=metadata if metadata is not None else meta.ObjectMeta.parse(
                f.sub("metadata"), namespaced=True, shared=True),
            node_name=f.sub("spec").str("nodeName") or None, phase=phase, conditions=conditions,
            start_time=pod_mod.read_start_time(f.sub("status")))
    if spec is None or spec is not before.get("spec"):
        return PARSERS[kind](obj)
    if kind == "Pod":
        metadata = _same_metadata(obj, before, model.metadata)
        if metadata is None:
            return model.refreshed(obj, stored=True)
        pod_status = meta.reader("Pod", obj).sub("status")
        phase, conditions = pod_mod.read_status(pod_status, shared=True)
        return model.evolve(metadata=metadata, phase=phase, conditions=conditions,
                            start_time=pod_mod.read_start_time(pod_status))
    if kind == "NodeClaim":
        f = meta.reader(nodeclaim_mod.KIND, obj)
        status = obj.get("status")
        metadata = _same_metadata(obj, before, model.metadata)
        return nodeclaim_mod.NodeClaim(
            metadata=metadata if metadata is not None else meta.ObjectMeta.parse(
                f.sub("metadata"), namespaced=False, shared=True),
            spec=model.spec,
            status=model.status if status is not None and status is before.get("status")
            else nodeclaim_mod.NodeClaimStatus.parse(f.sub("status"), shared=True))
    return PARSERS[kind](obj)


def _only_node_name_changed(spec: Any, before: Any) -> bool:
    """``spec`` is a new dict whose entries are ``before``'s own objects, but for ``nodeName``."""
    if not isinstance(spec, Mapping) or not isinstance(before, Mapping) or spec is before:
        return False
    if spec.get("nodeName") == before.get("nodeName"):
        return False
    for key, value in spec.items():
        if key != "nodeName" and before.get(key, _MISSING) is not value:
            return False
    return all(key == "nodeName" or key in spec for key in before)


def _same_metadata(obj: Mapping[str, Any], before: Mapping[str, Any], parsed: meta.ObjectMeta
                   ) -> meta.ObjectMeta | None:
    """``parsed`` with ``obj``'s resourceVersion when nothing else in the metadata changed, else None."""
    md, old = obj.get("metadata"), before.get("metadata")
    if not isinstance(md, Mapping) or not isinstance(old, Mapping) or len(md) != len(old):
        return None
    for key, value in md.items():
        if key != "resourceVersion" and old.get(key, _MISSING) is not value:
            return None
    rv = md.get("resourceVersion")
    return parsed.with_resource_version(str(rv) if rv else "")


_MISSING = object()
