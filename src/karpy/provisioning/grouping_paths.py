"""How a pod group is placed: three paths over the same bins.

- **fill**: no constraint on a non-hostname key. Per-bin fit counts (resources, hostname caps,
  host ports) are computed in one NumPy expression and the group goes first-fit in bin order;
  what is left opens new NodeClaims, each filled at once.
- **water-fill**: one topology spread on one non-hostname key (zone, capacity type, a custom
  label). The group's pods are split over the key's domains by water-filling (always the
  least-loaded domain, which keeps every step within maxSkew), then each domain's share is a fill
  restricted to bins in, or narrowable to, that domain.
- **pod by pod**: pod (anti-)affinity on a non-hostname key, or several such constraints: the
  allowed domains are recomputed after every pod.

Every path moves the placed pods to the front of ``g.pods`` and returns their number.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from karpy.api import pod as pod_mod
from karpy.provisioning import claims, podgroups, spread_filter
from karpy.provisioning import placement as placement_mod
from karpy.scheduling import topology

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
CHUNK = 512
_NONE: IntArray = np.zeros(0, dtype=np.int64)


def place(run: placement_mod.Placement, g: podgroups.PodGroup) -> int:
    keyed = [t for t in g.terms() if not t.hostname] + run.counted_spreads(g)
    inverse = any(not t.hostname and t.kind == topology.ANTI_AFFINITY and s.owners
                  and t.matches(g.namespace, g.labels) for t, s in run.terms.items())
    req = run.vector(g.requests)
    if not keyed and not inverse:
        return fill(run, g, req, 0, g.size, None)
    if (not inverse and len(keyed) == 1 and keyed[0].kind == topology.SPREAD
            and keyed[0].matches(g.namespace, g.labels)):
        return water_fill(run, g, req, keyed[0])
    return pod_by_pod(run, g, req)


def fill(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray, start: int, count: int,
         domain: tuple[str, str] | None, *, open_new: bool = True, known: KnownFit | None = None) -> int:
    """Place ``g.pods[start:start+count]`` first-fit; returns how many were placed.

    ``domain`` restricts bins to one (key, value); undetermined bins are narrowed when used.
    ``known``: the group's fit on the first bins with no domain constraint (see :class:`KnownFit`).
    """
    placed = 0
    n = run.bins.n
    lo, step = 0, first_chunk(run, g, n)
    while lo < n and placed < count:
        hi = min(n, lo + step)
        chunk_known = known if known is not None and domain is not None and lo < known.size else None
        if chunk_known is not None:
            hi = min(hi, chunk_known.size)
        first, fit = _chunk_fit(run, g, req, domain, lo, hi, chunk_known)
        cand = np.flatnonzero(fit > 0)
        if len(cand):
            take = fit[cand]
            cum = np.cumsum(take)
            stop = int(np.searchsorted(cum, count - placed))
            # plain ints from here: one conversion, not a NumPy scalar per bin
            for c, t in zip(cand[:stop + 1].tolist(), take[:stop + 1].tolist(), strict=True):
                b = first + c
                k = min(t, count - placed)
                if k <= 0:
                    break
                _put(run, g, b, req, start + placed, k, domain)
                placed += k
        lo, step = hi, step * 4
    while open_new and placed < count:
        new = claims.open_claim(run, g, req, {domain[0]: {domain[1]}} if domain else {})
        if new is None:
            break
        k = _fit_one(run, g, req, new)
        if k <= 0:
            break
        k = min(k, count - placed)
        _put(run, g, new, req, start + placed, k, domain)
        placed += k
    return placed


def _chunk_fit(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray, domain: tuple[str, str] | None,
               lo: int, hi: int, known: KnownFit | None) -> tuple[int, IntArray]:
    """(``first``, the group's fit on bins ``first:``) for the bins of ``lo:hi`` that may take a
    pod: with ``domain``, only those in it (or that may still be narrowed into it); in a chunk
    larger than :data:`CHUNK`, worked out from the first to the last of them. (With a whole-catalog
    NodePool, most of a zonal spread's domains have no existing node: a chunk of existing nodes is
    then not worked out at all.) ``known``: the group's known fit, read for the whole chunk unless
    the domain's bins are a small part of it."""
    if domain is None:
        return lo, fit_counts(run, g, req, {}, lo, hi)
    in_domain = run.bins.domain_mask(domain[0], {domain[1]}, lo, hi)
    if hi - lo > CHUNK:  # a large chunk: only the span of the domain's bins
        where = np.flatnonzero(in_domain)
        if not len(where):
            return lo, _NONE
        first, last = lo + int(where[0]), lo + int(where[-1]) + 1
        if known is None or 2 * (last - first) <= hi - lo:
            fit = known.part(first, last) if known is not None else fit_counts(run, g, req, {}, first, last)
            return first, fit * in_domain[first - lo:last - lo]
    elif not in_domain.any():
        return lo, _NONE
    fit = known.part(lo, hi) if known is not None else fit_counts(run, g, req, {}, lo, hi)
    return lo, fit * in_domain


def _fit_one(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray, b: int) -> int:
    nz = req > 0
    k = int((run.bins.remaining[b, nz] // req[nz]).min()) if nz.any() else 1 << 30
    cap = run.hostname_cap(g, b + 1, b)
    if cap is not None:
        k = min(k, int(cap[0]))
    if g.host_ports:
        k = min(k, 1)
    return max(k, 0)


def _put(run: placement_mod.Placement, g: podgroups.PodGroup, b: int, req: IntArray, start: int, k: int,
         domain: tuple[str, str] | None) -> None:
    if domain is not None:
        run.narrow(b, domain[0], domain[1])
    run.record(g, b, g.pods[start:start + k], req)


def water_fill(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray,
               term: topology.Term) -> int:
    state = run.terms[term]
    eligible = spread_filter.domains(run, term, g)
    # respect minDomains / skew against domains no pod of the group can reach
    allowed = topology.allowed_domains(state, eligible, self_match=True)
    if not allowed:
        return 0
    shares = topology.spread_water_fill(state, eligible, g.size)
    if term.min_domains is not None and len(eligible) < term.min_domains:
        # fewer domains than minDomains: the global minimum is 0, no domain may exceed maxSkew
        shares = {d: min(c, max(0, term.max_skew - state.counts.get(d, 0))) for d, c in shares.items()}
    # A share may go to a domain not allowed right now: water-filling gives each pod to a domain
    # with the fewest matching pods, which is always allowed when it gets it, so once every share
    # is placed the domains are within maxSkew (the plan is judged when all its pods are bound).
    known = KnownFit(run, g, req)
    if any(c and not _sure(run, g, req, term.key, d, c, known) for d, c in shares.items()):
        # a domain may fall short of its share, and the others must then stop within maxSkew of
        # it: only the pod-by-pod path knows when to stop
        return pod_by_pod(run, g, req)
    placed = 0
    order = list(g.pods)
    cursor = 0
    done: list[int] = []
    for d in sorted(shares):
        want = shares[d]
        got = fill(run, g, req, cursor, want, (term.key, d), known=known)
        done.extend(range(cursor, cursor + got))
        placed += got
        cursor += want
        if got < want:
            # the rest of this domain's share stays unplaced: the skew would break elsewhere
            continue
    _front(g, order, done)
    return placed


class KnownFit:
    """How many pods of a group each bin takes with no domain constraint, worked out once per chunk
    of :func:`fill`'s scan (of the bins there were when the water-fill began: ``size``) for all the
    domains the water-fill visits.

    Still exact for every bin a later domain allows: a domain's fill changes only the bins it puts
    pods on, and narrows each of them into that domain, which no other domain allows; bins it
    opens come after the known ones. Hostname caps keep it exact too: each reads its own bin's
    counts and carriers only (:func:`topology.hostname_caps`), except the cap of a required hostname
    affinity the group carries, which changes everywhere once its first pod is placed: then
    nothing is known (``size`` 0). A chunk worked out after a domain's fill is still that of
    the start on every bin another domain allows, as above."""

    __slots__ = ("_g", "_parts", "_req", "_run", "size")

    def __init__(self, run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray) -> None:
        self._run, self._g, self._req = run, g, req
        self.size = 0 if follows_hostname_affinity(run, g) else run.bins.n
        """Bins ``0:size`` are known."""
        self._parts: dict[tuple[int, int], IntArray] = {}

    def part(self, lo: int, hi: int) -> IntArray:
        """The group's fit on bins ``lo:hi`` (within ``size``), no domain constraint."""
        found = self._parts.get((lo, hi))
        if found is None:
            found = self._parts[(lo, hi)] = fit_counts(self._run, self._g, self._req, {}, lo, hi)
        return found

    def whole(self) -> IntArray | None:
        """The fit on every known bin, in :func:`fill`'s chunks (None when nothing is known)."""
        if not self.size:
            return None
        parts, lo, step = [], 0, first_chunk(self._run, self._g, self.size)
        while lo < self.size:
            hi = min(self.size, lo + step)
            parts.append(self.part(lo, hi))
            lo, step = hi, step * 4
        return np.concatenate(parts)


def _sure(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray, key: str, domain: str,
          want: int, known: KnownFit | None = None) -> bool:
    """Will :func:`fill` restricted to ``domain`` place ``want`` pods of ``g``, whatever the other
    domains' fills did before? Yes when new NodeClaims can be opened there again and again, or when
    the bins surely in the domain take them now: another domain's fill never uses those bins, and
    a bin's fit (resources, host ports, hostname caps) does not change with pods on other bins -
    unless the group has hostname affinity, whose first pod decides where the others may go."""
    if claims.can_open(run, g, req, {key: {domain}}):
        return True
    if any(t.hostname and t.kind == topology.AFFINITY for t in g.terms()):
        return False
    did = run.bins.domains[key].ids.get(domain)
    if did is None:
        return False
    fit = known.whole() if known is not None and known.size == run.bins.n else None
    if fit is None:
        fit = fit_counts(run, g, req, {key: {domain}})
    # only the domain's own bins are summed: there the known fit is the domain-constrained one
    return int(fit[run.bins.dom[key][:len(fit)] == did].sum()) >= want


def pod_by_pod(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray) -> int:
    order = list(g.pods)
    done: list[int] = []
    stable = _stable(run, g)
    for i in range(len(order)):
        g.pods = order  # fill() indexes g.pods
        constraints = run.domain_constraints(g)
        if any(not v for v in constraints.values()):
            break
        if stable and len(constraints) == 1:
            (key, allowed), = constraints.items()
            if len(allowed) == 1:
                # the constraints stay as they are while the rest is placed: first fit in one go
                got = fill(run, g, req, i, len(order) - i, (key, next(iter(allowed))))
                done.extend(range(i, i + got))
                break
        found = _first_bin(run, g, req, constraints)
        if found is None:
            found = claims.open_claim(run, g, req, constraints)
            if found is None or _fit_one(run, g, req, found) <= 0:
                break
        b = found
        for key, allowed in constraints.items():
            if run.bins.domain_of(b, key) is None:
                choices = sorted(run.bins.possible_values(b, key) & allowed,
                                 key=functools.partial(_load, run, g, key))
                if not choices:
                    break
                run.narrow(b, key, choices[0])
        run.record(g, b, [order[i]], req)
        done.append(i)
    _front(g, order, done)
    return len(done)


def _stable(run: placement_mod.Placement, g: podgroups.PodGroup) -> bool:
    """Placing pods of ``g`` leaves its allowed domains (:meth:`Placement.domain_constraints`) as
    they are, once every key has one allowed value, and changes no other bin's fit.

    True when ``g``'s non-hostname terms are all pod affinity (the domains holding matching pods
    only grow, and a pod goes where they are), it keeps no spread it only matches, it owns no
    anti-affinity on a non-hostname key (the inverse rule's blocked domains are others' then) and
    no hostname term caps it (a hostname cap can change with each pod on another bin). Then
    pod-by-pod placement puts each pod in the first bin that fits, the same bin until it is full:
    :func:`fill` does exactly that."""
    if any(not t.hostname and t.kind != topology.AFFINITY for t in g.terms()):
        return False
    return not run.counted_spreads(g) and not hostname_capped(run, g)


def first_chunk(run: placement_mod.Placement, g: podgroups.PodGroup, n: int) -> int:
    """How many of the ``n`` bins :func:`fill`'s scan works out first (each next chunk is four
    times larger; the scan stops once the pods are placed).

    A placement changes no other bin's fit (resources, host ports, requirements and domains are
    the bin's own; each hostname cap reads its own bin's counts and carriers only,
    :func:`topology.hostname_caps`), so first fit over growing chunks is first fit over one full
    scan - unless the group carries a hostname affinity, whose cap changes on every bin once its
    first pod is placed: then every bin is worked out at once, before any is used."""
    return n if follows_hostname_affinity(run, g) else CHUNK


def follows_hostname_affinity(run: placement_mod.Placement, g: podgroups.PodGroup) -> bool:
    """``g`` carries a hostname pod affinity (:func:`topology.hostname_affinity_cap` caps it)."""
    return any(owner and term.kind == topology.AFFINITY for term, _, _, owner in run.hostname_terms(g))


def hostname_capped(run: placement_mod.Placement, g: podgroups.PodGroup) -> bool:
    """Whether :meth:`Placement.hostname_cap` gives ``g`` a cap (not None), without computing it:
    that depends only on which hostname terms ``g`` carries or matches, not on the counts."""
    for term, _, match, owner in run.hostname_terms(g):
        if owner and term.kind in (topology.SPREAD, topology.ANTI_AFFINITY, topology.AFFINITY):
            return True
        if not owner and match and (term.kind == topology.ANTI_AFFINITY or (
                run.count_matching and term.kind == topology.SPREAD and term.required)):
            return True
    return False


def fit_counts(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray,
               constraints: dict[str, set[str]], lo: int = 0, hi: int | None = None) -> IntArray:
    """How many more pods of ``g`` each bin (of ``lo:hi``) takes: requirements, taints, free
    resources, allowed domains, hostname topology caps and host ports, in one vectorised pass."""
    n = run.bins.n
    hi = n if hi is None else hi
    mask = run.base_mask(g, lo, hi)
    for key, allowed in constraints.items():
        mask &= run.bins.domain_mask(key, allowed, lo, hi)
    fit = run.bins.fit_counts(req, lo, hi)
    fit[~mask] = 0
    cap = run.hostname_cap(g, hi, lo)
    if cap is not None:
        fit = np.minimum(fit, cap)
    if g.host_ports:
        fit = np.minimum(fit, run.ports_mask(g, hi, lo).astype(np.int64))
    return fit


def _first_bin(run: placement_mod.Placement, g: podgroups.PodGroup, req: IntArray,
               constraints: dict[str, set[str]]) -> int | None:
    cand = np.flatnonzero(fit_counts(run, g, req, constraints) > 0)
    return int(cand[0]) if len(cand) else None


def _load(run: placement_mod.Placement, g: podgroups.PodGroup, key: str, value: str) -> tuple[int, str]:
    return run.terms_count(g, key, value), value


def _front(g: podgroups.PodGroup, order: list[pod_mod.Pod], done: list[int]) -> None:
    chosen = set(done)
    g.pods = [order[i] for i in done] + [p for i, p in enumerate(order) if i not in chosen]
