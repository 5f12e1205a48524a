"""The simulated kube-scheduler's account of why a pod fits nowhere: ``0/N nodes are available: ...``.

:class:`Explainer` builds kube-scheduler's message for a pending pod from the nodes and the pods
bound to them: per node, the first failing filter in kube-scheduler's order (unschedulable,
untolerated taint - a not-Ready node counts as tainted ``node.kubernetes.io/not-ready`` - node
affinity/selector or a volume's node affinity, host ports, resources, topology spread, pod
anti-affinity, pod affinity), counts summed and sorted; identical pods share one computed message.
:func:`volume_message` is the text for a pod its volumes keep off every node; :func:`usage` is
what is left of a node once its pods run. Pure: nothing here reads or writes the cluster.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from karpy.api import labels, node, pod
from karpy.provisioning import podgroups
from karpy.scheduling import requirements, taints, volumetopology

NOT_READY_TAINT = node.Taint(key=labels.TAINT_NOT_READY, effect="NoSchedule")


def _taint_text(t: Any) -> str:
    return "{" + f"{t.key}: {t.value}" + "}"


def volume_message(reason: str, nodes: int) -> str:
    """kube-scheduler's text for a pod its volumes keep off every node."""
    if volumetopology.UNBOUND_IMMEDIATE in reason:
        return f"0/{nodes} nodes are available: {volumetopology.UNBOUND_IMMEDIATE}."
    return f"0/{nodes} nodes are available: {reason}."


Port = tuple[str, str, int]


def usage(n: node.Node, pods: Iterable[pod.Pod]) -> tuple[dict[str, int], set[Port]]:
    """What is left of ``n``'s allocatable once ``pods`` run on it, and the host ports they use."""
    free = dict(n.allocatable)
    ports: set[Port] = set()
    for p in pods:
        for k, v in p.requests.items():
            free[k] = free.get(k, 0) - v
        ports.update(p.host_ports())
    return free, ports


def signature(p: pod.Pod) -> Hashable:
    """What kube-scheduler's filters read of ``p`` besides its name and labels: pods with equal
    signatures get the same message on the same nodes."""
    return (p.namespace, tuple(sorted(p.requests.items())), p.tolerations, tuple(sorted(p.node_selector.items())),
            repr(p.node_affinity), repr(p.pod_affinity), repr(p.pod_anti_affinity),
            p.topology_spread_constraints, p.host_ports())


class Explainer:
    """kube-scheduler's ``0/N nodes are available: ...`` message for pods that fit nowhere."""

    def __init__(self, nodes: Sequence[node.Node], by_node: Mapping[str, Sequence[pod.Pod]],
                 node_reqs: Callable[[node.Node], requirements.Requirements],
                 usage_of: Callable[[node.Node, Sequence[pod.Pod]], tuple[dict[str, int], set[Port]]] | None = None
                 ) -> None:
        self.nodes = nodes
        self.free: dict[str, dict[str, int]] = {}
        self.ports: dict[str, set[Port]] = {}
        self._node_reqs = node_reqs
        self.reqs: dict[str, requirements.Requirements] = {}
        """Node -> its labels as requirements, filled as a message needs them."""
        for n in nodes:
            self.free[n.name], self.ports[n.name] = (usage_of or usage)(n, by_node.get(n.name, ()))
        self._cache: dict[Any, tuple[str, frozenset[str]]] = {}
        self._own_reqs: requirements.Requirements | None = None

    def message(self, p: pod.Pod, without_volumes: pod.Pod | None = None) -> str:
        """``without_volumes``: the pod before its volume topology was folded into its affinity
        (nodes only the volumes rule out are counted as ``had volume node affinity conflict``)."""
        return self.explain(p, without_volumes)[0]

    def explain(self, p: pod.Pod, without_volumes: pod.Pod | None = None,
                sig: Hashable | None = None) -> tuple[str, frozenset[str]]:
        """:meth:`message` and the distinct per-node reasons behind it (none when there are no
        nodes). ``sig``: :func:`signature` of ``p`` when the caller has it."""
        if sig is None:
            sig = signature(p)
        sig = (without_volumes is not None, sig)
        hit = self._cache.get(sig)
        if hit is not None:
            return hit
        self._own_reqs = (podgroups.make_group([without_volumes]).strict_requirements()
                          if without_volumes is not None else None)
        if not self.nodes:
            out = ("no nodes available to schedule pods", frozenset[str]())
        else:
            counts: collections.Counter[str] = collections.Counter()
            greq = podgroups.make_group([p]).strict_requirements()
            for n in self.nodes:
                counts.update(self._reasons(p, n, greq))
            parts = sorted(f"{count} {reason}" for reason, count in counts.items())
            out = (f"0/{len(self.nodes)} nodes are available: {', '.join(parts)}.", frozenset(counts))
        self._cache[sig] = out
        return out

    def _reasons(self, p: pod.Pod, n: node.Node, greq: requirements.Requirements) -> Iterable[str]:
        if n.unschedulable or n.deleting:
            return ("node(s) were unschedulable",)
        node_taints: list[Any] = list(n.taints)
        if not n.ready:
            node_taints.append(NOT_READY_TAINT)
        bad = taints.first_untolerated(p.tolerations, node_taints, ("NoSchedule", "NoExecute"))
        if bad is not None:
            return (f"node(s) had untolerated taint {_taint_text(bad)}",)
        node_reqs = self.reqs.get(n.name)
        if node_reqs is None:
            node_reqs = self.reqs[n.name] = self._node_reqs(n)
        if node_reqs.compatible(greq, frozenset()) is not None:
            own = self._own_reqs
            if own is not None and node_reqs.compatible(own, frozenset()) is None:
                return ("node(s) had volume node affinity conflict",)
            return ("node(s) didn't match Pod's node affinity/selector",)
        used = self.ports[n.name]
        if any(hp in used or ("0.0.0.0", hp[1], hp[2]) in used for hp in p.host_ports()):
            return ("node(s) didn't have free ports for the requested pod ports",)
        free = self.free[n.name]
        short = sorted(k for k, v in p.requests.items() if v > 0 and v > free.get(k, 0))
        if short:
            return tuple("Too many pods" if k == "pods" else f"Insufficient {k}" for k in short)
        if p.topology_spread_constraints:
            return ("node(s) didn't match pod topology spread constraints",)
        if p.pod_anti_affinity is not None and p.pod_anti_affinity.required:
            return ("node(s) didn't match pod anti-affinity rules",)
        if p.pod_affinity is not None and p.pod_affinity.required:
            return ("node(s) didn't match pod affinity rules",)
        return ("node(s) had no room left once the other pending pods were placed",)
