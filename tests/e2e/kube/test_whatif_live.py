"""``karpy whatif --kubeconfig``: the same answer from a live API server (the emulator) as from a dump."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from karpy.simulator import engine, scenario
from support import apiserver

pytestmark = pytest.mark.e2e

SOURCE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "whatif-source.yaml"
KINDS = ("Node", "PodDisruptionBudget", "DaemonSet", "Deployment", "ReplicaSet", "Pod", "NodePool", "NodeClaim",
         "EC2NodeClass")


def test_whatif_reads_a_live_cluster_read_only_and_finds_the_consolidation(
        api: apiserver.EmulatedApiServer, tmp_path: pathlib.Path) -> None:
    sim = engine.Simulation(scenario.load(SOURCE), seed=3)
    sim.run()
    for kind in KINDS:
        for obj in sim.cluster.list(kind):
            api.store.create(dict(obj))
    before = {kind: len(api.store.list(kind)) for kind in KINDS}
    versions = {kind: sorted(o["metadata"]["resourceVersion"] for o in api.store.list(kind)) for kind in KINDS}
    config = api.write_kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run([sys.executable, "-m", "karpy.cli", "whatif", "--kubeconfig", str(config), "--for", "20m",
                           "--output", "json"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["before"]["byNodePool"]["general"]["nodes"] == 3
    assert answer["before"]["byNodePool"]["(unmanaged)"]["nodes"] == 3
    assert any(a["action"] == "disrupt" and a["reason"].startswith("Consolidation/") for a in answer["actions"])
    # read-only: nothing was created, changed or deleted on the server
    assert {kind: len(api.store.list(kind)) for kind in KINDS} == before
    assert {kind: sorted(o["metadata"]["resourceVersion"] for o in api.store.list(kind)) for kind in KINDS} == versions


def test_whatif_says_clearly_when_the_cluster_cannot_be_reached(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
                      "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                      "current-context: x\n")
    done = subprocess.run([sys.executable, "-m", "karpy.cli", "whatif", "--kubeconfig", str(config)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3
    assert "cannot read the cluster" in done.stderr
