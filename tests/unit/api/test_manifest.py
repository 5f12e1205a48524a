from __future__ import annotations

import json
from pathlib import Path

import pytest

from karpy.api import errors, manifest, nodeclass, nodepool, pod, workloads

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "manifests"
SCENARIO = Path(__file__).resolve().parents[3].parent / "shared" / "scenarios/eks-scale-out-v1alpha5.yaml"


def _load(name: str) -> manifest.LoadResult:
    return manifest.load_documents((FIXTURES / name).read_text(), source=name)


def _errors_of(text: str) -> list[errors.FieldError]:
    with pytest.raises(errors.ValidationError) as exc:
        manifest.load_documents(text)
    return list(exc.value.errors)


@pytest.mark.skipif(not SCENARIO.exists(), reason="shared scenario not present")
def test_the_eks_scale_out_scenario_loads_every_document() -> None:
    result = manifest.load_documents(SCENARIO.read_text(), source=str(SCENARIO))
    kinds = [o.kind for o in result.objects]
    assert kinds == [
        "Scenario",
        "NodePool",
        "EC2NodeClass",
        "Node",
        "Node",
        "Node",
        "DaemonSet",
        "Pod",
        "Pod",
        "Pod",
        "Deployment",
    ]
    np = result.of_kind("NodePool")[0]
    assert isinstance(np, nodepool.NodePool)
    assert np.disruption.consolidation_policy == "WhenEmpty"
    assert np.disruption.consolidate_after == 30.0
    assert np.template.spec.expire_after == 600.0
    assert isinstance(result.objects[0].obj, dict)  # karpy.io Scenario is not modelled here


def test_seed_000_provisioner_with_inline_provider_becomes_a_nodepool_and_an_ec2nodeclass() -> None:
    result = _load("seed-000-provisioner.yaml")
    np = result.of_kind("NodePool")[0]
    nc = result.of_kind("EC2NodeClass")[0]
    assert {r.key: r.values for r in np.template.spec.requirements} == {
        "karpenter.sh/capacity-type": ("on-demand",),
        "node.kubernetes.io/instance-type": ("r5.large",),
        "kubernetes.io/arch": ("amd64",),
    }
    assert np.limits["cpu"] == 10_000
    assert (np.disruption.consolidation_policy, np.disruption.consolidate_after) == ("WhenEmpty", 30.0)
    assert np.template.spec.expire_after == 600.0
    assert np.node_class_ref is not None and np.node_class_ref.name == nc.name == "default"
    assert nc.subnet_selector_terms[0].tags == {"karpenter.sh/discovery": "sample-1-22"}
    assert nc.instance_profile is None  # v0.10 took it from the aws.defaultInstanceProfile setting
    assert all(o.original_kind == "Provisioner" for o in result.objects[:2])
    assert isinstance(result.of_kind("Deployment")[0], workloads.Deployment)


def test_seed_000_takes_the_default_instance_profile_when_given() -> None:
    text = (FIXTURES / "seed-000-provisioner.yaml").read_text()
    result = manifest.load_documents(text, default_instance_profile="KarpenterInstanceProfile")
    assert result.of_kind("EC2NodeClass")[0].instance_profile == "KarpenterInstanceProfile"


def test_seed_001_reference_snippets_report_what_each_is_missing() -> None:
    errs = _errors_of((FIXTURES / "seed-001-reference.yaml").read_text())
    by_doc: dict[str, set[str]] = {}
    for e in errs:
        by_doc.setdefault(e.obj, set()).add(e.path)
    # the amiFamily snippet alone: v1 needs subnets, security groups and an IAM identity
    assert by_doc["document 1 (EC2NodeClass/foo-node-class)"] == {
        "spec.subnetSelectorTerms",
        "spec.securityGroupSelectorTerms",
        "spec.role",
    }
    # the tags Karpenter and AWS set themselves may not be set by the user
    assert {
        "spec.tags.karpenter.sh/nodepool",
        "spec.tags.kubernetes.io/cluster/foo-cluster",
        "spec.tags.aws:ec2:fleet-id",
    } <= by_doc["document 10 (EC2NodeClass/foo-node-class)"]
    assert "spec.tags.karpenter.sh/managed-by" not in by_doc["document 10 (EC2NodeClass/foo-node-class)"]
    # a NodePool snippet without nodeClassRef
    assert by_doc["document 12 (NodePool/foo-nodepool)"] == {"spec.template.spec.nodeClassRef"}
    # the nodeClassRef and requirements snippets are complete NodePools (only reported as giving a
    # NodePool name used before in the same file)
    assert by_doc.get("document 20 (NodePool/foo-nodepool)", set()) == {"metadata.name"}
    # ConfigMaps are kept raw without errors; the Deployment snippet has no name
    assert not any("ConfigMap" in k for k in by_doc)
    assert by_doc["document 33 (Deployment/(unnamed))"] == {"metadata.name"}


