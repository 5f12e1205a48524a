"""A snapshot keeps the previous snapshot's unchanged nodes (and what was computed from them), never a changed one."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from karpy.api import nodepool
from karpy.disruption import balanced, candidates, consolidation, prefilter, snapshot

from .test_simulation import CATALOG, MEDIUM, SMALL, Entry, entry, make_pool, running


def _build(entries: Sequence[Entry], pools: Sequence[nodepool.NodePool],
           previous: snapshot.ClusterSnapshot | None = None) -> snapshot.ClusterSnapshot:
    return snapshot.ClusterSnapshot.build(entries, pools, {p.name: list(CATALOG) for p in pools}, previous=previous)


def _fresh_view(info: snapshot.NodeInfo) -> tuple[object, ...]:
    """What is computed from a NodeInfo, from a copy that remembers nothing."""
    plain = snapshot.NodeInfo(info.node, info.nodeclaim, info.nodepool, info.pods, info.instance_type, info.zone,
                              info.capacity_type, info.price)
    bin_ = plain.existing_node()
    return ([p.key for p in plain.reschedulable_pods()], bin_.allocatable, [p.key for p in bin_.pods],
            prefilter._free(plain), prefilter._requests(plain))


def _view(info: snapshot.NodeInfo) -> tuple[object, ...]:
    bin_ = info.existing_node()
    return ([p.key for p in info.reschedulable_pods()], bin_.allocatable, [p.key for p in bin_.pods],
            prefilter._free(info), prefilter._requests(info))


def test_an_unchanged_node_is_kept_and_a_node_whose_pods_changed_is_read_again() -> None:
    pool = make_pool()
    same = entry("same", MEDIUM, [running("a", "same")])
    moved = entry("moved", MEDIUM, [running("b", "moved")])
    first = _build([same, moved], [pool])
    for info in first.nodes:
        _view(info)  # computed and remembered
    n, claim, pods = moved
    second = _build([same, (n, claim, [*pods, running("c", "moved", cpu="2")])], [pool], previous=first)
    assert second.node("same") is first.node("same")
    kept, changed = second.node("same"), second.node("moved")
    assert kept is not None and changed is not None and changed is not first.node("moved")
    assert _view(changed) == _fresh_view(changed)
    assert prefilter._free(changed) == [4000 - 3000, (64 * 2**30 - 2 * 128 * 2**20) * 1000, 110_000 - 2000]
    assert _view(kept) == _fresh_view(kept)


def test_a_node_on_another_instance_type_or_node_object_is_read_again() -> None:
    pool = make_pool()
    first = _build([entry("n", MEDIUM, [running("a", "n")])], [pool])
    _view(first.nodes[0])
    resized = _build([entry("n", SMALL, [running("a", "n")])], [pool], previous=first)
    assert resized.nodes[0] is not first.nodes[0]
    assert resized.nodes[0].instance_type is SMALL
    assert _view(resized.nodes[0]) == _fresh_view(resized.nodes[0])
    assert prefilter._free(resized.nodes[0])[0] == 2000 - 1000


def test_a_newer_object_of_the_nodepool_keeps_what_was_computed_but_holds_the_new_nodepool() -> None:
    pool = make_pool()
    e = entry("n", MEDIUM, [running("a", "n")])
    first = _build([e], [pool])
    remembered = _view(first.nodes[0])
    newer = dataclasses.replace(pool, metadata=dataclasses.replace(pool.metadata, resource_version="2"))
    second = _build([e], [newer], previous=first)
    info = second.nodes[0]
    assert info is not first.nodes[0] and info.nodepool is newer and info == dataclasses.replace(
        first.nodes[0], nodepool=newer)
    assert info.existing_node() is first.nodes[0].existing_node()
    assert _view(info) == remembered == _fresh_view(info)


def test_candidates_are_ordered_by_their_pods_disruption_cost_in_every_snapshot() -> None:
    pool = make_pool()
    cheap = running("cheap", "n0")
    dear = dataclasses.replace(cheap, metadata=dataclasses.replace(
        cheap.metadata, name="dear", annotations={"controller.kubernetes.io/pod-deletion-cost": str(2**30)}))
    pods = (cheap,)
    assert balanced.node_disruption_cost(pods) == balanced.node_disruption_cost(pods) == 2.0
    assert balanced.node_disruption_cost((dear,)) == 1.0 + 1.0 + 2**30 / 2**27
    assert balanced.node_disruption_cost([dear]) == balanced.node_disruption_cost((dear,))
    first = _build([entry("n0", MEDIUM, [cheap]), entry("n1", MEDIUM, [running("x", "n1")])], [pool])
    assert [c.name for c in consolidation._eligible(first, _cands(first), "Underutilized")] == ["n0", "n1"]
    second = _build([entry("n0", MEDIUM, [dear]), entry("n1", MEDIUM, [running("x", "n1")])], [pool], previous=first)
    assert [c.name for c in consolidation._eligible(second, _cands(second), "Underutilized")] == ["n1", "n0"]


def _cands(snap: snapshot.ClusterSnapshot) -> list[candidates.Candidate]:
    out = []
    for info in snap.nodes:
        assert info.nodeclaim is not None and info.nodepool is not None
        out.append(candidates.Candidate(info.node, info.nodeclaim, info.nodepool, info.pods))
    return out
