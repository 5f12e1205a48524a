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

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from karpy.api import labels, node, pod
from karpy.provisioning import podgroups
from karpy.scheduling import requirements, taints, volumetopology

NOT_READY_TAINT = node.Taint(key=labels.TAINT_NOT_READY, effect="NoSchedule")


def hard_taints(n: node.Node) -> list[node.Taint]:
    """The node's taints plus ``node.kubernetes.io/not-ready:NoSchedule`` when it is not Ready (as the
    node lifecycle controller taints it)."""
    out = list(n.taints)
    if not n.ready:
        out.append(NOT_READY_TAINT)
    return out


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


Static = dict[Hashable, "tuple[str, ...] | None"]
"""Signature -> the reasons of the filters that read only the node (cordon, taints, node affinity),
``None`` when a pod of that signature passes them."""


class NodeAnswers:
    """One node's answers, kept from pass to pass: per pod facts (:meth:`NodeMemo.facts_of`), its
    reasons while ``node`` and ``pods`` stay the very same objects (or equal: a re-parse), and the
    node-only part of them (:data:`Static`), shared by every node of the same *class* (cordon,
    hard taints and labels but the hostname) - binding a pod to the node keeps that part."""

    __slots__ = ("node", "pods", "reasons", "static", "used")

    def __init__(self, n: node.Node, pods: Sequence[pod.Pod], static: Static) -> None:
        self.node = n
        self.pods = pods
        self.reasons: dict[Hashable, tuple[str, ...]] = {}
        self.static = static
        self.used: tuple[dict[str, int], set[Port]] | None = None
        """What is left of the node with ``pods`` (:func:`usage`), worked out on first need; dropped
        with :attr:`reasons`."""

    def forget(self, pods: Sequence[pod.Pod]) -> None:
        """The node now holds ``pods`` (or its resources changed): its reasons and usage are read again."""
        self.pods, self.reasons, self.used = pods, {}, None


class NodeMemo:
    """:class:`Explainer`'s per-node answers, kept by the caller from pass to pass (call
    :meth:`drop` when a node goes)."""

    MAX_CLASSES = 10_000

    def __init__(self) -> None:
        self.nodes: dict[str, NodeAnswers] = {}
        self._classes: dict[Hashable, Static] = {}
        self._facts: dict[Hashable, _PodFacts] = {}
        self._fact_ids: dict[Hashable, int] = {}

    def drop(self, name: str) -> None:
        self.nodes.pop(name, None)

    def facts_of(self, sig: Hashable, p: pod.Pod) -> _PodFacts:
        """What the filters read of a pod of signature ``sig`` (``p``), kept per signature. Its
        ``sig`` is what the answers are kept under: the facts themselves, coarser than the
        signature (pods whose constraints differ only by the pods they select, e.g. spreads over
        different labels, get the same reasons on every node)."""
        facts = self._facts.get(sig)
        if facts is None:
            if len(self._facts) >= self.MAX_CLASSES:  # the numbers stay: answers kept under them hold
                self._facts = {}
            facts = self._facts[sig] = _PodFacts(p, podgroups.make_group([p]).strict_requirements())
            key = (facts.tolerations, facts.greq, facts.host_ports, tuple(facts.needs), facts.otherwise)
            facts.sig = self._fact_ids.setdefault(key, len(self._fact_ids))  # a small number: cheap to hash
        return facts

    def static_of(self, n: node.Node) -> Static:
        """The node-only answers shared by ``n``'s class."""
        key = (n.unschedulable or n.deleting, n.ready, n.taints,
               frozenset(kv for kv in n.labels.items() if kv[0] != labels.HOSTNAME))
        static = self._classes.get(key)
        if static is None:
            if len(self._classes) >= self.MAX_CLASSES:  # old classes (nodes long gone): start again
                self._classes = {}
            static = self._classes[key] = {}
        return static


