"""Issue 24 in ``karpy simulate``: a Windows pod gets a Windows node from a Windows EC2NodeClass, and a pod
asking for ``vpc.amazonaws.com/pod-eni`` (security groups for pods) runs on a trunking-compatible type;
``instanceStorePolicy: RAID0`` gives nodes the instance store as ephemeral storage.

Karpenter's AWS provider gives a Windows AMI family's instance types ``kubernetes.io/os=windows`` and
``node.kubernetes.io/windows-build`` (amd64 only) and every trunking-compatible type its branch ENIs as
``vpc.amazonaws.com/pod-eni``; before, the simulated catalog was Linux-only and had no pod ENIs, so both
kinds of pod stayed pending.
"""

from __future__ import annotations

from karpy.api import quantity
from karpy.cloudprovider.aws import instancetypes as aws
from karpy.simulator import engine, scenario

from . import scenarios as sc

WINDOWS_CLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: windows}
spec:
  amiSelectorTerms: [{alias: windows2022@latest}]
  role: KarpenterNodeRole-parity
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: parity}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: parity}}]
"""


def _windows_pool() -> str:
    return sc.nodepool("windows", requirements="""
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: kubernetes.io/os, operator: In, values: [windows]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
    """).replace("name: default}", "name: windows}")


def _node_of(result: object, prefix: str) -> dict[str, object]:
    (pod,) = sc.running(result, prefix)  # type: ignore[arg-type]
    nodes = result.objects["nodes"]  # type: ignore[attr-defined]
    found: dict[str, object] = next(n for n in nodes if n["metadata"]["name"] == pod["spec"]["nodeName"])
    return found


def _windows_app() -> str:
    return sc.deployment("iis", 1, pod_spec="nodeSelector: {kubernetes.io/os: windows}")


def test_a_windows_pod_gets_a_windows_node_and_a_linux_pod_a_linux_node() -> None:
    result = sc.run(sc.docs(WINDOWS_CLASS, sc.nodepool(), _windows_pool(), _windows_app(), sc.deployment("web", 1)),
                    until="3m")
    win = _node_of(result, "iis-")
    win_labels = win["metadata"]["labels"]  # type: ignore[index]
    assert win_labels["kubernetes.io/os"] == "windows"
    assert win_labels["node.kubernetes.io/windows-build"] == "10.0.20348"
    assert win_labels["karpenter.sh/nodepool"] == "windows"
    assert win["status"]["capacity"]["pods"] == "110"  # type: ignore[index]
    linux_labels = _node_of(result, "web-")["metadata"]["labels"]  # type: ignore[index]
    assert linux_labels["kubernetes.io/os"] == "linux"


def test_without_a_windows_nodeclass_the_windows_pod_stays_pending() -> None:
    result = sc.run(sc.docs(sc.nodepool(), _windows_app()), until="3m")
    assert len(sc.pending(result, "iis-")) == 1


def test_a_pod_eni_pod_runs_on_a_node_with_branch_enis() -> None:
    app = sc.deployment("sgp", 1).replace(
        "resources: {requests: {cpu: 500m, memory: 512Mi}}",
        "resources: {requests: {cpu: 500m, memory: 512Mi, vpc.amazonaws.com/pod-eni: '1'}, "
        "limits: {vpc.amazonaws.com/pod-eni: '1'}}")
    result = sc.run(sc.docs(sc.nodepool(), app), until="3m")
    node = _node_of(result, "sgp-")
    eni = node["status"]["capacity"]["vpc.amazonaws.com/pod-eni"]  # type: ignore[index]
    assert quantity.parse_milli(str(eni)) >= quantity.MILLI


def test_raid0_lets_a_pod_needing_more_than_the_root_volume_run_on_an_instance_store_type() -> None:
    app = sc.deployment("scratch", 1).replace(
        "resources: {requests: {cpu: 500m, memory: 512Mi}}",
        "resources: {requests: {cpu: 500m, memory: 512Mi, ephemeral-storage: 100G}}")
    plain = sc.run(sc.docs(sc.nodepool(), app), until="3m")
    assert len(sc.pending(plain, "scratch-")) == 1  # 20Gi root volumes only
    text = sc.text(sc.docs(sc.nodepool(), app), until="3m").replace(
        "  role: KarpenterNodeRole-parity\n", "  role: KarpenterNodeRole-parity\n  instanceStorePolicy: RAID0\n", 1)
    result = engine.Simulation(scenario.load_text(text, source="raid0.yaml")).run()
    node = _node_of(result, "scratch-")
    node_type = node["metadata"]["labels"]["node.kubernetes.io/instance-type"]  # type: ignore[index]
    store_gb = aws.data()["types"][node_type]["store"]
    eph = node["status"]["capacity"]["ephemeral-storage"]  # type: ignore[index]
    assert quantity.parse_milli(str(eph)) == store_gb * 10**9 * quantity.MILLI >= 100 * 10**9 * quantity.MILLI
