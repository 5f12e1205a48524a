"""``grouping_paths.hostname_capped`` tells, without computing the caps, whether
``Placement.hostname_cap`` caps a group: for every kind of hostname term, carried or only matched,
in provisioner runs (pods that match a spread keep it) and kube-scheduler runs."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import pod
from karpy.provisioning import grouping_paths, podgroups
from karpy.provisioning import placement as placement_mod

HOST = "kubernetes.io/hostname"
SELECT = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule", **SELECT}]}
LOOSE = {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway", **SELECT}]}
ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [SELECT]}}}
AFFINITY = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [SELECT]}}}
PREFERRED_ANTI = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 10, "podAffinityTerm": SELECT}]}}}
SHAPES: dict[str, dict[str, Any]] = {"spread": SPREAD, "loose spread": LOOSE, "anti": ANTI, "affinity": AFFINITY,
                                     "preferred anti": PREFERRED_ANTI, "none": {}}


@pytest.mark.parametrize("count_matching", [True, False])
@pytest.mark.parametrize("carrier", sorted(SHAPES))
def test_a_group_is_said_capped_exactly_when_its_hostname_cap_is_not_none(carrier: str, count_matching: bool) -> None:
    pods = [pod.build("carrier", labels={"app": "other"}, requests={"cpu": "1"}, **SHAPES[carrier]),
            pod.build("matching", labels={"app": "web"}, requests={"cpu": "2"}),
            pod.build("carrying-and-matching", labels={"app": "web"}, requests={"cpu": "3"}, **SHAPES[carrier]),
            pod.build("unrelated", labels={"app": "db"}, requests={"cpu": "4"})]
    groups = podgroups.group_pods(pods)
    run = placement_mod.Placement(["cpu", "memory", "pods"], [], groups, [], [], count_matching=count_matching)
    said = {g.pods[0].name: grouping_paths.hostname_capped(run, g) for g in groups}
    assert said == {g.pods[0].name: run.hostname_cap(g, run.bins.n) is not None for g in groups}
    if carrier in ("spread", "anti", "affinity"):
        assert said["carrier"] and said["carrying-and-matching"]
    assert not said["unrelated"]