def test_seed_001_kubelet_snippet_converts_into_the_compatibility_annotation() -> None:
    text = (FIXTURES / "seed-001-reference.yaml").read_text().split("\n---\n")
    kubelet_doc = next(d for d in text if "kubelet:" in d and "NodePool" in d)
    ref = "      nodeClassRef:\n        name: foo-node-class\n"
    result = manifest.load_documents(kubelet_doc.replace("      kubelet:\n", ref + "      kubelet:\n", 1))
    np = result.of_kind("NodePool")[0]
    kubelet = np.compat_kubelet()
    assert kubelet is not None
    assert (kubelet.max_pods, kubelet.pods_per_core, kubelet.eviction_max_pod_grace_period) == (20, 2, 60)
    assert kubelet.eviction_soft_grace_period == {
        "memory.available": "1m",
        "nodefs.available": "1m30s",
        "nodefs.inodesFree": "2m",
    }
    assert any("containerRuntime is dropped" in w for w in result.warnings)


def test_seed_002_awsnodetemplate_and_provisioner_convert_to_v1() -> None:
    result = _load("seed-002-awsnodetemplate.yaml")
    nc = result.of_kind("EC2NodeClass")[0]
    np = result.of_kind("NodePool")[0]
    assert isinstance(nc, nodeclass.EC2NodeClass)
    ebs = nc.block_device_mappings[0].ebs
    assert ebs is not None
    assert (ebs.volume_type, ebs.iops, ebs.throughput, ebs.encrypted, ebs.delete_on_termination) == (
        "gp3",
        3000,
        125,
        True,
        True,
    )
    assert (
        ebs.kms_key_id == "arn:aws:kms:ap-northeast-2:558846430793:key/6f29df3a-fb94-48e4-b359-a88fb74ce78d"
    )
    assert nc.detailed_monitoring is True
    assert nc.tags == {"Name": "karpenter-eks-main/karpenter-default", "auto-delete": "no"}
    assert nc.instance_profile == "KarpenterInstanceProfile"
    # the later of the two `requirements` lists wins, and the user is told
    assert [r.key for r in np.template.spec.requirements] == [
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "karpenter.sh/capacity-type",
        "topology.kubernetes.io/zone",
    ]
    assert any("key 'requirements' is given twice" in w for w in result.warnings)
    assert np.template.spec.expire_after == 720 * 3600.0
    assert np.disruption.consolidate_after == 60.0
    # kubeletConfiguration travels to the EC2NodeClass (one NodePool uses it)
    assert nc.kubelet is not None and nc.kubelet.eviction_max_pod_grace_period == 60


def test_seed_003_aks_nodepools_reference_the_aksnodeclass() -> None:
    result = _load("seed-003-aks.yaml")
    pools = {p.name: p for p in result.of_kind("NodePool")}
    assert set(pools) == {"default", "my-node", "my-node-comp"}
    for p in pools.values():
        assert p.node_class_ref is not None and (p.node_class_ref.group, p.node_class_ref.kind) == (
            "karpenter.azure.com",
            "AKSNodeClass",
        )
        assert p.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
        assert p.template.spec.expire_after is None
    assert pools["my-node"].weight == 10
    assert pools["default"].metadata.annotations["kubernetes.io/description"].startswith("General purpose")
    aks = result.of_kind("AKSNodeClass")[0]
    assert (aks.image_family, aks.os_disk_size_gb) == ("Ubuntu2204", 128)
    assert isinstance(result.of_kind("Pod")[0], pod.Pod)


def test_seed_004_migration_loads_and_flags_the_unexpanded_cluster_name() -> None:
    result = _load("seed-004-migration.yaml")
    assert [o.kind for o in result.objects] == [
        "Deployment",
        "PodDisruptionBudget",
        "ConfigMap",
        "NodePool",
        "EC2NodeClass",
    ]
    np = result.of_kind("NodePool")[0]
    assert np.node_class_ref is not None and np.node_class_ref.name == "default"
    gen = next(r for r in np.template.spec.requirements if r.key == "karpenter.k8s.aws/instance-generation")
    assert (gen.operator, gen.values) == ("Gt", ("2",))
    assert any("${CLUSTER_NAME}" in w and "envsubst" in w for w in result.warnings)


