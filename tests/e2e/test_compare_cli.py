"""``karpy compare`` and ``karpy simulate --autoscaler cluster-autoscaler`` through the CLI."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "compare-eks.yaml"
FIGURES = {"timeToAllRunningSeconds", "costSpent", "pendingPodSeconds", "maxNodes"}


def karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_compare_on_the_eks_example_gives_both_autoscalers_figures_and_karpy_is_faster(tmp_path: pathlib.Path) -> None:
    done = karpy("compare", str(EXAMPLE), "--output", "json", "--report", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc) == {"karpy", "cluster-autoscaler"}
    for figures in doc.values():
        assert set(figures) >= FIGURES
        assert figures["podsNeverRunning"] == 0
    # the field report: Karpenter 1m16s, Cluster Autoscaler 1m31s from FailedScheduling to the pod starting
    assert doc["karpy"]["timeToAllRunningSeconds"] < doc["cluster-autoscaler"]["timeToAllRunningSeconds"]
    # karpy's r5.large go 30 s after the scale-down, CA's m5.large after 10 minutes unneeded
    assert doc["karpy"]["costSpent"] < doc["cluster-autoscaler"]["costSpent"]
    assert doc["karpy"]["finalNodes"] == doc["cluster-autoscaler"]["finalNodes"] == 3
    assert (tmp_path / "r" / "index.html").exists() and (tmp_path / "r" / "compare-nodes.png").exists()


def test_the_same_seed_gives_the_same_comparison() -> None:
    first = karpy("compare", str(EXAMPLE), "--output", "json", "--seed", "2")
    second = karpy("compare", str(EXAMPLE), "--output", "json", "--seed", "2")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout


def test_simulate_with_cluster_autoscaler_scales_the_node_group_and_launches_no_nodeclaim() -> None:
    done = karpy("simulate", str(EXAMPLE), "--autoscaler", "cluster-autoscaler", "--output", "json", "--until", "6m")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["objects"]["nodeclaims"] == []
    scale_ups = [e for e in doc["events"] if e["reason"] == "TriggeredScaleUp"]
    assert scale_ups and all("ng-1 3->6 (max: 6)" in e["message"] for e in scale_ups)
    groups = [n["metadata"]["labels"].get("eks.amazonaws.com/nodegroup") for n in doc["objects"]["nodes"]]
    assert groups.count("ng-1") == 6


def test_a_bad_cluster_autoscaler_expander_is_refused_naming_the_field(tmp_path: pathlib.Path) -> None:
    text = EXAMPLE.read_text().replace("expander: least-waste", "expander: cheapest")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    done = karpy("compare", str(bad))
    assert done.returncode == 2
    assert "spec.clusterAutoscaler" in done.stderr and "expander" in done.stderr
