"""Replica counts and the simulator's stated limits: replicas above int32 are refused as Kubernetes
refuses them; a scenario asking for more pods than a run may hold is refused at load (a flag raises
the limit); a run going over its node limit stops with an error after saying it is near; ``whatif``
says when a Deployment has no ReplicaSet."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner

from karpy import cli
from karpy.api import errors, manifest
from karpy.simulator import engine, limits, scenario, whatif_state

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def _deployment(replicas: int, name: str = "web") -> str:
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: web, image: nginx, resources: {{requests: {{cpu: 100m}}}}}}]}}
"""


def _scenario(replicas: int, steps: str = "") -> str:
    return ("apiVersion: karpy.io/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nspec:\n"
            "  cloud: {provider: kwok}\n  until: 5m\n" + steps + _deployment(replicas))


@pytest.mark.parametrize("replicas", [2**31, 2**63, 10**30])
def test_replicas_above_int32_are_refused_as_kubernetes_refuses_them(replicas: int) -> None:
    with pytest.raises(errors.ValidationError) as info:
        manifest.load_documents(_deployment(replicas))
    (err,) = info.value.errors
    assert err.path == "spec.replicas" and "2147483647" in err.expected


def test_replicas_of_int32s_largest_load_but_a_run_refuses_them_at_load_naming_the_flag() -> None:
    assert manifest.load_documents(_deployment(2**31 - 1)).objects
    with pytest.raises(errors.ValidationError) as info:
        scenario.load_text(_scenario(1_000_000), source="big.yaml")
    (err,) = info.value.errors
    assert "--max-pods" in err.expected and "1000000 pods requested" in str(err.found)
    assert "Deployment default/web: 1000000" in str(err.found)


def test_a_scale_step_counts_towards_the_limit_and_above_int32_is_refused() -> None:
    steps = "  steps:\n  - at: 1m\n    scale: {kind: Deployment, name: web, replicas: REPLICAS}\n"
    with pytest.raises(errors.ValidationError, match="--max-pods"):
        scenario.load_text(_scenario(1, steps.replace("REPLICAS", "200000")))
    with pytest.raises(errors.ValidationError, match="2147483647"):
        scenario.load_text(_scenario(1, steps.replace("REPLICAS", str(2**31))))


def test_a_raised_limit_accepts_the_scenario() -> None:
    scn = scenario.load_text(_scenario(150_000), limits=limits.Limits(max_pods=200_000))
    assert scn.limits.max_pods == 200_000


def test_a_limit_must_be_a_positive_integer() -> None:
    with pytest.raises(errors.ValidationError, match="--max-nodes"):
        limits.Limits(max_nodes=0)


def test_the_watch_says_once_when_near_and_stops_the_run_above_the_limit() -> None:
    heard: list[str] = []
    watch = limits.Watch(limits.Limits(max_pods=10, max_nodes=100), heard.append)
    watch.observe(8, 1, "1m")
    watch.observe(9, 1, "2m")
    assert heard == ["8 pods at 1m: 80% of this run's limit of 10 (--max-pods raises it)"]
    with pytest.raises(limits.LimitExceededError, match="at most 10 pods"):
        watch.observe(11, 1, "3m")


def test_a_run_over_its_node_limit_stops_with_an_error_after_saying_it_is_near() -> None:
    heard: list[str] = []
    scn = scenario.load(EXAMPLES / "eks-scale-out-v1alpha5.yaml", limits=limits.Limits(max_nodes=3))
    with pytest.raises(limits.LimitExceededError, match="at most 3 nodes in one run"):
        engine.Simulation(scn, notify=heard.append).run()
    assert heard and "of this run's limit of 3 (--max-nodes raises it)" in heard[0]


def test_karpy_simulate_refuses_a_scenario_over_max_pods_without_a_traceback(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_scenario(20))
    result = CliRunner().invoke(cli.main, ["simulate", str(path), "--max-pods", "10"])
    assert result.exit_code == 2, result.output
    assert "at most 10 pods in one simulation run" in result.output and "Traceback" not in result.output


def test_whatif_says_when_a_deployment_has_no_replicaset() -> None:
    state = whatif_state.read([("dump.yaml", _deployment(3) + _deployment(0, "idle"))])
    assert any("Deployment default/web (3 replicas) has no ReplicaSet" in w for w in state.warnings)
    assert not any("idle" in w for w in state.warnings)