def test_errors_of_all_documents_are_reported_together() -> None:
    text = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: a}
spec:
  weight: 0
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: b}
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/hostname, operator: Exists}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""
    errs = _errors_of(text)
    assert [(e.obj, e.path) for e in errs] == [
        ("document 1 (NodePool/a)", "spec.weight"),
        ("document 2 (NodePool/b)", "spec.template.spec.requirements[0].key"),
    ]


def test_an_unknown_karpenter_version_is_an_error_naming_supported_versions() -> None:
    errs = _errors_of("apiVersion: karpenter.sh/v1alpha4\nkind: Provisioner\nmetadata: {name: x}\n")
    assert errs[0].obj == "document 1 (Provisioner/x)"
    assert errs[0].path == "apiVersion"
    assert "karpenter.sh/v1alpha5" in errs[0].expected


def test_unknown_kinds_are_kept_raw() -> None:
    result = manifest.load_documents(
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\n"
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeQueue\nmetadata: {name: o}\n"
    )
    assert [type(o.obj) for o in result.objects] == [dict, dict]
    assert any("NodeQueue" in w for w in result.warnings)


def test_a_kubectl_list_is_expanded_into_its_items() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "metadata": {"name": "a"},
                    "spec": {
                        "template": {
                            "spec": {
                                "nodeClassRef": {
                                    "group": "karpenter.k8s.aws",
                                    "kind": "EC2NodeClass",
                                    "name": "x",
                                },
                                "requirements": [],
                            }
                        },
                        "weight": 500,
                    },
                }
            ],
        }
    )
    errs = _errors_of(text)
    assert errs[0].obj == "document 1 item 1 (NodePool/a)"


def test_invalid_yaml_names_the_line() -> None:
    errs = _errors_of("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n")
    assert errs[0].expected == "valid YAML"
    assert errs[0].path.startswith("line ")


def test_a_document_without_kind_is_an_error() -> None:
    errs = _errors_of("apiVersion: v1\nmetadata: {name: x}\n")
    assert (errs[0].path, errs[0].found) == ("kind", None)


def test_converted_objects_carry_their_original_kind_and_the_v1_manifest() -> None:
    result = _load("seed-000-provisioner.yaml")
    np_loaded = result.objects[0]
    assert (np_loaded.kind, np_loaded.api_version) == ("NodePool", "karpenter.sh/v1")
    assert (np_loaded.original_kind, np_loaded.original_api_version) == (
        "Provisioner",
        "karpenter.sh/v1alpha5",
    )
    assert np_loaded.raw["spec"]["disruption"]["consolidateAfter"] == "30s"
    assert np_loaded.doc_index == 1


def test_different_kubelets_on_nodepools_sharing_a_class_stay_on_each_nodepool() -> None:
    def pool(name: str, max_pods: int) -> str:
        return f"""
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{name: shared}}
      requirements: []
      kubelet: {{maxPods: {max_pods}}}
"""

    ec2 = """
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: shared}
spec:
  amiFamily: AL2023
  role: r
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
"""
    result = manifest.load_documents("---".join([pool("a", 20), pool("b", 30), ec2]))
    assert result.of_kind("EC2NodeClass")[0].kubelet is None
    assert sorted(p.compat_kubelet().max_pods for p in result.of_kind("NodePool")) == [20, 30]
    assert any("different kubelet settings" in w for w in result.warnings)


def test_documents_already_read_load_as_their_text_does_and_keep_the_text_numbering() -> None:
    pod_text = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]}
"""
    pool_text = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: b}
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/hostname, operator: Exists}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""
    docs: list[object] = [None, *manifest.parse_yaml(pod_text), *manifest.parse_yaml(pool_text)]
    with pytest.raises(errors.ValidationError) as raised:
        manifest.load_parsed(docs)  # document 1 skipped, as the scenario loader skips its own
    assert [(e.obj, e.path) for e in raised.value.errors] == [
        ("document 3 (NodePool/b)", "spec.template.spec.requirements[0].key")]
    loaded = manifest.load_parsed(docs[:2])
    from_text = manifest.load_documents("---\n---\n" + pod_text)
    assert [(o.doc_index, o.kind, o.raw, o.obj) for o in loaded.objects] == \
        [(o.doc_index, o.kind, o.raw, o.obj) for o in from_text.objects]
    assert [o.doc_index for o in loaded.objects] == [2]


def test_documents_already_read_are_checked_for_keys_json_cannot_carry() -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {1: "x"}}
    with pytest.raises(errors.ValidationError, match="document 1"):
        manifest.load_parsed([doc])
