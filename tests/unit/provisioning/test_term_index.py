"""Which running pod signatures each topology term counts is kept on a node table between runs
(:class:`term_index.TermIndex`): a run with other terms, or the same terms in another order, never
reads another run's answers; pods of several signatures counting for the same terms are counted
in one batch, each pod once; a run with the terms of the last matches no signature again."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from karpy.api import labels as wk
from karpy.api import pod, selectors
from karpy.provisioning import nodetable, podgroups, reuse, scheduler, term_index
from karpy.provisioning import placement as placement_mod
from karpy.scheduling import topology

from . import builders as b


def _term(kind: str, key: str, **match: str) -> topology.Term:
    return topology.Term(kind=kind, key=key, selector=selectors.LabelSelector(match_labels=match), namespaces=None)


WEB_ZONE = _term(topology.SPREAD, wk.ZONE, app="web")
WEB_HOST = _term(topology.SPREAD, wk.HOSTNAME, app="web")
DB_HOST = _term(topology.ANTI_AFFINITY, wk.HOSTNAME, app="db")


def _running(prefix: str, labels: dict[str, str], anti: dict[str, str] | None = None) -> list[pod.Pod]:
    extra = {} if anti is None else {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [b.affinity_term(wk.HOSTNAME, anti)]}}}
    return b.make_pods(prefix, 2, labels=labels, **extra)


def _one_by_one(table: nodetable.NodeTable, terms: Sequence[topology.Term], sid: int) -> term_index.Relevance:
    """What a run reads of one signature, matched against every term (the reference)."""
    namespace, items, oid = table.signatures.values[sid]
    owned = table.owned_sets.values[oid]
    return tuple((i, m, o) for i, t in enumerate(terms)
                 if (m := t.matches(namespace, dict(items))) | (o := t in owned))


def _expect_as_one_by_one(table: nodetable.NodeTable, terms: Sequence[topology.Term]) -> None:
    table.signature_rows()  # every row's signatures registered
    at_once = table.term_index.relevance(terms, table.signatures.values, table.owned_sets.values)
    for sid in range(len(table.signatures.values)):
        assert at_once.get(sid, ()) == _one_by_one(table, terms, sid), (sid, table.signatures.values[sid])


def test_a_run_with_the_same_terms_reordered_reads_positions_in_its_own_order() -> None:
    table = nodetable.NodeTable()
    table.sync([b.existing_node("n-1", running=_running("web", {"app": "web"}))])
    table.signature_rows()
    web, = range(len(table.signatures.values))
    args = (table.signatures.values, table.owned_sets.values)
    assert table.term_index.relevance((WEB_ZONE, DB_HOST), *args) == {web: ((0, True, False),)}
    assert table.term_index.relevance((DB_HOST, WEB_ZONE), *args) == {web: ((1, True, False),)}
    assert table.term_index.relevance((DB_HOST,), *args) == {}  # another run's terms: nothing of theirs
    assert table.term_index.relevance((WEB_HOST, DB_HOST, WEB_ZONE), *args) == {web: ((0, True, False),
                                                                                     (2, True, False))}


def test_all_signatures_at_once_agree_with_each_signature_alone_as_terms_and_signatures_change() -> None:
    """The per-term lists of matching signatures (kept between runs, extended as pods with new labels
    appear) give every signature exactly what matching it against every term gives, in any term order."""
    table = nodetable.NodeTable()
    nodes = [b.existing_node("n-1", running=_running("web", {"app": "web"})),
             b.existing_node("n-2", running=_running("db", {"app": "db", "tier": "x"}, anti={"app": "db"}))]
    table.sync(nodes)
    table.signature_rows()
    db_anti, = (t for owned in table.owned_sets.values for t in owned)  # the running pods' own term
    term_sets = [(WEB_ZONE,), (WEB_ZONE, db_anti), (db_anti, WEB_ZONE, WEB_HOST), (WEB_HOST,), ()]
    for terms in term_sets:
        _expect_as_one_by_one(table, terms)
    # pods with new labels arrive (and an owner of the anti-affinity whose selector does not match it)
    nodes.append(b.existing_node("n-3", running=[*_running("cache", {"app": "cache"}, anti={"app": "db"}),
                                                 *_running("web2", {"app": "web", "tier": "x"})]))
    table.sync(nodes)
    for terms in [*term_sets, (WEB_HOST, db_anti), (db_anti,)]:
        _expect_as_one_by_one(table, terms)
    said = table.term_index.relevance((WEB_ZONE, db_anti), table.signatures.values, table.owned_sets.values)
    assert sorted(v for v in said.values() if (1, False, True) in v) == [((1, False, True),)]  # the cache pods
    assert sorted(v for v in said.values() if (1, True, True) in v) == [((1, True, True),)]  # the db pods


def test_a_run_with_the_terms_of_the_last_matches_no_running_signature_again(monkeypatch: pytest.MonkeyPatch) -> None:
    table = nodetable.NodeTable()
    table.sync([b.existing_node(f"n-{i}", running=_running(f"p{i}", {"app": f"a{i}"})) for i in range(20)])
    table.signature_rows()
    calls = [0]
    matches = topology.Term.matches

    def counted(self: topology.Term, namespace: str, labels: object) -> bool:
        calls[0] += 1
        return matches(self, namespace, labels)  # type: ignore[arg-type]

    monkeypatch.setattr(topology.Term, "matches", counted)
    terms = (WEB_ZONE, _term(topology.SPREAD, wk.ZONE, app="a3"))
    first = table.term_index.relevance(terms, table.signatures.values, table.owned_sets.values)
    assert first == {3: ((1, True, False),)} and calls[0] == 2 * 20
    again = table.term_index.relevance(terms[::-1], table.signatures.values, table.owned_sets.values)
    assert again == {3: ((0, True, False),)} and calls[0] == 2 * 20
    table.sync([b.existing_node("new", running=_running("x", {"app": "a3", "v": "2"}))])
    table.signature_rows()
    assert len(table.term_index.relevance(terms, table.signatures.values, table.owned_sets.values)) == 2
    assert calls[0] == 2 * 21  # only the new signature is matched


def test_a_kept_cache_places_pods_whose_terms_change_between_runs_as_a_fresh_one() -> None:
    """Runs through one SchedulingCache whose pending pods carry other terms each time (so the running
    pods' signatures meet new terms, in new orders) plan exactly as fresh schedulers."""
    web, db = {"app": "web"}, {"app": "db"}
    running = [*b.make_pods("web-run", 2, labels=web), *b.make_pods("db-run", 2, labels=db)]
    existing = [b.existing_node("n-1", zone="zone-a", running=running[:2]),
                b.existing_node("n-2", zone="zone-b", running=running[2:])]
    waves = [
        b.make_pods("w", 4, labels=web, topologySpreadConstraints=[b.spread(wk.ZONE, web)]),
        b.make_pods("d", 3, labels=db, affinity={"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [b.affinity_term(wk.HOSTNAME, db)]}}),
        b.make_pods("x", 3, labels=db, topologySpreadConstraints=[b.spread(wk.ZONE, db)]),
    ]
    cache = reuse.SchedulingCache()
    pools, types = [b.make_nodepool()], {"default": b.small_catalog()}
    for pods in [*waves, *waves[::-1], waves[0] + waves[2]]:
        kept = scheduler.Scheduler(pools, types, existing, cache=cache).solve(pods)
        fresh = scheduler.Scheduler(pools, types, existing).solve(pods)
        assert b.describe(kept) == b.describe(fresh)
        assert not kept.errors


@pytest.mark.parametrize("kept", [True, False])
def test_running_pods_of_several_signatures_on_one_node_are_all_counted_once_for_the_terms_they_share(
        kept: bool) -> None:
    """Signatures that count for the same terms are counted in one batch (a node may hold several of
    them): every pod still counts once, in its node's zone and on its node."""
    web = {"app": "web"}
    pending = b.make_pods("new", 2, labels=web, topologySpreadConstraints=[b.spread(wk.ZONE, web)],
                          affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                              b.affinity_term(wk.HOSTNAME, {"tier": "front"})]}})
    v1, v2 = {**web, "v": "1", "tier": "front"}, {**web, "v": "2", "tier": "front"}
    existing = [b.existing_node("n-1", zone="zone-a", running=[*b.make_pods("a1", 2, labels=v1),
                                                               *b.make_pods("a2", 3, labels=v2)]),
                b.existing_node("n-2", zone="zone-b", running=b.make_pods("b2", 1, labels=v2)),
                b.existing_node("n-3", zone="zone-a", running=b.make_pods("c1", 4, labels=v1))]
    table = nodetable.NodeTable() if kept else None
    for _ in range(2):  # a kept table's second run reads what its first one kept
        run = placement_mod.Placement(list(scheduler.BASE_DIMS), [], podgroups.group_pods(pending), existing, [],
                                      table=table)
        zonal, = (s for t, s in run.terms.items() if t.key == wk.ZONE)
        assert zonal.counts == {"zone-a": 9, "zone-b": 1}
        per_node, = (s for t, s in run.terms.items() if t.key == wk.HOSTNAME)
        assert per_node.bin_counts[:3].tolist() == [5, 1, 4]


def test_batches_group_rows_by_relevance_and_leave_out_signatures_relevant_to_nothing() -> None:
    a, b_ = ((0, True, False),), ((0, True, False), (1, False, True))
    rows = {0: {4: 2, 7: 1}, 1: {4: 3}, 2: {9: 5}, 3: {7: 6}}
    out = term_index.batches({0: a, 1: b_, 3: a}, rows)
    assert [(r, w.tolist(), c.tolist()) for r, w, c in out] == [(a, [4, 7, 7], [2, 1, 6]), (b_, [4], [3])]
