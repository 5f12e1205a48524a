"""DaemonSet pods of one scheduling run: where they run and what they hold there.

:class:`DaemonOverhead` answers, for :class:`karpy.provisioning.placement.Placement`, what the
run's DaemonSet pods take on a node:

* on an existing node still being launched (:meth:`DaemonOverhead.add_in_flight`): the requests of
  every DaemonSet whose pod is not on the node yet but will run there, and the host ports it holds;
* on a new NodeClaim of a template (:meth:`DaemonOverhead.on_claim`, :meth:`DaemonOverhead.ports_on_claim`):
  per instance type of the template, the summed requests of the DaemonSets that would run on it
  (Karpenter's ``getDaemonOverhead``: one overhead per template and instance type), and the host
  ports of those that would run on some type of the claim.

A DaemonSet runs on a node when it tolerates the node's hard taints and its pod's strict
requirements, with *any one* of its OR'd required node affinity terms, are compatible with the
node's (Karpenter's ``isDaemonPodCompatible`` tries each term in turn). For a new NodeClaim,
well-known labels the claim does not set yet are allowed, and the instance type's own labels
(and its offerings' zones and capacity types) must intersect the term's requirements. Answers are
cached for the run and are pure functions of their arguments; the returned arrays and port
usages are shared: copy before changing them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.cloudprovider import instancetype
from karpy.provisioning import nodetable, podgroups, templates
from karpy.scheduling import hostports
from karpy.scheduling import requirements as reqs_mod
from karpy.scheduling import taints as taints_mod

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class DaemonOverhead:
    """What the run's DaemonSet pods take on existing in-flight nodes and on new NodeClaims."""

    def __init__(self, dims: list[str], tmpls: list[templates.Template], daemon_pods: Sequence[pod_mod.Pod],
                 vector: Callable[[Any], IntArray]) -> None:
        """``vector`` turns a resource list into a vector over ``dims``."""
        self.dims = dims
        self.templates = tmpls
        self.daemon_pods = list(daemon_pods)
        self.vector = vector
        self._ds: dict[tuple[int, reqs_mod.Requirements], IntArray] = {}
        self._avail: dict[tuple[int, reqs_mod.Requirements], IntArray] = {}
        self._ds_ports: dict[tuple[int, reqs_mod.Requirements], hostports.HostPortUsage | None] = {}
        self._term_reqs: dict[int, tuple[reqs_mod.Requirements, ...]] = {}
        self._types: dict[tuple[int, reqs_mod.Requirements], BoolArray] = {}

    def add_in_flight(self, table: nodetable.NodeTable, rows: list[int], idx: IntArray, used: IntArray
                      ) -> list[tuple[int, hostports.HostPortUsage]]:
        """Add to ``used`` (per bin, rows ``rows`` of ``table``) the DaemonSet pods that will come to
        the in-flight nodes; returns the bins whose host ports these pods hold, with their usage."""
        nodes = [table.node[i] for i in rows]
        ports: list[tuple[int, hostports.HostPortUsage]] = []
        # whether a DaemonSet runs on a node depends on its class (labels but the hostname) and
        # taints, unless the DaemonSet's pod names hostnames
        by_host = [any(wk.HOSTNAME in r for r in term_requirements(d)) for d in self.daemon_pods]
        ds_vectors = [self.vector(d.requests) for d in self.daemon_pods]
        fits_memo: dict[tuple[int, int, int], bool] = {}
        for b in np.flatnonzero(table.in_flight[idx]):  # DaemonSet pods that will come count as used
            bi = int(b)
            i = rows[bi]
            node = nodes[bi]
            assert node is not None
            present = {p.metadata.controller.name for p in node.pods
                       if p.is_daemonset_pod and p.metadata.controller is not None}
            taints = table.taintsets.values[int(table.taint[i])]
            usage: hostports.HostPortUsage | None = None
            for k, d in enumerate(self.daemon_pods):
                owner = d.metadata.controller
                if owner is not None and owner.name in present:
                    continue
                fkey = (k, int(table.cls[i]), int(table.taint[i]))
                fits = None if by_host[k] else fits_memo.get(fkey)
                if fits is None:
                    fits = daemon_fits(d, table.requirements(i), taints, node=True)
                    if not by_host[k]:
                        fits_memo[fkey] = fits
                if fits:
                    used[bi] += ds_vectors[k]
                    if d.host_ports():
                        held = table.ports[i]
                        usage = usage or (held.copy() if held is not None else hostports.HostPortUsage())
                        usage.add(daemon_key(d), [hostports.host_port(*hp) for hp in d.host_ports()])
            if usage is not None:
                ports.append((bi, usage))
        return ports

    def on_claim(self, tmpl_index: int, reqs: reqs_mod.Requirements) -> IntArray:
        """Per instance type of template ``tmpl_index`` (rows, as its table's), the summed requests
        of the DaemonSets that would run on a new NodeClaim of that type with requirements ``reqs``."""
        key = (tmpl_index, reqs)
        hit = self._ds.get(key)
        if hit is None:
            tmpl = self.templates[tmpl_index]
            hit = np.zeros((len(tmpl.table), len(self.dims)), dtype=np.int64)
            for k, d in enumerate(self.daemon_pods):
                if untolerated(d.tolerations, tmpl.taints, prefer_ok=True) is not None:
                    continue
                types = np.zeros(len(tmpl.table), dtype=np.bool_)
                for r in self._terms(k):
                    if reqs.compatible(r, wk.WELL_KNOWN_LABELS) is None:
                        types |= self._type_mask(tmpl.table, r)
                if types.any():
                    hit[types] += self.vector(d.requests)
            self._ds[key] = hit
        return hit

    def available(self, tmpl_index: int, reqs: reqs_mod.Requirements) -> IntArray:
        """Per instance type of the template, its allocatable less :meth:`on_claim` (shared, read-only)."""
        key = (tmpl_index, reqs)
        hit = self._avail.get(key)
        if hit is None:
            hit = self._avail[key] = self.templates[tmpl_index].table.alloc - self.on_claim(tmpl_index, reqs)
            hit.flags.writeable = False
        return hit

    def _terms(self, k: int) -> tuple[reqs_mod.Requirements, ...]:
        hit = self._term_reqs.get(k)
        if hit is None:
            hit = self._term_reqs[k] = term_requirements(self.daemon_pods[k])
        return hit

    def _type_mask(self, table: templates.TypeTable, r: reqs_mod.Requirements) -> BoolArray:
        """Which instance types of ``table`` intersect ``r`` (their labels, offerings' zones and
        capacity types; keys a type does not define are not checked: Karpenter's ``Intersects``)."""
        key = (id(table), r)
        hit = self._types.get(key)
        if hit is None:
            keys = [k for k in r if k in table.label_keys or k in (wk.ZONE, wk.CAPACITY_TYPE)]
            hit = np.fromiter((_type_intersects(t, r, keys) for t in table.types), dtype=np.bool_,
                              count=len(table.types)) if keys else np.ones(len(table.types), dtype=np.bool_)
            self._types[key] = hit
        return hit

    def ports_on_claim(self, tmpl_index: int, reqs: reqs_mod.Requirements) -> hostports.HostPortUsage | None:
        """Host ports the DaemonSets that would run on a new NodeClaim hold there, or None when
        they hold none. Shared: copy before adding to it."""
        key = (tmpl_index, reqs)
        if key in self._ds_ports:
            return self._ds_ports[key]
        tmpl = self.templates[tmpl_index]
        usage: hostports.HostPortUsage | None = None
        for d in self.daemon_pods:
            ports = d.host_ports()
            if ports and daemon_fits(d, reqs, tmpl.taints, node=False):
                usage = usage or hostports.HostPortUsage()
                usage.add(daemon_key(d), [hostports.host_port(*hp) for hp in ports])
        self._ds_ports[key] = usage
        return usage


