"""One run's placement state: bins, topology counts, and what placing pods on a bin records.

:class:`Placement` is the working memory of :class:`karpy.provisioning.scheduler.Scheduler`; it sits
below the modules that use it: :mod:`karpy.provisioning.grouping_paths` decides where a pod group goes
(``place``) and :mod:`karpy.provisioning.claims` opens and builds the NodeClaims (``finalize``).
It owns the :class:`bins.Bins`, one :class:`topology.TermState` per distinct topology term, the
domain universe of every topology key, and caches of requirement compatibility and taint toleration
keyed by small integer ids so that the per-group work is a handful of NumPy expressions over all
bins. What the DaemonSet pods take on a node is :mod:`karpy.provisioning.daemons`'.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import labels as wk
from karpy.api import pod as pod_mod
from karpy.provisioning import bins as bins_mod
from karpy.provisioning import daemons, nodetable, podgroups, results, spread_filter, templates
from karpy.scheduling import hostports, requirement, topology
from karpy.scheduling import namespaces as ns_mod
from karpy.scheduling import requirements as reqs_mod

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
BIG = topology.UNLIMITED
NEAR_TIE = 1.01


class Placement:
    """Bins and counts of one scheduling run; places pod groups."""

    def __init__(self, dims: list[str], tmpls: list[templates.Template],
                 groups: Sequence[podgroups.PodGroup], existing: Sequence[results.ExistingNode],
                 daemon_pods: Sequence[pod_mod.Pod], *, count_matching: bool = False,
                 table: nodetable.NodeTable | None = None,
                 namespaces: ns_mod.NamespaceIndex = ns_mod.EMPTY) -> None:
        """``count_matching``: pods matching a zonal (non-hostname) spread they do not carry keep
        that spread too (see :meth:`counted_spreads`). ``table``: existing nodes kept from earlier
        runs (see :mod:`nodetable`); the run is the same with or without it. ``namespaces``: the
        cluster's Namespaces (pod affinity terms with a ``namespaceSelector``)."""
        self.dims = dims
        self.count_matching = count_matching
        self._counted_cache: dict[Any, list[topology.Term]] = {}
        self.templates = tmpls
        self.daemon_pods = list(daemon_pods)
        self.dim_index = {d: i for i, d in enumerate(dims)}
        self.table = table if table is not None else nodetable.NodeTable(once=True)
        rows = self.table.sync(existing, namespaces)
        self.rows = rows
        """The existing nodes' row indices in :attr:`table`, in bin order."""
        self.row_list: list[int] = rows.tolist()
        # topology terms: from pending groups and from running pods' anti-affinity (inverse rule)
        self.terms: dict[topology.Term, topology.TermState] = {}
        for g in groups:
            for t in g.terms():
                self.terms.setdefault(t, topology.TermState(t))
        anti = self.table.anti
        looked: set[int] = set()  # the table's terms are shared objects: each is looked up once
        for t in (t for i in self.row_list if anti[i] for t in anti[i] if id(t) not in looked):
            looked.add(id(t))
            if t not in self.terms:
                self.terms[t] = topology.TermState(t)
        keys = sorted({t.key for t in self.terms if not t.hostname})
        self.keys = keys
        self.new_bins: list[int] = []
        self._relevant_cache: dict[Any, list[tuple[topology.Term, topology.TermState, bool, bool]]] = {}
        self._compat: dict[tuple[reqs_mod.Requirements, int], bool] = {}
        self._compat_vec: dict[reqs_mod.Requirements, BoolArray] = {}
        self._host_ok: dict[reqs_mod.Requirements, BoolArray] = {}
        self._tol: dict[tuple[Any, bool, int], bool] = {}
        self._tol_vec: dict[tuple[Any, bool], BoolArray] = {}  # :meth:`_tolerates` of each taint set so far
        self.choose_memo: dict[Any, int | None] = {}
        """:func:`claims._choose`'s and :func:`claims.first_template`'s answers of this run."""
        self.finalize_memo: dict[Any, Any] = {}
        """:func:`claims.finalize`'s instance type options of this run (and :func:`claims._target`'s scores)."""
        self.usable_memo: dict[Any, list[tuple[int, templates.Template, reqs_mod.Requirements]]] = {}
        """:func:`claims.usable_templates`' answers of this run."""
        self.narrowed_memo: dict[tuple[reqs_mod.Requirements, str, str], reqs_mod.Requirements] = {}
        self.joined_memo: dict[tuple[reqs_mod.Requirements, reqs_mod.Requirements], reqs_mod.Requirements] = {}
        """New NodeClaims' requirement sets narrowed to one domain, one object each."""
        self.universe: dict[str, set[str]] = {k: set() for k in keys}
        self.filtered_memo: dict[tuple[str, topology.NodeFilter], set[str]] = {}
        """:func:`spread_filter.filtered_domains`' answers of this run."""
        self.filter_memo: dict[tuple[topology.NodeFilter, int, int], bool] = {}
        """:func:`spread_filter.counts_on`'s answers of this run."""
        total = np.zeros(len(dims), dtype=np.int64)
        for g in groups:
            total += self.vector(g.requests) * g.size
        self.demand = total.astype(np.float64)
        # a function of the dimensions, not a bound method: the overhead must not point back at this
        # placement (a cycle would keep every solve's bins and pod lists until the cyclic collector runs)
        self.daemons = daemons.DaemonOverhead(dims, tmpls, self.daemon_pods,
                                              functools.partial(resource_vector, len(self.dims), self.dim_index))
        self.bins = bins_mod.Bins(dims, keys, capacity=len(rows) + 64)
        self._add_existing()
        for tmpl in tmpls:
            for key in keys:
                self.universe[key] |= spread_filter.template_domains(tmpl, key)

    # -- setup ------------------------------------------------------------------------------------

    def vector(self, resources: Any) -> IntArray:
        return resource_vector(len(self.dims), self.dim_index, resources)

    def _add_existing(self) -> None:
        """Existing nodes become the first bins, in the given order, from the table's arrays."""
        table = self.table
        idx, rows = self.rows, self.row_list
        n = len(rows)
        self.n_existing = n
        self.n_classes = len(table.classes.values)
        alloc, used = table.matrices(idx, self.dims)
        bins = self.bins
        bins.reqsets = table.classes.copy()
        bins.taintsets = table.taintsets.copy()
        dom: dict[str, IntArray] = {}
        for key in self.keys:
            reg, ids = table.domain_ids(key)
            bins.domains[key] = reg.copy()
            dom[key] = ids[idx]
            self.universe[key].update(reg.values[int(i)] for i in np.unique(dom[key]) if i >= 0)
        nodes = [table.node[i] for i in rows]
        ports = self.daemons.add_in_flight(table, rows, idx, used)
        bins.add_nodes([nd.name for nd in nodes if nd is not None], alloc - used, used, table.cls[idx],
                       table.taint[idx], table.schedulable[idx], [nd.pods for nd in nodes if nd is not None], dom)
        self.touched: set[int] = set()
        """Existing bins that got pods this run (their pod list is then a copy: the node's own is the caller's)."""
        self.initial_pods: list[int] = [len(nd.pods) for nd in nodes if nd is not None]
        held_ports = table.ports
        for j, i in enumerate(rows):
            held = held_ports[i]
            if held is not None:
                bins.ports[j] = held.copy()
        for j, usage in ports:
            bins.ports[j] = usage
        if self.terms:  # running pods, by signature (a kept table: per distinct relevance, from its term index)
            pos = np.full(len(table.cls), -1, dtype=np.int64)
            pos[idx] = np.arange(n, dtype=np.int64)
            terms, states = list(self.terms), list(self.terms.values())
            found = [(relevant, list(where), list(where.values())) for relevant, where in
                     table.relevant_rows(self._relevant_items, topology.label_probes(self.terms))] if table.once else \
                [([(terms[i], states[i], match, owner) for i, match, owner in hit], where, counts)
                 for hit, where, counts in table.relevant_batches(terms)]
            for relevant, rows_of, pods_on in found:
                at, counts = pos[np.asarray(rows_of, dtype=np.int64)], np.asarray(pods_on, dtype=np.int64)
                here = at >= 0
                if here.any():
                    self._record_many(relevant, at[here], counts[here])

    def _record_many(self, relevant: list[tuple[topology.Term, topology.TermState, bool, bool]],
                     at: IntArray, counts: IntArray) -> None:
        """:meth:`_record_relevant` for ``counts[j]`` pods on each bin ``at[j]`` (a bin may repeat)."""
        for term, state, match, owner in relevant:
            if term.node_filter is not None:  # a spread counts only the nodes its filter passes
                f = term.node_filter
                keep = np.fromiter((spread_filter.counts_on(self, f, int(b)) for b in at), np.bool_, len(at))
                if not keep.all():
                    self._record_many([(term, state, match, owner)], at[keep], counts[keep])
                    continue
            if term.hostname:
                state.grow(int(at.max()) + 1)
                if match:
                    np.add.at(state.bin_counts, at, counts)
                if owner:
                    np.add.at(state.bin_owners, at, counts)
                continue
            dom = self.bins.dom[term.key][at]
            known = dom >= 0
            if known.any():
                sums = np.bincount(dom[known], weights=counts[known])
                values = self.bins.domains[term.key].values
                for did in np.flatnonzero(sums):
                    state.record(values[int(did)], 0, int(sums[did]), owner=owner, match=match)
            if term.kind == topology.ANTI_AFFINITY:  # bins still open: every domain they may land in
                for j in np.flatnonzero(~known):
                    self._record_relevant([(term, state, match, owner)], int(at[j]), int(counts[j]))

    def _record_relevant(self, relevant: list[tuple[topology.Term, topology.TermState, bool, bool]],
                         b: int, n: int) -> None:
        for term, state, match, owner in relevant:
            if term.node_filter is not None and not spread_filter.counts_on(self, term.node_filter, b):
                continue
            domain = None if term.hostname else self.bins.domain_of(b, term.key)
            if domain is None and not term.hostname and term.kind == topology.ANTI_AFFINITY:
                # as Karpenter: anti-affinity blocks every domain the bin may still land in
                for value in sorted(self.bins.possible_values(b, term.key)):
                    state.record(value, b, n, owner=owner, match=match)
                continue
            state.record(domain, b, n, owner=owner, match=match)

    def _relevant(self, namespace: str, labels_: Any, owned: Sequence[topology.Term]
                  ) -> list[tuple[topology.Term, topology.TermState, bool, bool]]:
        """Terms a pod with these labels counts for or owns (cached: pods of a group share them)."""
        return self._relevant_items(namespace, tuple(sorted(labels_.items())), tuple(owned))

    def _relevant_items(self, namespace: str, items: tuple[tuple[str, str], ...], owned: tuple[topology.Term, ...]
                        ) -> list[tuple[topology.Term, topology.TermState, bool, bool]]:
        key = (namespace, items, owned)
        hit = self._relevant_cache.get(key)
        if hit is None:
            hit = []
            labels_ = dict(items)
            for term, state in self.terms.items():
                match = term.matches(namespace, labels_)
                owner = term in owned
                if match or owner:
                    hit.append((term, state, match, owner))
            self._relevant_cache[key] = hit
        return hit

    def counted_spreads(self, g: podgroups.PodGroup) -> list[topology.Term]:
        """Required spreads on a non-hostname key that ``g``'s pods match but do not carry.

        Kubernetes counts every pod matching a spread's selector: for a plan to hold whatever
        order the pods bind in, such pods must keep the spread even too. Empty unless the run
        was built with ``count_matching`` (the provisioner's plans; the kube-scheduler checks only
        the binding pod's own constraints, as Kubernetes does).
        """
        if not self.count_matching:
            return []
        own = g.terms()
        key = (g.namespace, tuple(sorted(g.labels.items())), tuple(own))
        hit = self._counted_cache.get(key)
        if hit is None:
            hit = [t for t in self.terms if t.kind == topology.SPREAD and t.required
                   and t not in own and t.matches(g.namespace, g.labels)]
            self._counted_cache[key] = hit
        return [t for t in hit if not t.hostname]

    def counts_for_hostname_spread(self, g: podgroups.PodGroup) -> bool:
        """``g``'s pods match a required hostname spread they do not carry (see :meth:`counted_spreads`)."""
        self.counted_spreads(g)
        hit = self._counted_cache.get((g.namespace, tuple(sorted(g.labels.items())), tuple(g.terms()))) or []
        return any(t.hostname for t in hit)

    # -- masks ----------------------------------------------------------------------------------

    def base_mask(self, g: podgroups.PodGroup, lo: int = 0, hi: int | None = None) -> BoolArray:
        """Bins (of ``lo:hi``) a pod of ``g`` may use by requirements and taints (ignoring capacity).

        Existing nodes are checked per class (their labels without the hostname; the table keeps
        those checks between runs), plus their hostname when the group constrains it; new
        NodeClaims per requirement set, extended only for sets added since.
        """
        hi = self.bins.n if hi is None else hi
        greq = g.requirements()
        rs_ids = self.bins.reqset[lo:hi]
        total = len(self.bins.reqsets.values)
        vec = self._compat_vec.get(greq)
        if vec is None or len(vec) < total:
            if vec is None:
                node_side = greq
                if wk.HOSTNAME in greq:
                    node_side = reqs_mod.Requirements(r for k, r in greq.items() if k != wk.HOSTNAME)
                vec = self.table.compat(node_side)[:self.n_classes]
            done = len(vec)
            values = self.bins.reqsets.values
            more = np.fromiter((values[i][0].compatible(greq) is None for i in range(done, total)),
                               dtype=np.bool_, count=total - done)
            vec = np.concatenate([vec, more])
            self._compat_vec[greq] = vec
        tol_key, n_taintsets = (g.tolerations, g.tolerate_prefer_no_schedule), len(self.bins.taintsets.values)
        tol = self._tol_vec.get(tol_key)
        if tol is None or len(tol) < n_taintsets:  # taint sets are only added during a run
            tol = self._tol_vec[tol_key] = np.array([self._tolerates(g, i) for i in range(n_taintsets)], np.bool_)
        mask: BoolArray = vec[rs_ids] & tol[self.bins.taintset[lo:hi]] & self.bins.schedulable[lo:hi]
        if wk.HOSTNAME in greq and lo < self.n_existing:
            mask[:self.n_existing - lo] &= self._hostname_ok(greq)[lo:min(hi, self.n_existing)]
        return mask

    def _hostname_ok(self, greq: reqs_mod.Requirements) -> BoolArray:
        """Per existing bin: does its hostname label meet ``greq``'s hostname requirement?"""
        hit = self._host_ok.get(greq)
        if hit is None:
            only = reqs_mod.Requirements([greq[wk.HOSTNAME]])
            seen: dict[str | None, bool] = {}
            hosts = [self.table.host[i] for i in self.row_list]
            for host in hosts:
                if host not in seen:
                    node = reqs_mod.Requirements.from_labels({wk.HOSTNAME: host} if host is not None else {})
                    seen[host] = node.compatible(only, frozenset()) is None
            hit = np.fromiter((seen[h] for h in hosts), dtype=np.bool_, count=len(hosts))
            self._host_ok[greq] = hit
        return hit

    def _tolerates(self, g: podgroups.PodGroup, ts_id: int) -> bool:
        key = (g.tolerations, g.tolerate_prefer_no_schedule, ts_id)
        hit = self._tol.get(key)
        if hit is None:
            taints = self.bins.taintsets.values[ts_id]
            hit = daemons.untolerated(g.tolerations, taints, prefer_ok=g.tolerate_prefer_no_schedule) is None
            self._tol[key] = hit
        return hit

    def hostname_cap(self, g: podgroups.PodGroup, size: int, lo: int = 0) -> IntArray | None:
        """Per bin of ``lo:size``: how many more pods of ``g`` its hostname terms let it take (None:
        no limit). A bin's cap depends on its own counts and on whether the group's hostname
        affinity has started anywhere."""
        cap: IntArray | None = None
        for term, state, match, owner in self.hostname_terms(g):
            c = topology.hostname_caps(state, size, owner=owner, match=match, lo=lo)
            if c is None:
                if owner and term.kind == topology.AFFINITY:
                    c = topology.hostname_affinity_cap(state, size, match, lo)
                elif self.count_matching and match and term.kind == topology.SPREAD and term.required:
                    # a pod that only matches a hostname spread stays off the carriers' nodes: they
                    # may bind after it and must then still find their node within maxSkew
                    state.grow(size)
                    c = np.where(state.bin_owners[lo:size] == 0, BIG, 0).astype(np.int64)
                else:
                    continue
            cap = c if cap is None else np.minimum(cap, c)
        return cap

    def hostname_terms(self, g: podgroups.PodGroup) -> list[tuple[topology.Term, topology.TermState, bool, bool]]:
        """The hostname terms ``g``'s pods carry or match: (term, state, match, owner)."""
        now = tuple(g.terms())
        hit = g.memo.get("hostname")  # kept on the group while its terms are the same
        if hit is None or hit[0] != now:
            owned = set(now)
            hit = (now, [(t, s, m, t in owned) for t, s in self.terms.items()
                         if t.hostname and ((m := t.matches(g.namespace, g.labels)) or t in owned)])
            g.memo["hostname"] = hit
        return hit[1]

    def domain_constraints(self, g: podgroups.PodGroup) -> dict[str, set[str]]:
        """Allowed domains per non-hostname key for one more pod of ``g``."""
        out: dict[str, set[str]] = {}
        greq = g.requirements()
        for term in [*g.terms(), *self.counted_spreads(g)]:
            if term.hostname:
                continue
            state = self.terms[term]
            eligible = spread_filter.domains(self, term, g) if term.kind == topology.SPREAD else \
                self.eligible(term.key, greq, True)
            allowed = topology.allowed_domains(state, eligible, self_match=term.matches(g.namespace, g.labels))
            out[term.key] = out[term.key] & allowed if term.key in out else allowed
        for term, state in self.terms.items():
            if term.hostname or term.kind != topology.ANTI_AFFINITY or not state.owners:
                continue
            if term.matches(g.namespace, g.labels):
                blocked = topology.inverse_blocked(state)
                base = out.get(term.key, set(self.eligible(term.key, greq, True)))
                out[term.key] = base - blocked
        return out

    def terms_count(self, g: podgroups.PodGroup, key: str, value: str) -> int:
        """Pods counted in domain ``value`` of ``key`` by the terms ``g`` must satisfy."""
        return sum(self.terms[t].counts.get(value, 0) for t in [*g.terms(), *self.counted_spreads(g)]
                   if t.key == key)

    def eligible(self, key: str, greq: reqs_mod.Requirements, honor: bool,
                 universe: set[str] | None = None) -> list[str]:
        r = greq.get(key)
        values = self.universe.get(key, set()) if universe is None else universe
        return sorted(v for v in values if not honor or r is None or r.has(v))

    # -- placing --------------------------------------------------------------------------------

    def record(self, g: podgroups.PodGroup, b: int, pods: list[pod_mod.Pod], req: IntArray) -> None:
        """Put ``pods`` of ``g`` on bin ``b`` and update capacity, ports and topology counts."""
        k = len(pods)
        delta = req * k
        self.bins.remaining[b] -= delta
        self.bins.used[b] += delta
        if b < self.n_existing and b not in self.touched:  # the node's own list is the caller's
            self.bins.pods[b] = list(self.bins.pods[b])
            self.touched.add(b)
        self.bins.pods[b].extend(pods)
        if g.host_ports:
            usage = self.bins.ports[b]
            if usage is None:
                usage = hostports.HostPortUsage()
                self.bins.ports[b] = usage
            for p in pods:
                usage.add(p.key, [hostports.host_port(*hp) for hp in g.host_ports])
        if self.bins.template[b] >= 0:
            self.join_claim(g, b)
        relevant = self._recorded_terms(g)
        self._pin_counted_domains(relevant, b)
        self._record_relevant(relevant, b, k)

    def join_claim(self, g: podgroups.PodGroup, b: int) -> None:
        """New NodeClaim bin ``b`` takes on the requirements of group ``g``, whose pods it gets
        (Karpenter's ``NodeClaim.Add``): a pod with a zone selector placed on a claim opened for other
        pods pins the claim's zone. Domains the requirements now decide are narrowed."""
        creqs = self.bins.requirements(b)
        greq = g.requirements()
        joined = self.joined_memo.get((creqs, greq))
        if joined is None:
            joined = self.joined_memo[(creqs, greq)] = creqs.intersect(greq)
        if joined == creqs:
            return
        self.bins.set_requirements(b, joined)
        for key in self.keys:
            r = joined.get(key)
            if r is None or self.bins.dom[key][b] != bins_mod.UNDETERMINED:
                continue
            left = frozenset(v for v in self.bins.possible_values(b, key) if r.has(v))
            if len(left) == 1:
                self.narrow(b, key, next(iter(left)))
            elif left:
                self.bins.set_domain(b, key, left)

    def _recorded_terms(self, g: podgroups.PodGroup) -> list[tuple[topology.Term, topology.TermState, bool, bool]]:
        """The terms ``g``'s pods count for or own when placed (kept on the group while its terms
        are the same)."""
        terms = tuple(g.terms())
        hit = g.memo.get("recorded")
        if hit is not None and hit[0] == terms:
            relevant: list[tuple[topology.Term, topology.TermState, bool, bool]] = hit[1]
            return relevant
        # only required anti-affinity binds other pods (the inverse rule); preferred terms do not
        owned = [t for t in terms if t.kind == topology.ANTI_AFFINITY and t.required]
        if self.count_matching:  # where hostname-spread carriers are, for pods that only match
            owned += [t for t in terms if t.kind == topology.SPREAD and t.required and t.hostname]
        relevant = self._relevant(g.namespace, g.labels, owned)
        g.memo["recorded"] = (terms, relevant)
        return relevant

    def _pin_counted_domains(self, relevant: list[tuple[topology.Term, topology.TermState, bool, bool]],
                             b: int) -> None:
        """Narrow an open claim to one domain of each key where these pods count for a spread or
        an affinity (Kubernetes counts every pod matching the selector, wherever the claim lands):
        the domain with the fewest matching pods, so the pods keep the spread even."""
        for key in self.keys:
            if self.bins.dom[key][b] != bins_mod.UNDETERMINED:
                continue
            counted = [s for t, s, match, _ in relevant
                       if match and t.key == key and t.kind != topology.ANTI_AFFINITY]
            if not counted:
                continue
            choices = sorted(self.bins.possible_values(b, key))
            if choices:
                best = min(choices, key=lambda v: (sum(s.counts.get(v, 0) for s in counted), v))
                self.narrow(b, key, best)

    def narrowed(self, reqs: reqs_mod.Requirements, key: str, value: str) -> reqs_mod.Requirements:
        """``reqs`` with ``key In [value]``, one object per run (its hash is then computed once)."""
        memo_key = (reqs, key, value)
        hit = self.narrowed_memo.get(memo_key)
        if hit is None:
            hit = self.narrowed_memo[memo_key] = reqs.add(requirement.Requirement.new(key, "In", [value]))
        return hit

    def narrow(self, b: int, key: str, value: str) -> None:
        """Restrict new NodeClaim ``b`` to domain ``value`` of ``key``.

        Pods already on the claim now count in ``value`` for the spread and affinity terms on
        ``key`` they match (while the domain was open they counted nowhere).
        """
        if self.bins.domain_of(b, key) == value:
            return
        was_open = self.bins.dom[key][b] == bins_mod.UNDETERMINED
        self.bins.set_requirements(b, self.narrowed(self.bins.requirements(b), key, value))
        self.bins.set_domain(b, key, value)
        if was_open and self.bins.pods[b]:
            by_labels: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
            for p in self.bins.pods[b]:
                lk = (p.namespace, tuple(sorted(p.labels.items())))
                by_labels[lk] = by_labels.get(lk, 0) + 1
            for (namespace, items), count in by_labels.items():
                for term, state, match, _ in self._relevant(namespace, dict(items), ()):
                    if match and term.key == key and term.kind != topology.ANTI_AFFINITY:
                        state.record(value, b, count, owner=False, match=True)

    def ports_mask(self, g: podgroups.PodGroup, n: int, lo: int = 0) -> BoolArray:
        """Bins ``lo:n`` where ``g``'s host ports are free."""
        wanted = [hostports.host_port(*hp) for hp in g.host_ports]
        mask = np.ones(n - lo, dtype=np.bool_)
        for b in range(lo, n):
            usage = self.bins.ports[b]
            if usage is not None and usage.conflicts(wanted) is not None:
                mask[b - lo] = False
        return mask

    def daemon_overhead(self, tmpl_index: int, reqs: reqs_mod.Requirements) -> IntArray:
        """See :meth:`daemons.DaemonOverhead.on_claim` (one row per instance type of the template)."""
        return self.daemons.on_claim(tmpl_index, reqs)

    def daemon_ports(self, tmpl_index: int, reqs: reqs_mod.Requirements) -> hostports.HostPortUsage | None:
        """See :meth:`daemons.DaemonOverhead.ports_on_claim` (shared: copy before adding to it)."""
        return self.daemons.ports_on_claim(tmpl_index, reqs)


def resource_vector(size: int, index: dict[str, int], resources: Any) -> IntArray:
    """``resources`` (name -> amount) as a vector of ``size`` dimensions, ``index`` giving each name's place."""
    v = np.zeros(size, dtype=np.int64)
    for name, amount in resources.items():
        i = index.get(name)
        if i is not None:
            v[i] = amount
    return v
