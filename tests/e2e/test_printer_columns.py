"""What karpy writes, as an API server with karpy's CRDs would see it: every printer column, evaluated
with kubectl's own JSONPath on the NodeClaims and NodePools a simulated run produced, shows a value
(Type, Capacity, Zone, Node, Ready, Age; NodeClass, Nodes, Ready, Age...), and every NodePool,
NodeClaim and NodeClass karpy wrote (spec and status) is accepted by the CRD schemas and CEL rules."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from integration.disruption import test_consolidation as h
from karpy.api.schemas import crd
from karpy.simulator import engine, scenario
from unit.api import crd_check

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")]

MAY_BE_EMPTY = {
    ("NodePool", "Weight"): "the NodePool has no spec.weight",
    ("NodeClaim", "Drifted"): "only a drifted NodeClaim has the Drifted condition",
}
"""Columns that are empty for a reason, checked against the object below."""


@functools.cache
def _objects() -> dict[str, list[dict[str, Any]]]:
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-1",), disruption_={
        "consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}), h.deployment("web", 2, "1000m")]))
    run.run_until(300)
    return {kind: run.sim.cluster.list(kind) for kind in ("NodeClaim", "NodePool")}


def column_values(obj: dict[str, Any], columns: list[dict[str, Any]]) -> dict[str, str]:
    """Each column's value as kubectl prints it (kubectl's JSONPath, offline: ``label --local``)."""
    template = "\x1f".join("{" + c["jsonPath"] + "}" for c in columns)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "obj.json"
        path.write_text(json.dumps(obj))
        out = subprocess.run(["kubectl", "label", "--local", "-f", str(path), "karpy.sh/probe=1",
                              "-o", f"jsonpath={template}"], capture_output=True, text=True, timeout=60,
                             check=True, env={"KUBECONFIG": "/dev/null", "PATH": "/usr/bin:/bin"})
    return dict(zip([c["name"] for c in columns], out.stdout.split("\x1f"), strict=True))


@pytest.mark.parametrize("kind", ["NodeClaim", "NodePool"])
def test_every_printer_column_shows_a_value_for_what_karpy_writes(kind: str) -> None:
    (version,) = crd.definition(crd.kind(kind))["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    objects = _objects()[kind]
    assert objects
    for obj in objects:
        values = column_values(obj, columns)
        empty = sorted(name for name, value in values.items() if not value and (kind, name) not in MAY_BE_EMPTY)
        assert empty == [], f"{kind} {obj['metadata']['name']}: {values}"
        conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or ()}
        for column in ("Ready", "Drifted"):
            if column in values:
                assert values[column] == conditions.get(column, ""), (kind, column, values)
    if kind == "NodeClaim":
        values = column_values(objects[0], columns)
        assert values["Ready"] == "True" and values["Capacity"] == "on-demand"
        assert values["Type"] == "fake-it-1"
    else:
        values = column_values(objects[0], columns)
        assert values["Nodes"] == str(len(_objects()["NodeClaim"]))
        assert values["NodeClass"] == "default"


ROOT = Path(__file__).resolve().parents[2]


def test_every_object_karpy_writes_on_aws_is_accepted_by_the_crds() -> None:
    run = h.Run(h.build([h.NODECLASS, h.nodepool(("fake-it-1",), disruption_={
        "consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}), h.deployment("web", 2, "1000m")],
        [h.scale("5m", "web", 1)]))
    run.run_until(900)
    _expect_accepted(run.sim.cluster, ("NodePool", "NodeClaim", "EC2NodeClass"))


def test_every_object_karpy_writes_on_aks_is_accepted_by_the_crds() -> None:
    sim = engine.Simulation(scenario.load_text((ROOT / "examples" / "aks-nap.yaml").read_text()))
    sim.run()
    _expect_accepted(sim.cluster, ("NodePool", "NodeClaim", "AKSNodeClass"))


def _expect_accepted(cluster: Any, kinds: tuple[str, ...]) -> None:
    seen = {kind: 0 for kind in kinds}
    for kind in kinds:
        for obj in cluster.list(kind):
            seen[kind] += 1
            assert crd_check.schema_errors(obj) == [], (kind, obj["metadata"]["name"])
            assert crd_check.cel_violations(obj) == [], (kind, obj["metadata"]["name"])
    assert all(seen.values()), seen
