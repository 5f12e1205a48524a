"""``spec.faults.plan``: a fault of a named kind at a named moment, certain whatever the rates draw
and however many calls the controllers make."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import errors
from karpy.simulator import engine, faultspec, scenario

from . import test_pod_faults

FAULTS = """  faults:
    plan: {plan}
  steps:
  - at: 40m
    scale: {{kind: Deployment, name: web, replicas: 16}}"""
"""The pod-faults scenario (a NodePool, its EC2NodeClass, 10 web pods) with a plan and a scale-up at 40m."""

PLAN = "[{at: 0s, fault: iceAtLaunch}, {at: 30m, fault: conflict}, {at: 40m, fault: lostLaunchResponse}]"


def _simulate(seed: int, plan: str) -> tuple[engine.Simulation, dict[str, Any]]:
    text = test_pod_faults.SCENARIO.format(faults=FAULTS.format(plan=plan)).replace("seed: 3", f"seed: {seed}")
    sim = engine.Simulation(scenario.load_text(text))
    sim.run()
    return sim, sim.metrics_summary()["simulator"]


def _fired_at(sim: engine.Simulation, fault: str) -> list[float]:
    return [n["t"] for n in sim.notes if n["message"] == f"planned fault {fault}: fired"]


@pytest.mark.parametrize("seed", [1, 7])
def test_each_planned_fault_fires_in_one_step_from_its_moment_with_no_random_faults(seed: int) -> None:
    sim, summary = _simulate(seed, PLAN)
    injected = summary["faultsInjected"]
    # no rates: only the planned kinds fire; each at least once (a step's calls all see rate 1)
    assert set(injected) == {"iceAtLaunch", "conflict", "lostLaunchResponse"}
    assert all(n >= 1 for n in injected.values()), injected  # more than 1: the step's other calls too
    assert len(_fired_at(sim, "iceAtLaunch")) == 1 and _fired_at(sim, "iceAtLaunch")[0] < 60
    assert len(_fired_at(sim, "conflict")) == 1 and _fired_at(sim, "conflict")[0] >= 1800
    # the launch of the 40m scale-up loses its response; karpy finds the instance instead of a second one
    assert len(_fired_at(sim, "lostLaunchResponse")) == 1 and _fired_at(sim, "lostLaunchResponse")[0] >= 2400
    web = [p for p in sim.cluster.objects("Pod") if (p["metadata"].get("labels") or {}).get("app") == "web"]
    assert sorted(p["status"].get("phase") for p in web) == ["Running"] * 16
    claims = sim.cluster.objects("NodeClaim")
    assert len({c["status"].get("providerID") for c in claims}) == len(claims) == len(sim.cluster.objects("Node"))


def test_a_planned_fault_whose_moment_is_after_the_end_never_fires() -> None:
    sim, summary = _simulate(1, "[{at: 3h, fault: conflict}]")
    assert summary.get("faultsInjected", {}).get("conflict", 0) == 0 and _fired_at(sim, "conflict") == []


def test_the_plan_is_read_strictly() -> None:
    f = faultspec.read({"plan": [{"at": "20m", "fault": "iceAtLaunch"}, {"at": "5m", "fault": "conflict"}]},
                       "Scenario/x")
    assert f.plan == ((300.0, "conflict"), (1200.0, "iceAtLaunch")) and f.any
    for bad, path in (({"plan": [{"at": "5m", "fault": "meteorStrike"}]}, "spec.faults.plan[0].fault"),
                      ({"plan": [{"at": "soon", "fault": "conflict"}]}, "spec.faults.plan[0].at"),
                      ({"plan": [{"at": "5m", "fault": "conflict", "rate": 1}]}, "spec.faults.plan[0]")):
        with pytest.raises(errors.ValidationError) as err:
            faultspec.read(bad, "Scenario/x")
        assert path in str(err.value)
    with pytest.raises(errors.ValidationError) as err:
        faultspec.read({"plan": [{"at": "5m", "fault": "meteorStrike"}]}, "Scenario/x")
    assert "iceAtLaunch" in str(err.value)  # the message lists the kinds a plan may name
