"""Spot share per workload end to end, in virtual time (issue 23 section 7, aws/karpenter-provider-aws#2508):
10 replicas annotated ``karpy.io/max-spot-percent: "30"``, spot cheaper than on-demand: at no bind during
the burst, nor after consolidation repacked the nodes, are more than 3 of them on spot. The control run
(the same scenario without the annotation) puts more than 3 on spot, so the check has teeth."""

from __future__ import annotations

import functools
import pathlib
from typing import Any

from karpy.simulator import engine, scenario

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "spot-share.yaml"
ANNOTATION = '    karpy.io/max-spot-percent: "30"\n'


def _api_on_spot(cluster: Any) -> int:
    spot = {n["metadata"]["name"] for n in cluster.list("Node")
            if (n["metadata"].get("labels") or {}).get("karpenter.sh/capacity-type") == "spot"}
    return sum(1 for p in cluster.list("Pod")
               if (p["metadata"].get("labels") or {}).get("app") == "api" and p["spec"].get("nodeName") in spot
               and not p["metadata"].get("deletionTimestamp"))


@functools.cache
def _run(text: str) -> tuple[engine.Simulation, engine.Result, list[int]]:
    sim = engine.Simulation(scenario.load_text(text))
    seen: list[int] = []
    sim.cluster.watch("Pod", lambda event, obj: seen.append(_api_on_spot(sim.cluster))
                      if obj.get("spec", {}).get("nodeName") else None)
    return sim, sim.run(), seen


def _text(annotated: bool = True) -> str:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert ANNOTATION in text
    return text if annotated else text.replace(ANNOTATION, "")


def test_at_most_three_of_ten_replicas_are_on_spot_at_every_bind_of_the_run() -> None:
    _, _, seen = _run(_text())
    assert seen and max(seen) <= 3


def test_after_consolidation_every_replica_runs_and_at_most_three_are_on_spot() -> None:
    sim, result, _ = _run(_text())
    disrupted = [e for e in result.events if e.get("reason") == "DisruptionTerminating"]
    assert disrupted  # consolidation did repack the nodes
    api = [p for p in sim.cluster.list("Pod") if (p["metadata"].get("labels") or {}).get("app") == "api"]
    assert len(api) == 10 and all(p["status"].get("phase") == "Running" for p in api)
    assert _api_on_spot(sim.cluster) <= 3


def test_with_no_other_workload_the_burst_uses_its_three_spot_replicas_and_no_more() -> None:
    text = _text().replace("    scale: {kind: Deployment, namespace: default, name: filler, replicas: 12}",
                           "    scale: {kind: Deployment, namespace: default, name: filler, replicas: 0}")
    sim, _, seen = _run(text)
    assert max(seen) == 3
    assert _api_on_spot(sim.cluster) == 3


def test_without_the_annotation_more_than_three_replicas_go_to_the_cheaper_spot() -> None:
    _, _, seen = _run(_text(annotated=False))
    assert max(seen) > 3


def test_a_bad_annotation_value_warns_on_the_deployment_naming_field_expected_and_found() -> None:
    _, result, _ = _run(_text().replace(ANNOTATION, '    karpy.io/max-spot-percent: "lots"\n'))
    warnings = [e for e in result.events if e.get("reason") == "InvalidSpotShare"]
    assert warnings
    message = warnings[0]["message"]
    assert warnings[0]["involvedObject"]["kind"] == "Deployment"
    assert "Deployment default/api" in message and "karpy.io/max-spot-percent" in message
    assert "whole number of percent from 0 to 100" in message and "'lots'" in message
