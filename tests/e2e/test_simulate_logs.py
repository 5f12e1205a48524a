"""`karpy simulate --logs`: the controllers' log stream, Karpenter's lines, stamped with simulated time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

KARPENTER_LINES = ("computed new nodeclaim(s) to fit pod(s)", "found provisionable pod(s)", "created nodeclaim",
                   "launched nodeclaim", "registered nodeclaim", "initialized nodeclaim", "disrupting node(s)",
                   "tainted node", "deleted node", "deleted nodeclaim")


@pytest.mark.e2e
def test_simulate_logs_prints_the_lines_karpenter_users_grep_for_in_simulated_time() -> None:
    proc = subprocess.run([sys.executable, "-m", "karpy.cli", "simulate", str(EXAMPLES / "aks-nap.yaml"),
                           "--logs", "-o", "json"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(x) for x in proc.stderr.splitlines() if x.startswith("{")]
    messages = [x["message"] for x in lines]
    for wanted in KARPENTER_LINES:
        assert wanted in messages, wanted
    # the order of one NodeClaim's life
    first = [m for m in messages if m in KARPENTER_LINES]
    assert first.index("created nodeclaim") < first.index("launched nodeclaim") < first.index("registered nodeclaim")
    assert all(x["time"].startswith("2026-01-01T") for x in lines)  # virtual time, not today
    launched = next(x for x in lines if x["message"] == "launched nodeclaim")
    assert launched["controller"] == "nodeclaim.lifecycle"
    assert set(launched["NodeClaim"]) == {"name"} and launched["NodePool"] == {"name": "default"}
    for key in ("provider-id", "instance-type", "zone", "capacity-type", "allocatable"):
        assert launched[key], key
    disrupting = next(x for x in lines if x["message"] == "disrupting node(s)")
    assert disrupting["decision"] == "delete" and disrupting["disrupted-node-count"] >= 1
    assert disrupting["disrupted-nodes"][0]["NodeClaim"]["name"]
    tainted = next(x for x in lines if x["message"] == "tainted node")
    assert tainted["taint.Key"] == "karpenter.sh/disrupted" and tainted["taint.Effect"] == "NoSchedule"
    # stdout is still the result alone
    assert json.loads(proc.stdout)
