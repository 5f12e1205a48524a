"""``karpy simulate`` with ``spec.cloud.endpointURL``: the real boto3 provider against a moto server."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import yaml

from karpy.simulator import engine, scenario
from karpy.simulator import provider_bridge as provider_bridge_mod

from . import moto_world
from .conftest import attach

pytestmark = pytest.mark.e2e

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def _docs(path: pathlib.Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _write(tmp_path: pathlib.Path, docs: list[dict[str, Any]]) -> pathlib.Path:
    out = tmp_path / "scenario.yaml"
    out.write_text(yaml.safe_dump_all(docs))
    return out


def _instances(url: str) -> list[dict[str, Any]]:
    ec2 = moto_world.client("ec2", url)
    return [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


def test_the_seed_eks_scenario_runs_through_karpy_simulate_against_a_moto_endpoint(
        moto_url: str, tmp_path: pathlib.Path) -> None:
    moto_world.reset(moto_url)
    moto_world.seed_account(moto_url, discovery="sample-1-22")
    iam = moto_world.client("iam", moto_url)
    iam.create_instance_profile(InstanceProfileName="KarpenterNodeInstanceProfile")
    docs = _docs(EXAMPLES / "eks-scale-out-v1alpha5.yaml")
    docs[0]["spec"]["cloud"]["endpointURL"] = moto_url
    docs[0]["spec"]["kubernetesVersion"] = moto_world.K8S_VERSION
    docs[1]["spec"]["provider"]["instanceProfile"] = "KarpenterNodeInstanceProfile"
    path = _write(tmp_path, docs)

    run = subprocess.run([sys.executable, "-m", "karpy.cli", "simulate", str(path), "--output", "json"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    launched = [i for i in _instances(moto_url)
                if {"Key": "karpenter.sh/nodepool", "Value": "default"} in (i.get("Tags") or [])]
    assert len(launched) == 3  # three r5.large for the three pods that did not fit
    assert {i["InstanceType"] for i in launched} == {"r5.large"}
    assert all(i["State"]["Name"] == "terminated" for i in launched)  # emptied at 8m, removed
    assert doc["metrics"]["simulator"]["instancesLaunched"] == 3
    node_names = {n["metadata"]["name"] for n in doc["objects"]["nodes"]}
    assert {"ip-10-99-13-40.ec2.internal", "ip-10-99-17-198.ec2.internal"} <= node_names  # node group untouched
    assert doc["objects"]["nodeclaims"] == []


def test_a_spot_interruption_message_drains_and_replaces_the_node_on_another_offering(
        moto_url: str, response_cache: moto_world.ResponseCache, tmp_path: pathlib.Path) -> None:
    moto_world.reset(moto_url)
    account = moto_world.seed_account(moto_url)
    moto_world.client("sqs", moto_url).create_queue(QueueName="karpy-interruptions")
    docs = _docs(EXAMPLES / "spot-interruption.yaml")
    docs[0]["spec"]["cloud"]["endpointURL"] = moto_url
    docs[0]["spec"]["kubernetesVersion"] = moto_world.K8S_VERSION
    docs[0]["spec"]["settings"] = {"clusterName": moto_world.CLUSTER, "interruptionQueue": "karpy-interruptions"}
    docs[1]["spec"]["role"] = account.role
    for key in ("subnetSelectorTerms", "securityGroupSelectorTerms"):
        docs[1]["spec"][key] = [{"tags": {"karpenter.sh/discovery": moto_world.CLUSTER}}]
    scn = scenario.load(_write(tmp_path, docs))
    sim = engine.Simulation(scn)
    assert isinstance(sim.bridge, provider_bridge_mod.ProviderBridge)
    attach(sim.bridge.provider, account, response_cache)  # type: ignore[arg-type]
    result = sim.run()

    reasons = [e["reason"] for e in result.events]
    assert "SpotInterrupted" in reasons
    instances = _instances(moto_url)
    terminated = [i for i in instances if i["State"]["Name"] == "terminated"]
    running = [i for i in instances if i["State"]["Name"] == "running"]
    assert len(terminated) >= 1
    assert running, "replacement capacity was launched"
    pods = result.objects["pods"]
    assert sum(1 for p in pods if p["status"].get("phase") == "Running") == 6
    gone = terminated[0]
    interrupted = (gone["InstanceType"], gone["Placement"]["AvailabilityZone"], "spot")
    marks = [(t - result.start, key) for t, key, reason in sim.bridge.provider.ice.history  # type: ignore[attr-defined]
             if reason == "SpotInterruption"]
    assert marks and marks[0][1] == interrupted and 300 <= marks[0][0] < 310
