"""The re-pack MILP's memo: a problem asked again is answered with the packing solved the first time,
and any change to the problem is solved anew."""

from __future__ import annotations

from typing import Any

import pytest
from scipy import optimize

from karpy.disruption import milp

from ..provisioning import builders as pb
from .test_consolidation import MILP_TYPES, MIXED, bin_options


def _shape(packed: list[milp.PackedNode] | None) -> list[tuple[str, list[str]]]:
    assert packed is not None
    return [(n.option.instance_type.name, [p.key for p in n.pods]) for n in packed]


def test_the_same_problem_asked_again_is_answered_from_the_memo_with_the_same_packing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    solves: list[int] = []
    real = optimize.milp

    def counted(*args: Any, **kwargs: Any) -> Any:
        solves.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(optimize, "milp", counted)
    memo = milp.Memo()
    plain = milp.milp_pack(MIXED, bin_options(MILP_TYPES))
    first = milp.milp_pack(MIXED, bin_options(MILP_TYPES), memo=memo)
    again = milp.milp_pack(list(MIXED), bin_options(MILP_TYPES), memo=memo)  # new lists, same problem
    assert _shape(first) == _shape(again) == _shape(plain)
    assert (len(solves), memo.solved, memo.hits) == (2, 1, 1)
    cheaper = sum(n.option.price for n in first or []) - 0.01  # another budget: another problem
    assert milp.milp_pack(MIXED, bin_options(MILP_TYPES), budget=cheaper, memo=memo) is None
    assert milp.milp_pack(MIXED, bin_options(MILP_TYPES), budget=cheaper, memo=memo) is None  # "none" is kept too
    assert (len(solves), memo.solved, memo.hits) == (3, 2, 2)
    more = [*MIXED, *pb.make_pods("extra", 1, cpu="1", memory="1Gi")]  # another pod: another problem
    assert sum(len(n.pods) for n in milp.milp_pack(more, bin_options(MILP_TYPES), memo=memo) or []) == len(more)
    assert memo.solved == 3


def test_the_memo_keeps_at_most_its_limit_of_problems() -> None:
    memo = milp.Memo(limit=2)
    for i in range(4):
        memo.put(bytes([i]), i)
    assert memo.get(bytes([0])) == (False, None)
    assert memo.get(bytes([3])) == (True, 3)


def _count_derivations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the name of every instance type whose requirements are worked out from now on."""
    from karpy.provisioning import scheduler

    derived: list[str] = []
    real = scheduler.instance_type_requirements

    def counted(t: Any) -> Any:
        derived.append(t.name)
        return real(t)

    monkeypatch.setattr(scheduler, "instance_type_requirements", counted)
    return derived


def test_a_pools_allowed_types_are_worked_out_once_across_passes_sharing_a_memo(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from karpy.disruption import prefilter

    from .test_simulation import CATALOG, MEDIUM, cluster, entry, make_pool, running

    derived = _count_derivations(monkeypatch)
    memo = milp.Memo()
    pool = make_pool()
    answers = []
    for _ in range(3):  # three consolidation passes: three snapshots, one memo
        snap, _ = cluster([entry("n1", MEDIUM, [running("a", "n1")], created=0.0)], CATALOG, [pool],
                          milp_memo=memo)
        answers.append(([t.name for t, _ in milp._pool_types(snap, pool)],
                        [(t.name, price) for t, price in prefilter._pool_types(snap, pool)]))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][0] == [t.name for t in CATALOG]
    assert sorted(derived) == sorted(t.name for t in CATALOG)  # once per type, not once per pass
    other = make_pool()  # another NodePool object (its spec read again): asked anew, same answer
    snap, _ = cluster([entry("n1", MEDIUM, [running("a", "n1")], created=0.0)], CATALOG, [other], milp_memo=memo)
    assert [t.name for t, _ in milp._pool_types(snap, other)] == answers[0][0]


def test_the_prefilters_verdicts_over_a_catalog_derive_no_instance_type_requirements(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The prefilter keeps its per-type verdicts in the types' memo; the types' own requirements (a
    parse of every label, over a whole catalog) are worked out only when the MILP asks for them."""
    from karpy.disruption import prefilter
    from karpy.provisioning import scheduler

    from .test_simulation import CATALOG, MEDIUM, cluster, entry, make_pool, running

    real = scheduler.instance_type_requirements
    derived = _count_derivations(monkeypatch)
    pool = make_pool()
    snap, _ = cluster([entry("n1", MEDIUM, [running("a", "n1")], created=0.0)], CATALOG, [pool],
                      milp_memo=milp.Memo())
    assert [t.name for t, _ in prefilter._pool_types(snap, pool)] == [t.name for t in CATALOG]
    assert derived == []
    assert [t.name for t, _ in milp._pool_types(snap, pool)] == [t.name for t in CATALOG]
    assert sorted(derived) == sorted(t.name for t in CATALOG)
    assert milp._type_requirements(snap, CATALOG[0]) == real(CATALOG[0])