class Explainer:
    """kube-scheduler's ``0/N nodes are available: ...`` message for pods that fit nowhere.

    ``memo`` (optional, kept by the caller between explainers): a node's reasons for a signature
    are reused while the node's model and its pod list are the very same objects (both are
    read-only), so a pass costs one look-up per unchanged node and signature. What is left of a
    node (:func:`usage`) is worked out only for nodes a pod gets past the taint and affinity
    filters on.
    """

    def __init__(self, nodes: Sequence[node.Node], by_node: Mapping[str, Sequence[pod.Pod]],
                 node_reqs: Callable[[node.Node], requirements.Requirements],
                 usage_of: Callable[[node.Node, Sequence[pod.Pod]], tuple[dict[str, int], set[Port]]] | None = None,
                 memo: NodeMemo | None = None) -> None:
        self.nodes = nodes
        self._by_node = by_node
        self._usage_of = usage_of or usage
        self._used: dict[str, tuple[dict[str, int], set[Port]]] = {}
        self._node_reqs = node_reqs
        self.reqs: dict[str, requirements.Requirements] = {}
        """Node -> its labels as requirements, filled as a message needs them."""
        self._memo = memo
        self._answers: list[NodeAnswers] | None = None
        """Per node (as ``nodes``), the memo's answers (made valid on first use)."""
        self._cache: dict[Any, tuple[str, frozenset[str]]] = {}
        self._by_facts: dict[Hashable, tuple[str, frozenset[str]]] = {}
        """With the memo: messages by the pod's facts (:meth:`NodeMemo.facts_of`), this pass."""
        self._facts: dict[str, tuple[node.Node, tuple[str, bool, list[Any]]]] = {}
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
        key = (without_volumes is not None, sig)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self._own_reqs = (podgroups.make_group([without_volumes]).strict_requirements()
                          if without_volumes is not None else None)
        if not self.nodes:
            out = ("no nodes available to schedule pods", frozenset[str]())
        elif self._memo is None or without_volumes is not None:  # a volume pod's own reqs: not memoised
            tally: dict[tuple[str, ...], int] = {}
            reasons_of = self._reasons
            facts = _PodFacts(p, podgroups.make_group([p]).strict_requirements())
            for n in self.nodes:
                r = reasons_of(facts, n, None)
                tally[r] = tally.get(r, 0) + 1
            out = self._text(tally)
        else:
            facts = self._memo.facts_of(sig, p)
            hit = self._by_facts.get(facts.sig)
            out = hit if hit is not None else self._memo_explain(facts)
        self._cache[key] = out
        return out

    def _memo_explain(self, facts: _PodFacts) -> tuple[str, frozenset[str]]:
        """The message for a pod with these facts, from the memo's answers per node (kept under
        the facts' key, which stands for every signature with these facts)."""
        tally: dict[tuple[str, ...], int] = {}
        fkey = facts.sig
        reasons_of = self._reasons
        by_class = labels.HOSTNAME not in facts.greq  # else the node-only part is the node's own
        for n, answers in zip(self.nodes, self._node_answers(), strict=True):
            r = answers.reasons.get(fkey)
            if r is None:
                r = answers.reasons[fkey] = reasons_of(facts, n, answers.static if by_class else None, answers)
            tally[r] = tally.get(r, 0) + 1
        out = self._by_facts[fkey] = self._text(tally)
        return out

    def _text(self, tally: dict[tuple[str, ...], int]) -> tuple[str, frozenset[str]]:
        """kube-scheduler's message from how many nodes gave each tuple of reasons."""
        counts: dict[str, int] = {}
        for r, times in tally.items():
            for reason in r:
                counts[reason] = counts.get(reason, 0) + times
        parts = sorted(f"{count} {reason}" for reason, count in counts.items())
        return f"0/{len(self.nodes)} nodes are available: {', '.join(parts)}.", frozenset(counts)

    def _node_answers(self) -> list[NodeAnswers]:
        answers = self._answers
        if answers is None:
            memo = self._memo
            assert memo is not None
            answers = []
            for n in self.nodes:
                pods = self._by_node.get(n.name, ())
                entry = memo.nodes.get(n.name)
                if entry is None:
                    entry = memo.nodes[n.name] = NodeAnswers(n, pods, memo.static_of(n))
                elif entry.node is not n:  # re-parsed (a status write): keep what reads only equal parts
                    old, entry.node = entry.node, n
                    if not _same_node_only(old, n):
                        entry.forget(pods)
                        entry.static = memo.static_of(n)
                    elif entry.pods is not pods or old.allocatable != n.allocatable:
                        entry.forget(pods)
                elif entry.pods is not pods:  # pods changed: the node-only part stays
                    entry.forget(pods)
                answers.append(entry)
            self._answers = answers
        return answers

    def _usage(self, n: node.Node) -> tuple[dict[str, int], set[Port]]:
        used = self._used.get(n.name)
        if used is None:
            used = self._used[n.name] = self._usage_of(n, self._by_node.get(n.name, ()))
        return used

    def _node_facts(self, n: node.Node) -> tuple[str, bool, list[Any]]:
        """(name, cordoned or being deleted, hard taints with not-ready's), once per node and explainer."""
        facts = self._facts.get(n.name)
        if facts is None or facts[0] is not n:
            facts = self._facts[n.name] = (n, (n.name, n.unschedulable or n.deleting, hard_taints(n)))
        return facts[1]

    def _reasons(self, p: _PodFacts, n: node.Node,
                 static: Static | None, answers: NodeAnswers | None = None) -> tuple[str, ...]:
        """The node's reasons to reject ``p``: the first failing filter in kube-scheduler's order.
        ``static``: the node's memo of :meth:`_node_only` per signature (``p.sig``), if kept;
        ``answers``: the node's kept answers (their usage is the node's with its pods of this pass)."""
        if static is None:
            node_only = self._node_only(p, n)
        else:
            node_only = static.get(p.sig, _UNKNOWN)
            if node_only is _UNKNOWN:
                node_only = static[p.sig] = self._node_only(p, n)
        if node_only is not None:
            return node_only
        if answers is None:
            free, used = self._usage(n)
        else:
            kept = answers.used
            if kept is None:
                kept = answers.used = self._usage(n)
            free, used = kept
        if p.host_ports and any(hp in used or ("0.0.0.0", hp[1], hp[2]) in used for hp in p.host_ports):
            return ("node(s) didn't have free ports for the requested pod ports",)
        short = tuple([k for k, v in p.needs if v > free.get(k, 0)])
        if short:
            text = _SHORT.get(short)
            if text is None:
                text = _SHORT[short] = tuple("Too many pods" if k == "pods" else f"Insufficient {k}" for k in short)
            return text
        return p.otherwise

    def _node_only(self, p: _PodFacts, n: node.Node) -> tuple[str, ...] | None:
        """The reasons of the filters that read only the node (cordon, taints, node and volume
        affinity), or None when ``p`` passes them all."""
        name, blocked, node_taints = self._node_facts(n)
        if blocked:
            return ("node(s) were unschedulable",)
        bad = taints.first_untolerated(p.tolerations, node_taints, ("NoSchedule", "NoExecute"))
        if bad is not None:
            return (f"node(s) had untolerated taint {_taint_text(bad)}",)
        node_reqs = self.reqs.get(name)
        if node_reqs is None:
            node_reqs = self.reqs[name] = self._node_reqs(n)
        if node_reqs.compatible(p.greq, frozenset()) is not None:
            own = self._own_reqs
            if own is not None and node_reqs.compatible(own, frozenset()) is None:
                return ("node(s) had volume node affinity conflict",)
            return ("node(s) didn't match Pod's node affinity/selector",)
        return None


