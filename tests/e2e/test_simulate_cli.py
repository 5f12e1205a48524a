"""``karpy simulate`` as a user runs it: a subprocess on the example scenarios."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.e2e

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
SEED = EXAMPLES / "eks-scale-out-v1alpha5.yaml"
DOCUMENT_KEYS = {"scenario", "objects", "events", "metrics", "timeline", "notes", "reconcileErrors"}


def karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_same_seed_gives_byte_identical_json() -> None:
    first = karpy("simulate", str(SEED), "--seed", "4", "--output", "json")
    second = karpy("simulate", str(SEED), "--seed", "4", "--output", "json")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    assert set(doc) == DOCUMENT_KEYS
    assert set(doc["objects"]) == {"nodes", "nodeclaims", "pods", "nodepools"}
    assert doc["scenario"]["seed"] == 4
    # the whole story: three r5.large launched at 3m, emptied by the scale-down at 8m and removed
    assert doc["objects"]["nodeclaims"] == []
    launched = [e for e in doc["events"] if e["reason"] == "Launched" or e["reason"] == "Nominated"]
    assert launched
    terminating = [e for e in doc["events"] if e["reason"] == "DisruptionTerminating"]
    assert {e["involvedObject"]["kind"] for e in terminating} == {"Node", "NodeClaim"}
    assert all({"time", "type", "reason", "involvedObject", "message"} <= set(e) for e in doc["events"])


def test_before_the_scale_down_three_r5_large_nodeclaims_hold_the_replicas_that_did_not_fit() -> None:
    out = karpy("simulate", str(SEED), "--seed", "4", "--until", "7m", "--output", "json")
    assert out.returncode == 0, out.stderr
    claims = json.loads(out.stdout)["objects"]["nodeclaims"]
    assert [c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims] == ["r5.large"] * 3


def test_a_different_seed_gives_different_names() -> None:
    a = karpy("simulate", str(SEED), "--seed", "1", "--until", "5m", "--output", "json")
    b = karpy("simulate", str(SEED), "--seed", "2", "--until", "5m", "--output", "json")
    assert a.returncode == b.returncode == 0
    names_a = [n["metadata"]["name"] for n in json.loads(a.stdout)["objects"]["nodes"]]
    names_b = [n["metadata"]["name"] for n in json.loads(b.stdout)["objects"]["nodes"]]
    assert len(names_a) == len(names_b) == 6
    assert names_a != names_b


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_runs_and_prints_the_tables(example: str) -> None:
    result = karpy("simulate", str(EXAMPLES / example))
    assert result.returncode == 0, result.stderr
    for title in ("NODES", "NODECLAIMS", "PODS NOT RUNNING", "EVENTS (source=karpenter)", "Cost: $"):
        assert title in result.stdout
    assert "Traceback" not in result.stderr


def test_yaml_output_is_the_same_document_as_json() -> None:
    as_yaml = karpy("simulate", str(SEED), "--until", "4m", "--output", "yaml")
    as_json = karpy("simulate", str(SEED), "--until", "4m", "--output", "json")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


def test_until_overrides_the_scenario_and_the_timeline_ends_there() -> None:
    result = karpy("simulate", str(SEED), "--until", "2m", "--output", "json")
    doc = json.loads(result.stdout)
    assert doc["scenario"]["until"] == "2m"
    assert doc["timeline"][-1]["t"] == 120.0


def test_a_bad_scenario_exits_2_naming_the_document_and_the_field(tmp_path: pathlib.Path) -> None:
    text = SEED.read_text().replace("  - at: 8m\n", "  - at: eight minutes\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = karpy("simulate", str(bad), "--output", "json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "document 1 (Scenario/eks-scale-out-v1alpha5)" in result.stderr
    assert "spec.steps[1].at" in result.stderr
    assert "'eight minutes'" in result.stderr


def test_a_bad_manifest_in_the_file_exits_2_before_anything_runs(tmp_path: pathlib.Path) -> None:
    text = SEED.read_text().replace("operator: In\n      values: ['on-demand']", "operator: Maybe\n"
                                                                              "      values: ['on-demand']")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    report = tmp_path / "report"
    result = karpy("simulate", str(bad), "--report", str(report))
    assert result.returncode == 2
    assert "document 2 (Provisioner/default" in result.stderr
    assert "operator" in result.stderr
    assert not (report / "index.html").exists()


def test_a_bad_until_exits_2() -> None:
    result = karpy("simulate", str(SEED), "--until", "forever")
    assert result.returncode == 2
    assert "--until" in result.stderr and "'forever'" in result.stderr


def test_the_report_has_an_html_page_with_the_plots(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "report"
    result = karpy("simulate", str(SEED), "--report", str(out), "--output", "json")
    assert result.returncode == 0, result.stderr
    page = (out / "index.html").read_text()
    for name in ("nodes-by-nodepool.png", "nodes-by-instance-type.png", "pending-pods.png", "cost.png"):
        png = (out / name).read_bytes()
        assert png.startswith(b"\x89PNG")
        assert len(png) > 5000
    assert page.count("data:image/png;base64,") == 4
    assert "FailedScheduling" in page and "Nominated" in page


def test_the_default_table_tells_what_karpy_did_and_wide_is_accepted() -> None:
    for flags in ((), ("--wide",)):
        out = karpy("simulate", str(SEED), *flags)
        assert out.returncode == 0, out.stderr
        launched = out.stdout.split("NODECLAIMS LAUNCHED\n", 1)[1].split("NODES DISRUPTED", 1)[0]
        assert launched.count("r5.large") == 3
        assert out.stdout.split("NODES DISRUPTED\n", 1)[1].split("NODES\n", 1)[0].count("Empty/Delete") == 3
