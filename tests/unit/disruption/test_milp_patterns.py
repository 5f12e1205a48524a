"""The re-pack MILP's pattern form: maximal patterns, the same optimum as the assignment form, a
deterministic work limit, and the fallback past the pattern listing's limit."""

from __future__ import annotations

import random
from typing import Any

import pytest
from scipy import optimize

from karpy.disruption import milp, milp_patterns

from ..provisioning import builders as pb
from .test_consolidation import MILP_TYPES, MIXED, bin_options


def _cost(packed: list[milp.PackedNode] | None) -> float | None:
    return None if packed is None else round(sum(n.option.price for n in packed), 9)


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, dict[str, Any], int]]:
    """(variables, options, status) of every HiGHS call."""
    calls: list[tuple[int, dict[str, Any], int]] = []
    real = optimize.milp

    def recorded(c: Any, **kwargs: Any) -> Any:
        options = dict(kwargs["options"])  # SciPy takes the options it reads out of the dict
        res = real(c, **kwargs)
        calls.append((len(c), options, int(res.status)))
        return res

    monkeypatch.setattr(optimize, "milp", recorded)
    return calls


def test_every_maximal_pattern_fits_its_bin_and_leaves_no_room_for_another_available_pod() -> None:
    req = [[3, 2], [2, 8], [1, 1]]
    count = [2, 5, 3]
    cap = [8, 16]
    found = milp_patterns.maximal(req, count, cap, [True, True, True], [10_000])
    assert found is not None and found
    assert len(set(found)) == len(found)
    for a in found:
        used = [sum(a[s] * req[s][d] for s in range(3)) for d in range(2)]
        assert all(used[d] <= cap[d] for d in range(2))
        assert all(a[s] <= count[s] for s in range(3))
        room = [cap[d] - used[d] for d in range(2)]
        assert not any(a[s] < count[s] and all(req[s][d] <= room[d] for d in range(2)) for s in range(3))
    assert (2, 0, 2) in found  # 6 + 2 cpu: full
    assert (0, 0, 3) not in found  # room left for a 3-cpu pod


def test_a_shape_a_bin_does_not_fit_never_appears_in_its_patterns() -> None:
    found = milp_patterns.maximal([[3, 2], [1, 1]], [2, 3], [8, 16], [False, True], [10_000])
    assert found == [(0, 3)]


@pytest.mark.parametrize("seed", range(12))
def test_the_pattern_form_finds_the_assignment_forms_cheapest_price(seed: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    pods = []
    for k in range(rnd.randint(1, 4)):
        pods.extend(pb.make_pods(f"s{k}", rnd.randint(1, 6), cpu=f"{rnd.choice([250, 500, 1000, 1500, 3000])}m",
                                 memory=f"{rnd.choice([512, 1024, 4096, 8192])}Mi"))
    options = bin_options(MILP_TYPES)
    budget = None if seed % 3 else 1.0
    by_patterns = milp.milp_pack(pods, options, budget=budget)
    monkeypatch.setattr(milp_patterns, "VISIT_LIMIT", 0)
    by_assignment = milp.milp_pack(pods, options, budget=budget)
    assert _cost(by_patterns) == _cost(by_assignment)
    if by_patterns is not None:
        assert sorted(p.key for n in by_patterns for p in n.pods) == sorted(p.key for p in pods)


def test_the_milp_is_limited_by_search_nodes_so_a_loaded_machine_gets_the_same_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _calls(monkeypatch)
    assert milp.milp_pack(MIXED, bin_options(MILP_TYPES)) is not None
    monkeypatch.setattr(milp_patterns, "VISIT_LIMIT", 0)  # the assignment form too
    assert milp.milp_pack(MIXED, bin_options(MILP_TYPES)) is not None
    assert [c[1]["node_limit"] for c in calls] == [milp.MILP_NODE_LIMIT] * 2


def test_a_large_re_pack_is_solved_to_optimality_in_the_pattern_form(monkeypatch: pytest.MonkeyPatch) -> None:
    # the shape of karpy design's bench: four pod shapes, twelve types of three families
    pods = [*pb.make_pods("general", 13, cpu="1", memory="2Gi"), *pb.make_pods("compute", 8, cpu="2", memory="2Gi"),
            *pb.make_pods("memory", 10, cpu="1", memory="8Gi"), *pb.make_pods("small", 10, cpu="500m", memory="1Gi")]
    types = [pb.make_type(f"{fam}.{size}", cpu=cpu, memory_gi=cpu * per, price=round(cpu * rate, 4))
             for fam, per, rate in (("m", 4, 0.048), ("c", 2, 0.0425), ("r", 8, 0.063))
             for size, cpu in (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16))]
    calls = _calls(monkeypatch)
    packed = milp.milp_pack(pods, bin_options(types), budget=4.0, time_limit=60.0)  # the node limit binds
    assert packed is not None
    assert sorted(p.key for n in packed for p in n.pods) == sorted(p.key for p in pods)
    assert [c[2] for c in calls] == [0]  # optimal, not cut short


def test_past_the_pattern_listings_limit_the_assignment_form_answers() -> None:
    assert milp_patterns.maximal([[1, 1]] * 4, [30] * 4, [64, 64], [True] * 4, [50]) is None
    many = [*pb.make_pods("a", 12, cpu="250m", memory="256Mi"), *pb.make_pods("b", 12, cpu="500m", memory="256Mi"),
            *pb.make_pods("c", 12, cpu="750m", memory="256Mi")]
    old = milp_patterns.VISIT_LIMIT
    try:
        milp_patterns.VISIT_LIMIT = 5
        fallback = milp.milp_pack(many, bin_options(MILP_TYPES))
    finally:
        milp_patterns.VISIT_LIMIT = old
    assert _cost(fallback) == _cost(milp.milp_pack(many, bin_options(MILP_TYPES)))
