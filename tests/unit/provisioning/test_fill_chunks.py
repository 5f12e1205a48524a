"""``grouping_paths.fill`` works out only the bins that may take a pod: its scan grows in chunks and
stops once the pods are placed, also for groups capped by hostname terms, and skips the bins
outside the domain it fills. The plans are the very ones of one full scan of every bin."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import pod
from karpy.provisioning import bins as bins_mod
from karpy.provisioning import grouping_paths, podgroups, results
from karpy.provisioning import placement as placement_mod

from . import builders as b

KINDS = ["zonal", "hostname", "anti", "affinity", "generic"]


_pods = b.kind_pods


def _plan(res: results.Results) -> list[tuple[str, str]]:
    """Where every pod went (an existing node or a new claim with its types and zones) and why not."""
    out = [(p.key, name) for name, pods in res.existing.items() for p in pods]
    for c in res.new_claims:
        where = f"{c.hostname} {c.instance_type_names()} {sorted(b.claim_zones(c))}"
        out += [(p.key, where) for p in c.pods]
    return out + sorted(res.errors.items())


def _full_scan(run: Any, g: Any, req: Any, domain: tuple[str, str] | None, lo: int, hi: int,
               known: Any) -> tuple[int, Any]:
    """Every bin of the chunk worked out, with the domain as a constraint (before the skipping)."""
    if known is not None:
        assert domain is not None
        return lo, known.part(lo, hi) * run.bins.domain_mask(domain[0], {domain[1]}, lo, hi)
    constraints = {domain[0]: {domain[1]}} if domain is not None else {}
    return lo, grouping_paths.fit_counts(run, g, req, constraints, lo, hi)


group = st.tuples(st.sampled_from(KINDS), st.integers(min_value=1, max_value=9), st.sampled_from(["250m", "1", "3"]))


@settings(max_examples=40, deadline=None)
@given(mix=st.lists(group, min_size=1, max_size=7),
       room=st.lists(st.tuples(st.integers(min_value=0, max_value=6), st.integers(min_value=0, max_value=1)),
                     max_size=14))
def test_fill_in_small_chunks_and_only_the_domain_makes_the_plan_of_one_full_scan(
        mix: list[tuple[str, int, str]], room: list[tuple[int, int]]) -> None:
    pods = [p for i, (kind, count, cpu) in enumerate(mix) for p in _pods(kind, i, count, cpu)]
    # existing nodes in two of the three zones: the third zone's share goes to new claims only
    existing = [b.existing_node(f"node-{j}", cpu=cpus, memory_gi=2 * cpus + 1, zone=b.ZONES[zone])
                for j, (cpus, zone) in enumerate(room)]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(grouping_paths, "CHUNK", 2)  # chunks of 2, 8, 32 bins
        chunked = _plan(b.solve(pods, existing=existing))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(grouping_paths, "first_chunk", lambda run, g, n: n)
        m.setattr(grouping_paths, "_chunk_fit", _full_scan)
        full = _plan(b.solve(pods, existing=existing))
    assert chunked == full


def _rows_worked_out(pods: list[pod.Pod], existing: list[results.ExistingNode]) -> tuple[int, results.Results]:
    """How many bin rows the run's resource fits looked at (``Bins.fit_counts``), and the run."""
    seen = [0]
    real = bins_mod.Bins.fit_counts

    def counting(self: bins_mod.Bins, req: Any, lo: int = 0, hi: int | None = None) -> Any:
        out = real(self, req, lo, hi)
        seen[0] += len(out)
        return out

    with pytest.MonkeyPatch.context() as m:
        m.setattr(bins_mod.Bins, "fit_counts", counting)
        res = b.solve(pods, existing=existing)
    return seen[0], res


def test_a_spread_share_in_a_zone_without_existing_nodes_works_out_none_of_them() -> None:
    existing = [b.existing_node(f"node-{j}", zone="zone-a") for j in range(3 * grouping_paths.CHUNK)]
    pods = _pods("zonal", 0, 3, "250m")  # one pod per zone: two of them on new claims
    rows, res = _rows_worked_out(pods, existing)
    assert sorted(len(c.pods) for c in res.new_claims) == [1, 1]
    assert rows <= grouping_paths.CHUNK + 8


def test_a_hostname_anti_affinity_group_placed_on_the_first_nodes_works_out_the_first_chunk_only() -> None:
    existing = [b.existing_node(f"node-{j}", zone=b.ZONES[j % 3]) for j in range(4 * grouping_paths.CHUNK)]
    pods = _pods("anti", 0, 5, "250m")
    rows, res = _rows_worked_out(pods, existing)
    assert not res.new_claims
    assert sorted(res.existing) == [f"node-{j}" for j in range(5)]
    assert rows <= grouping_paths.CHUNK


def test_a_group_carrying_hostname_affinity_works_out_every_bin_at_once_and_follows_its_first_pod() -> None:
    existing = [b.existing_node(f"node-{j}", cpu=1) for j in range(grouping_paths.CHUNK + 10)]
    pods = _pods("affinity", 0, 3, "250m")
    groups = podgroups.group_pods(pods + _pods("anti", 1, 2, "1"))
    run = placement_mod.Placement(["cpu", "memory", "pods"], [], groups, existing, [])
    chunks = {g.pods[0].name: grouping_paths.first_chunk(run, g, run.bins.n) for g in groups}
    assert chunks == {"affinity-0-0": run.bins.n, "anti-1-0": grouping_paths.CHUNK}
    res = b.solve(pods, existing=existing)
    assert {name: len(p) for name, p in res.existing.items()} == {"node-0": 3}
