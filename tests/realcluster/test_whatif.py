"""`karpy whatif --kubeconfig` against the running cluster gives the answer `karpy whatif` gives on a
`kubectl get ... -A -o yaml` dump of it (the live reader lists what the dump holds, nothing more)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, wait_until
from support import realcluster

DUMPED = "nodes,pods,deployments,replicasets,statefulsets,daemonsets,jobs,poddisruptionbudgets,nodepools,nodeclaims," \
         "ec2nodeclasses,aksnodeclasses"
"""What `karpy whatif`'s documentation tells a user to dump (karpy.simulator.whatif_live.KINDS)."""


def whatif(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "karpy.cli", "whatif", "-o", "json", "--for", "5m", *args],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout))


def test_whatif_on_the_live_cluster_answers_as_whatif_on_a_dump_of_it(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller, tmp_path: Path) -> None:
    ns = scope.namespace("rc-whatif")
    scope.nodepool(w.nodepool("whatif", policy="WhenEmpty", consolidate_after="Never"))
    real.apply([w.deployment("web", ns, 4, cpu="1500m", pool="whatif"),
                w.deployment("small", ns, 3, cpu="250m", pool="whatif"),
                w.pdb("web", ns, {"app": "web"}, 1)])
    wait_until(lambda: w.running(real, ns, "app=web", 4) and w.running(real, ns, "app=small", 3), 150,
               lambda: f"7 Running pods:\n{controller.log()[-3000:]}")
    # a WhenEmpty pool that never consolidates: the state stands still while it is read twice

    answers = []
    for _ in range(2):  # KWOK's heartbeats move timestamps only; retry once if anything else moved
        live = whatif("--kubeconfig", str(real.kubeconfig))
        dump = tmp_path / "dump.yaml"
        dump.write_text(real.kubectl("get", DUMPED, "-A", "-o", "yaml").stdout)
        from_dump = whatif(str(dump))
        answers.append((live, from_dump))
        if live == from_dump:
            break
    live, from_dump = answers[-1]
    (tmp_path / "answer.json").write_text(json.dumps(live, indent=1))
    assert live == from_dump
    assert live["before"]["byNodePool"]["whatif"]["nodes"] == len(w.pool_nodes(real, "whatif")) >= 2
