"""The Dockerfile agrees with the chart: the user the pod runs as, the command, the ports, and
nothing written outside /tmp (the chart's only writable mount on a read-only root file system).
Docker is not available where karpy is built and tested: the image itself is not built here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from karpy.install import chart

ROOT = Path(__file__).resolve().parents[3]


def instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


@pytest.mark.skipif(chart.helm_binary() is None, reason="helm is not built (scripts/realcluster/build.sh) nor on PATH")
def test_the_image_runs_karpy_as_the_non_root_user_the_chart_expects() -> None:
    stage = dict(final_stage())
    deployment = next(o for o in chart.render(ROOT / "charts" / "karpy", {"settings": {"clusterName": "c"}})
                      if o["kind"] == "Deployment")
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    uid, gid = stage["USER"].split(":")
    assert (int(uid), int(gid)) == (c["securityContext"]["runAsUser"], c["securityContext"]["runAsGroup"]) != (0, 0)
    assert json.loads(stage["ENTRYPOINT"]) == ["karpy"]
    assert json.loads(stage["CMD"])[:2] == c["args"][:2] == ["controller", "--cloud-provider"]
    ports = {int(p) for p in stage["EXPOSE"].split()}
    assert ports == {p["containerPort"] for p in c["ports"]} == {8080, 8081}


def test_nothing_is_written_outside_tmp_at_run_time() -> None:
    env = dict(re.findall(r"(\w+)=(\S+)", dict(final_stage())["ENV"]))
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"].startswith("/tmp") and env["MPLCONFIGDIR"].startswith("/tmp")
    assert any(word == "RUN" and "compileall" in rest for word, rest in instructions())
