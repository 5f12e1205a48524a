"""Optuna and Ray are optional (karpy[design], karpy[ray]): importing karpy, its CLI and every design module
loads neither; only running a search imports Optuna, and only the Ray runner imports Ray."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import json, sys
import karpy.cli
from karpy.design import command, inputs, nodepools, output, report, runners, search, space, trials
print(json.dumps(sorted(m for m in ("optuna", "ray") if m in sys.modules)))
"""


def test_importing_the_cli_and_the_design_modules_loads_neither_optuna_nor_ray() -> None:
    out = subprocess.run([sys.executable, "-c", PROGRAM], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