_UNKNOWN: tuple[str, ...] = ("",)


def _same_node_only(a: node.Node, b: node.Node) -> bool:
    """Whether the filters that read only the node (:meth:`Explainer._node_only`) see ``a`` and ``b`` alike."""
    return a.name == b.name and (a.unschedulable or a.deleting) == (b.unschedulable or b.deleting) and \
        a.ready == b.ready and a.taints == b.taints and a.labels == b.labels


_SHORT: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Resources a node is short of -> kube-scheduler's reasons (few distinct: one set per resource mix)."""


class _PodFacts:
    """What :meth:`Explainer._reasons` reads of a pod, worked out once per message."""

    __slots__ = ("greq", "host_ports", "needs", "otherwise", "sig", "tolerations")

    def __init__(self, p: pod.Pod, greq: requirements.Requirements) -> None:
        self.sig: Hashable = None
        """The pod's signature, when the node memo is used."""
        self.tolerations = p.tolerations
        self.greq = greq
        self.host_ports = p.host_ports()
        self.needs = sorted((k, v) for k, v in p.requests.items() if v > 0)
        """Positive requests in name order (the order kube-scheduler lists what is short)."""
        if p.topology_spread_constraints:
            self.otherwise: tuple[str, ...] = ("node(s) didn't match pod topology spread constraints",)
        elif p.pod_anti_affinity is not None and p.pod_anti_affinity.required:
            self.otherwise = ("node(s) didn't match pod anti-affinity rules",)
        elif p.pod_affinity is not None and p.pod_affinity.required:
            self.otherwise = ("node(s) didn't match pod affinity rules",)
        else:
            self.otherwise = ("node(s) had no room left once the other pending pods were placed",)
        """The reason on a node every filter above passes."""
