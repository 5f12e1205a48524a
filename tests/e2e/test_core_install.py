"""README's first command installs karpy without extras (`pip install -e .`) and runs `karpy simulate`:
the simulator must not import a cloud SDK or the Kubernetes client's dependencies. Checked in a child
process where importing any of them fails, as on a machine that has only the core dependencies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXTRAS_ONLY = ("boto3", "botocore", "azure", "httpx2", "lightkube", "msgspec", "optuna", "ray")

CHILD = """
import importlib.abc, sys
BLOCKED = {blocked!r}

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (an extra, blocked by the test)")
        return None

sys.meta_path.insert(0, Block())
from karpy import cli
sys.argv = ["karpy", "simulate", {example!r}, "--output", "json"]
cli.main()
"""


def test_karpy_simulate_runs_the_readme_example_without_any_extra_installed() -> None:
    example = str(ROOT / "examples" / "eks-scale-out-v1alpha5.yaml")
    code = CHILD.format(blocked=EXTRAS_ONLY, example=example)
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    launched = [e for e in result["events"] if e.get("reason") == "Nominated"]  # pods nominated to new NodeClaims
    assert result["scenario"] and launched, "the run launched nothing"
