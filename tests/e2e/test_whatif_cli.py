"""``karpy whatif`` as a user runs it: a dump of a (simulated) cluster replayed through the CLI."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import yaml

from karpy.kube import interface
from karpy.simulator import engine, scenario

pytestmark = pytest.mark.e2e

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
SOURCE = EXAMPLES / "whatif-source.yaml"
DUMPED_KINDS = ("Node", "Pod", "Deployment", "ReplicaSet", "DaemonSet", "PodDisruptionBudget", "NodePool",
                "NodeClaim", "EC2NodeClass")


def karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, dict[str, list[dict[str, Any]]]]:
    """``kubectl get nodes,pods,... -A -o yaml`` of the simulated source cluster at 6m, as one List."""
    sim = engine.Simulation(scenario.load(SOURCE), seed=3)
    sim.run()
    items = {kind: sim.cluster.list(kind) for kind in DUMPED_KINDS}
    path = tmp_path_factory.mktemp("whatif") / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": [o for objs in items.values() for o in objs]}))
    return path, items


def test_a_dump_replays_without_losing_a_pod_and_consolidation_removes_underused_nodes(
        dump: tuple[pathlib.Path, dict[str, list[dict[str, Any]]]]) -> None:
    path, items = dump
    done = karpy("whatif", str(path), "--output", "json", "--for", "20m")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    karpy_nodes = [n for n in items["Node"] if "karpenter.sh/nodepool" in interface.labels_of(n)]
    assert answer["before"]["byNodePool"]["general"]["nodes"] == len(karpy_nodes) == 3
    assert answer["before"]["byNodePool"]["(unmanaged)"]["nodes"] == 3
    # the unmanaged node group is never touched
    assert answer["after"]["byNodePool"]["(unmanaged)"] == answer["before"]["byNodePool"]["(unmanaged)"]
    # 4 web pods on 3 c5.xlarge: consolidation removes or replaces at least one node, for less money
    disruptions = [a for a in answer["actions"] if a["action"] == "disrupt"]
    assert disruptions and all(a["reason"].startswith("Consolidation/") for a in disruptions)
    assert answer["after"]["byNodePool"]["general"]["costPerHour"] < \
        answer["before"]["byNodePool"]["general"]["costPerHour"]
    assert answer["unschedulable"] == []
    assert answer["unpriced"] == []


def test_a_replayed_cluster_keeps_every_running_pod_on_its_node_at_the_start(
        dump: tuple[pathlib.Path, dict[str, list[dict[str, Any]]]]) -> None:
    from karpy.simulator import whatif

    path, items = dump
    answer = whatif.run([(str(path), path.read_text())], for_seconds=1.0)
    assert answer.result is not None
    before = {(interface.namespace_of(p), interface.name_of(p)): p["spec"].get("nodeName")
              for p in items["Pod"] if not any(r.get("kind") == "DaemonSet" for r in interface.owner_references(p))}
    after = {(interface.namespace_of(p), interface.name_of(p)): p["spec"].get("nodeName")
             for p in answer.result.objects["pods"]}
    assert before and all(after.get(k) == v for k, v in before.items())
    assert answer.actions == []


def test_nodepools_to_try_replace_the_clusters_and_say_what_they_would_cost(
        dump: tuple[pathlib.Path, dict[str, list[dict[str, Any]]]], tmp_path: pathlib.Path) -> None:
    path, items = dump
    pool = dict(items["NodePool"][0])
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
            "spec": {**pool["spec"], "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                                    "consolidateAfter": "0s"}}}
    other = tmp_path / "pools.yaml"
    other.write_text(yaml.safe_dump(pool))
    done = karpy("whatif", str(path), "--nodepools", str(other), "--output", "json", "--for", "5m")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert any(a["action"] == "disrupt" for a in answer["actions"])
    assert all(a["t"] <= 300 for a in answer["actions"])


def test_a_table_names_the_nodepools_and_the_actions_and_the_report_is_written(
        dump: tuple[pathlib.Path, dict[str, list[dict[str, Any]]]], tmp_path: pathlib.Path) -> None:
    path, _ = dump
    done = karpy("whatif", str(path), "--for", "20m", "--report", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "index.html").read_text().count("<img") >= 1
    assert "general" in done.stdout and "(unmanaged)" in done.stdout
    assert "Consolidation/" in done.stdout


def test_an_invalid_dump_is_refused_naming_the_object_and_nothing_runs(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                   "metadata": {"name": "x"}, "spec": {"template": {"spec": {}}}}))
    done = karpy("whatif", str(bad), "--output", "json")
    assert done.returncode == 2
    assert "NodePool/x" in done.stderr and done.stdout == ""


def test_karpenter_nodes_without_nodeclaims_in_the_dump_are_adopted_not_collected(
        dump: tuple[pathlib.Path, dict[str, list[dict[str, Any]]]], tmp_path: pathlib.Path) -> None:
    from karpy.simulator import whatif

    _, items = dump
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                           "items": [o for kind, objs in items.items() if kind != "NodeClaim" for o in objs]})
    answer = whatif.run([("no-claims.yaml", text)], for_seconds=120.0)
    assert answer.result is not None
    assert answer.before.by_nodepool["general"]["nodes"] == 3
    assert answer.after.by_nodepool["general"]["nodes"] == 3  # not garbage-collected as unknown
    assert len(answer.result.objects["nodeclaims"]) == 3
