"""CSI volume attach limits end to end, in virtual time (issue 23 section 7; kubernetes-sigs/karpenter#1748):
a StatefulSet of 40 replicas with one EBS volume each, on types that attach only 6 EBS volumes, needs
several nodes, and no node ever holds more volumes than its limit. The checker here counts volumes per
node itself, from the pods' claims and the PersistentVolumes' drivers, after the burst and at the end."""

from __future__ import annotations

import functools
import pathlib
from collections import Counter
from typing import Any

from karpy.simulator import engine, scenario

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "volume-attach-limits.yaml"
LIMIT = 6
EBS = "ebs.csi.aws.com"


def _volumes_per_node(cluster: Any) -> Counter[str]:
    """Distinct EBS volumes of the pods bound to each node (independent of karpy's own counting)."""
    claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in cluster.list("PersistentVolumeClaim")}
    volumes = {v["metadata"]["name"]: v for v in cluster.list("PersistentVolume")}
    classes = {s["metadata"]["name"]: s for s in cluster.list("StorageClass")}
    held: dict[str, set[str]] = {}
    for p in cluster.list("Pod"):
        node = p["spec"].get("nodeName")
        if not node or p["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for v in p["spec"].get("volumes") or ():
            ref = (v.get("persistentVolumeClaim") or {}).get("claimName")
            pvc = claims.get((p["metadata"]["namespace"], ref)) if ref else None
            if pvc is None:
                continue
            pv = volumes.get(pvc["spec"].get("volumeName") or "")
            driver = (pv or {}).get("spec", {}).get("csi", {}).get("driver") or \
                classes.get(pvc["spec"].get("storageClassName") or "", {}).get("provisioner")
            if driver == EBS:
                held.setdefault(node, set()).add(str(ref))
    return Counter({n: len(v) for n, v in held.items()})


@functools.cache
def _run() -> tuple[engine.Simulation, engine.Result, list[Counter[str]]]:
    sim = engine.Simulation(scenario.load(EXAMPLE))
    seen: list[Counter[str]] = []
    sim.cluster.watch("Pod", lambda event, obj: seen.append(_volumes_per_node(sim.cluster))
                      if obj.get("spec", {}).get("nodeName") else None)
    return sim, sim.run(), seen


def test_forty_one_volume_replicas_run_on_several_nodes_none_over_its_attach_limit() -> None:
    sim, result, _ = _run()
    pods = [p for p in result.objects["pods"] if p["metadata"]["name"].startswith("db-")]
    assert len(pods) == 40 and all(p["status"].get("phase") == "Running" for p in pods)
    per_node = _volumes_per_node(sim.cluster)
    assert sum(per_node.values()) == 40
    assert len(per_node) >= 7  # ceil(40 / 6)
    assert max(per_node.values()) <= LIMIT


def test_no_node_was_over_its_limit_at_any_bind_during_the_run() -> None:
    _, _, seen = _run()
    assert seen and all(max(c.values(), default=0) <= LIMIT for c in seen)


def test_every_node_has_a_csinode_with_the_scenario_limit() -> None:
    sim, _, _ = _run()
    nodes = {n["metadata"]["name"] for n in sim.cluster.list("Node")}
    csinodes = {c["metadata"]["name"]: c for c in sim.cluster.list("CSINode")}
    assert nodes <= csinodes.keys()
    for c in csinodes.values():
        assert {d["name"]: d["allocatable"]["count"] for d in c["spec"]["drivers"]}[EBS] == LIMIT


def test_the_statefulset_made_one_claim_per_ordinal() -> None:
    sim, _, _ = _run()
    names = {c["metadata"]["name"] for c in sim.cluster.list("PersistentVolumeClaim")}
    assert names == {f"data-db-{i}" for i in range(40)}


def test_without_the_scenario_limit_the_ebs_rule_of_the_catalog_applies() -> None:
    text = EXAMPLE.read_text(encoding="utf-8").replace("    volumeLimits: {ebs.csi.aws.com: 6}\n", "")
    sim = engine.Simulation(scenario.load_text(text))
    sim.run()
    per_node = _volumes_per_node(sim.cluster)
    assert sum(per_node.values()) == 40
    assert max(per_node.values()) <= 26  # m5.large's count; larger m types attach no more
    assert len(per_node) < 7