def untolerated(tolerations: Sequence[Any], taints: Sequence[Any], *, prefer_ok: bool) -> Any:
    """The first taint of ``taints`` not tolerated (``PreferNoSchedule`` ones count unless
    ``prefer_ok``), or None."""
    effects = ("NoSchedule", "NoExecute") if prefer_ok else ("NoSchedule", "NoExecute", "PreferNoSchedule")
    return taints_mod.first_untolerated(tolerations, taints, effects)


def term_requirements(dpod: pod_mod.Pod) -> tuple[reqs_mod.Requirements, ...]:
    """A DaemonSet pod's strict requirements with each of its OR'd required node affinity terms."""
    return podgroups.make_group([dpod]).strict_requirements_per_term()


def daemon_fits(dpod: pod_mod.Pod, reqs: reqs_mod.Requirements, taints: Sequence[Any], *,
                node: bool) -> bool:
    """Does DaemonSet pod ``dpod`` run on a node (``node``) or new NodeClaim with ``reqs`` and
    ``taints``? It must tolerate the taints and one of its OR'd node affinity terms must hold."""
    if untolerated(dpod.tolerations, taints, prefer_ok=True) is not None:
        return False
    allow = frozenset() if node else wk.WELL_KNOWN_LABELS
    return any(reqs.compatible(r, allow) is None for r in term_requirements(dpod))


def _type_intersects(t: instancetype.InstanceType, r: reqs_mod.Requirements, keys: Sequence[str]) -> bool:
    for key in keys:
        want = r[key]
        value = t.labels.get(key)
        if value is not None:
            if not want.has(value):
                return False
        elif key == wk.ZONE:
            if not any(want.has(z) for z in t.zones):
                return False
        elif key == wk.CAPACITY_TYPE and not any(want.has(c) for c in t.capacity_types):
            return False
    return True


def daemon_key(d: pod_mod.Pod) -> str:
    """The owner a DaemonSet pod's host ports are held for."""
    owner = d.metadata.controller
    return f"DaemonSet {d.namespace}/{owner.name if owner is not None else d.name}"
