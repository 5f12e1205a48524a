"""``karpy design`` as a user runs it: a tiny space on a scenario and a trace, JSON and table out, a report."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from support import design_workload

pytestmark = pytest.mark.e2e


def karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture()
def files(tmp_path: pathlib.Path) -> dict[str, str]:
    out = {}
    for name, text in (("workload.yaml", design_workload.SCENARIO), ("trace.csv", design_workload.TRACE_CSV),
                       ("space.yaml", design_workload.SPACE)):
        (tmp_path / name).write_text(text)
        out[name] = str(tmp_path / name)
    return out


def test_the_command_prints_the_front_and_a_ready_to_apply_recommended_node_pool_and_writes_a_report(
        files: dict[str, str], tmp_path: pathlib.Path) -> None:
    common = [files["workload.yaml"], "--trace", files["trace.csv"], "--space", files["space.yaml"], "--trials", "4",
              "--seeds", "1", "--for", "15m", "--parallel", "1", "--max-p95-pending", "10m", "--population", "2"]
    done = karpy("design", *common, "--output", "json", "--report", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["options"]["trials"] == 4 and data["options"]["seeds"] == [0]
    assert data["input"]["design"] == {} and data["front"]
    rec = data["recommended"]
    assert rec["label"] in [e["label"] for e in data["front"]]
    [pool] = list(yaml.safe_load_all(rec["yaml"]))
    assert pool["apiVersion"] == "karpenter.sh/v1" and pool["kind"] == "NodePool"
    assert pool["metadata"]["name"] == "general"
    assert rec["diff"].startswith("--- input: NodePool/general\n+++ recommended\n")
    for e in [data["input"], *data["front"]]:
        figures = e["figures"]
        assert set(figures) == {"cost", "p95Pending", "disruptionsPerHour", "nodesLaunched"}
        assert figures["cost"]["min"] <= figures["cost"]["mean"] <= figures["cost"]["max"]
        assert figures["cost"]["mean"] > 0
    report = tmp_path / "report"
    assert {"index.html", "pareto.png", "effects.png", "timeline-1.png"} <= {p.name for p in report.iterdir()}
    assert "How each variable moved cost" in (report / "index.html").read_text()

    table = karpy("design", *common)
    assert table.returncode == 0, table.stderr
    assert "Pareto front" in table.stdout and "Recommended (*, lowest cost)" in table.stdout
    assert "kind: NodePool" in table.stdout and "# diff against the input" in table.stdout


def test_a_bad_space_exits_2_naming_the_field_expected_and_found(files: dict[str, str], tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(design_workload.SPACE.replace("consolidateAfter: [30s, 5m]", "consolidateAfter: [30s, later]"))
    done = karpy("design", files["workload.yaml"], "--space", str(bad), "--trials", "2")
    assert done.returncode == 2
    assert f"{bad}: DesignSpace/tiny: spec.variables.consolidateAfter[1]: expected a duration" in done.stderr
    assert "found 'later'" in done.stderr


def test_no_design_within_the_bounds_exits_1_and_shows_the_closest(files: dict[str, str]) -> None:
    done = karpy("design", files["workload.yaml"], "--space", files["space.yaml"], "--trials", "2", "--seeds", "1",
                 "--for", "10m", "--parallel", "1", "--max-p95-pending", "0s", "--population", "2")
    assert done.returncode == 1, done.stderr
    assert "No design kept the p95 pending time and disruptions within the bounds." in done.stdout
    assert "Closest:" in done.stdout
