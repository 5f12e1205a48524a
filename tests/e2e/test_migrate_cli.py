"""``karpy migrate``: Cluster Autoscaler node groups (AWS CLI JSON) to NodePools that cover them."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from karpy.api import manifest
from karpy.simulator import engine, scenario

pytestmark = pytest.mark.e2e

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "migration"
EKS = FIXTURES / "eks-nodegroup-worknode.json"
ASG = FIXTURES / "asg-mixed.json"


def karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_node_groups_become_valid_v1_nodepools_with_their_types_labels_taints_and_limits(
        tmp_path: pathlib.Path) -> None:
    steps = tmp_path / "steps.md"
    done = karpy("migrate", str(EKS), str(ASG), "--steps", str(steps))
    assert done.returncode == 0, done.stderr
    loaded = manifest.load_documents(done.stdout, source="migrated")
    pools = {o.obj.name: o.raw for o in loaded.objects if o.kind == "NodePool"}
    assert set(pools) == {"worknode", "batch-spot"}
    web = pools["worknode"]["spec"]
    reqs = {r["key"]: r["values"] for r in web["template"]["spec"]["requirements"]}
    assert reqs == {"karpenter.sh/capacity-type": ["on-demand"], "node.kubernetes.io/instance-type": ["t3.medium"]}
    assert web["template"]["spec"]["taints"] == [{"key": "dedicated", "effect": "NoSchedule", "value": "web"}]
    assert web["template"]["metadata"]["labels"]["team"] == "web"
    assert web["limits"] == {"cpu": "8"}  # max 4 x t3.medium's 2 vCPUs
    batch = pools["batch-spot"]["spec"]
    assert {r["key"]: r["values"] for r in batch["template"]["spec"]["requirements"]}["karpenter.sh/capacity-type"] \
        == ["spot"]
    assert batch["limits"] == {"cpu": "160"}
    nc = next(o.raw for o in loaded.objects if o.kind == "EC2NodeClass")
    assert nc["spec"]["role"] == "eksctl-prd-eks-nodegroup-worknode-NodeInstanceRole"
    assert nc["spec"]["amiSelectorTerms"] == [{"alias": "al2@latest"}]
    text = steps.read_text()
    assert "kubectl scale deploy/cluster-autoscaler -n kube-system --replicas=0" in text
    assert "--nodegroup-name worknode" in text and "karpenter.sh/discovery=prd-eks" in text


def test_the_migrated_nodepools_launch_the_node_groups_type_for_its_pods(tmp_path: pathlib.Path) -> None:
    done = karpy("migrate", str(EKS))
    assert done.returncode == 0, done.stderr
    head = {"apiVersion": "karpy.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "migrated"},
            "spec": {"cloud": {"provider": "aws", "region": "us-east-1"}, "until": "3m"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"nodeSelector": {"team": "web"},
                    "tolerations": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                    "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}
    text = yaml.safe_dump(head) + "---\n" + done.stdout + "---\n" + yaml.safe_dump(pod)
    result = engine.Simulation(scenario.load_text(text)).run()
    nodes = [n for n in result.objects["nodes"] if n["metadata"]["labels"].get("karpenter.sh/nodepool") == "worknode"]
    assert [n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes] == ["t3.medium"]
    assert result.objects["pods"][0]["status"]["phase"] == "Running"


def test_input_that_is_not_aws_cli_output_is_refused_naming_the_field(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nodegroup": {"nodegroupName": "x", "scalingConfig": {"minSize": -1, "maxSize": 2}}}))
    done = karpy("migrate", str(bad))
    assert done.returncode == 2
    assert "nodegroup.scalingConfig.minSize" in done.stderr and done.stdout == ""
