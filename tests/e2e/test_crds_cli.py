"""``karpy crds`` prints the CRDs karpy ships, the same as ``charts/karpy/crds``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from karpy import cli

pytestmark = pytest.mark.e2e
CRD_DIR = Path(__file__).resolve().parents[2] / "charts" / "karpy" / "crds"


def test_karpy_crds_prints_the_charts_crds() -> None:
    result = CliRunner().invoke(cli.main, ["crds"], catch_exceptions=False)
    assert result.exit_code == 0
    printed = [d for d in yaml.safe_load_all(result.output) if d]
    shipped = [d for p in sorted(CRD_DIR.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
    assert sorted(d["metadata"]["name"] for d in printed) == sorted(d["metadata"]["name"] for d in shipped)
    assert {d["metadata"]["name"]: d for d in printed} == {d["metadata"]["name"]: d for d in shipped}


def test_karpy_crds_can_print_one_kind() -> None:
    result = CliRunner().invoke(cli.main, ["crds", "--kind", "EC2NodeClass"], catch_exceptions=False)
    (doc,) = [d for d in yaml.safe_load_all(result.output) if d]
    assert doc["metadata"]["name"] == "ec2nodeclasses.karpenter.k8s.aws"
    bad = CliRunner().invoke(cli.main, ["crds", "--kind", "Provisioner"])
    assert bad.exit_code == 2
