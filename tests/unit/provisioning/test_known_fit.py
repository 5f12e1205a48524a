"""A water-fill works out its group's fit once for every domain (``grouping_paths.KnownFit``):
the plans are the very ones of fitting each domain afresh, also when hostname terms cap the group
(spread carriers, anti-affinity, pods that only match a hostname spread), on existing nodes with
room in every zone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import labels as wk
from karpy.provisioning import grouping_paths, podgroups
from karpy.provisioning import placement as placement_mod

from . import builders as b

CPUS = ["100m", "250m", "500m", "1", "1500m"]
MEMS = ["128Mi", "512Mi", "1Gi", "2Gi"]
KINDS = ["zonal", "hostname", "anti", "generic"]


_pods = b.kind_pods


group = st.tuples(st.sampled_from(KINDS), st.integers(min_value=1, max_value=12), st.sampled_from(CPUS),
                  st.sampled_from(MEMS))


@settings(max_examples=40, deadline=None)
@given(mix=st.lists(group, min_size=1, max_size=8), room=st.lists(st.integers(min_value=0, max_value=6), max_size=9))
def test_water_fill_with_the_known_fit_makes_the_plan_of_fitting_each_domain_afresh(
        mix: list[tuple[str, int, str, str]], room: list[int]) -> None:
    pods = [p for i, (kind, count, cpu, mem) in enumerate(mix) for p in _pods(kind, i, count, cpu, mem)]
    existing = [b.existing_node(f"node-{j}", cpu=cpus, memory_gi=2 * cpus + 1, zone=b.ZONES[j % 3])
                for j, cpus in enumerate(room)]
    known = b.describe(b.solve(pods, existing=existing))
    real_init = grouping_paths.KnownFit.__init__

    def knows_nothing(self: grouping_paths.KnownFit, *args: Any) -> None:
        real_init(self, *args)
        self.size = 0

    with pytest.MonkeyPatch.context() as m:
        m.setattr(grouping_paths.KnownFit, "__init__", knows_nothing)
        afresh = b.describe(b.solve(pods, existing=existing))
    assert known == afresh


def test_a_group_carrying_hostname_affinity_keeps_no_known_fit() -> None:
    follower = b.make_pod("follower", labels={"app": "web"}, affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [b.affinity_term(wk.HOSTNAME, {"app": "web"})]}})
    spreader = _pods("hostname", 0, 1, "100m", "128Mi")[0]
    groups = podgroups.group_pods([follower, spreader])
    run = placement_mod.Placement(["cpu", "memory", "pods"], [], groups, [b.existing_node("node-0")], [],
                                  count_matching=True)
    assert run.bins.n == 1
    known = {g.pods[0].name: grouping_paths.KnownFit(run, g, run.vector(g.requests)).size for g in groups}
    assert known == {"follower": 0, "hostname-0-0": 1}
