"""Drift in waves (``karpy.io/drift-max-surge``, ``karpy.io/drift-wave-settle``, karpy's own annotations,
docs/drift-waves.md) on the real control plane: a NodePool template change drifts its 4 nodes and `karpy
controller` replaces them 2 at a time, the second wave starting no earlier than the settle time after the
first, as the test sees the NodeClaims from outside (sampled every half second).

One pod fills one node (1 CPU pods on the 2-CPU ``c-2x-amd64-linux``, the only type the pool allows), so a
wave of 2 drifted nodes launches exactly 2 replacements."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import Scope, wait_until
from support import realcluster

POOL = "waves"
TYPE = "c-2x-amd64-linux"
SURGE = 2
SETTLE = 15.0


def _pool() -> dict[str, Any]:
    pool = w.nodepool(POOL, policy="WhenEmpty", consolidate_after="Never")
    pool["metadata"]["annotations"] = {"karpy.io/drift-max-surge": str(SURGE),
                                       "karpy.io/drift-wave-settle": f"{SETTLE:.0f}s"}
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [TYPE]})
    return pool


def _created(claim: dict[str, Any]) -> float:
    return datetime.fromisoformat(claim["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp()


def _waves(created: list[float], gap: float) -> list[list[float]]:
    """Creation times grouped where consecutive ones are less than ``gap`` apart."""
    waves: list[list[float]] = []
    for t in sorted(created):
        if waves and t - waves[-1][-1] < gap:
            waves[-1].append(t)
        else:
            waves.append([t])
    return waves


def test_a_drifted_nodepool_is_replaced_in_waves_no_larger_than_the_max_surge(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-waves")
    scope.nodepool(_pool())
    real.apply([w.deployment("app", ns, 4, cpu="1", pool=POOL)])
    wait_until(lambda: w.running(real, ns, "app=app", 4) and len(w.pool_claims(real, POOL)) == 4, 120,
               lambda: f"4 Running pods on 4 nodes:\n{controller.log()[-3000:]}")
    old = {c["metadata"]["name"] for c in w.pool_claims(real, POOL)}

    patch = {"spec": {"template": {"metadata": {"labels": {"rc/version": "2"}}}}}
    real.kubectl("patch", "nodepool", POOL, "--type", "merge", "-p", json.dumps(patch))

    new: dict[str, float] = {}
    most_launching = most_deleting = 0
    deadline = time.monotonic() + 240
    while True:
        claims = w.pool_claims(real, POOL)
        fresh = [c for c in claims if c["metadata"]["name"] not in old]
        new.update({c["metadata"]["name"]: _created(c) for c in fresh})
        most_launching = max(most_launching, sum(1 for c in fresh if w.condition(c, "Initialized") != "True"))
        most_deleting = max(most_deleting, sum(1 for c in claims if c["metadata"]["name"] in old
                                               and c["metadata"].get("deletionTimestamp")))
        if (len(claims) == 4 and not any(c["metadata"]["name"] in old for c in claims)
                and w.running(real, ns, "app=app", 4)):
            break
        assert time.monotonic() < deadline, f"the drift took over 240s; new claims {new}:\n{controller.log()[-4000:]}"
        time.sleep(0.5)

    assert len(new) == 4, f"one replacement per drifted node: {sorted(new)}"
    assert most_launching <= SURGE, f"{most_launching} replacements in flight at once (max surge {SURGE})"
    assert most_deleting <= SURGE, f"{most_deleting} drifted nodes deleted at once (max surge {SURGE})"
    waves = _waves(list(new.values()), gap=SETTLE / 2)
    assert [len(wave) for wave in waves] == [2, 2], f"replacement creation times by wave: {waves}"
    # The second wave starts once the first is done (its old nodes drained, its pods running) plus the settle.
    assert waves[1][0] - waves[0][-1] >= SETTLE - 1, f"waves {waves} closer than the {SETTLE}s settle"
    assert all(n["metadata"]["labels"].get("rc/version") == "2" for n in w.pool_nodes(real, POOL))
