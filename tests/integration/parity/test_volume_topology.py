"""Issue 12 item 6: volume topology. A pod gets a node in a zone its volume can reach.

As Karpenter's volume topology tests: a PVC bound to a zonal PV (node affinity) or unbound with a
WaitForFirstConsumer StorageClass restricted by ``allowedTopologies`` pins the pod's NodeClaim to
those zones; when that conflicts with the pod's own constraints the pod stays pending with a
reason. The simulator provisions and binds volumes as the PV controller and a CSI driver do.
"""

from __future__ import annotations

from karpy.simulator import engine

from . import scenarios as sc

WFFC_CLASS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zonal-gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [us-east-1c]}
"""

BOUND_PV = """
apiVersion: v1
kind: PersistentVolume
metadata: {name: data-pv}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0123}
  claimRef: {namespace: default, name: data}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b]}
"""

BOUND_PVC = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: default
  annotations: {pv.kubernetes.io/bind-completed: "yes"}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: data-pv
  resources: {requests: {storage: 10Gi}}
"""

WFFC_PVC = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: zonal-gp3
  resources: {requests: {storage: 10Gi}}
"""


def _db(node_selector: str = "") -> str:
    spec = "volumes:\n- name: data\n  persistentVolumeClaim: {claimName: data}"
    if node_selector:
        spec += f"\nnodeSelector: {{topology.kubernetes.io/zone: {node_selector}}}"
    return sc.deployment("db", 1, pod_spec=spec)


def _zone_of_pod(result: engine.Result, prefix: str) -> str:
    (p,) = sc.running(result, prefix)
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == p["spec"]["nodeName"])
    return str(node["metadata"]["labels"]["topology.kubernetes.io/zone"])


def _claim_zones(result: engine.Result) -> list[str]:
    return sorted(c["metadata"]["labels"]["topology.kubernetes.io/zone"] for c in result.objects["nodeclaims"])


def test_a_pod_whose_claim_is_bound_to_a_zonal_volume_runs_in_the_volumes_zone() -> None:
    result = sc.run(sc.docs(sc.nodepool(), BOUND_PV, BOUND_PVC, _db()), until="4m")
    assert _zone_of_pod(result, "db-") == "us-east-1b"
    assert _claim_zones(result) == ["us-east-1b"]


def test_a_wait_for_first_consumer_claim_lands_in_an_allowed_zone_and_is_bound_there() -> None:
    sim, result = sc.simulate(sc.docs(sc.nodepool(), WFFC_CLASS, WFFC_PVC, _db()), until="4m")
    assert _zone_of_pod(result, "db-") == "us-east-1c"
    assert _claim_zones(result) == ["us-east-1c"]
    pvc = sim.cluster.get("PersistentVolumeClaim", "data", "default")
    assert pvc["status"]["phase"] == "Bound"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == \
        sc.running(result, "db-")[0]["spec"]["nodeName"]
    pv = sim.cluster.get("PersistentVolume", pvc["spec"]["volumeName"])
    (term,) = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]} in \
        term["matchExpressions"]


def test_an_immediate_claim_is_provisioned_first_and_its_pod_follows_the_volume() -> None:
    immediate = WFFC_CLASS.replace("WaitForFirstConsumer", "Immediate").replace("us-east-1c", "us-east-1b")
    sim, result = sc.simulate(sc.docs(sc.nodepool(), immediate, WFFC_PVC, _db()), until="4m")
    assert _zone_of_pod(result, "db-") == "us-east-1b"
    assert _claim_zones(result) == ["us-east-1b"]
    assert sim.cluster.get("PersistentVolumeClaim", "data", "default")["status"]["phase"] == "Bound"


def test_a_volume_zone_that_conflicts_with_the_pods_own_zone_leaves_it_pending_with_a_reason() -> None:
    result = sc.run(sc.docs(sc.nodepool(), BOUND_PV, BOUND_PVC, _db(node_selector="us-east-1a")), until="3m")
    assert sc.pending(result, "db-")
    assert sc.launched(result) == 0
    reasons = {e["message"] for e in sc.events(result, "FailedScheduling") if e.get("source") == "karpenter"}
    assert any("topology.kubernetes.io/zone" in m for m in reasons), reasons


def test_a_missing_claim_keeps_the_pod_pending_and_says_so() -> None:
    result = sc.run(sc.docs(sc.nodepool(), _db()), until="2m")
    assert sc.pending(result, "db-")
    assert sc.launched(result) == 0
    reasons = {e["message"] for e in sc.events(result, "FailedScheduling") if e.get("source") == "karpenter"}
    assert any("persistentvolumeclaim default/data not found" in m for m in reasons), reasons


def test_consolidation_replaces_a_node_holding_a_zonal_volume_within_the_volumes_zone() -> None:
    pool = sc.nodepool(disruption="{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}")
    web = sc.deployment("web", 6, cpu="1", pod_spec="nodeSelector: {topology.kubernetes.io/zone: us-east-1b}")
    steps = "- at: 3m\n  scale: {kind: Deployment, namespace: default, name: web, replicas: 0}"
    result = sc.run(sc.docs(pool, BOUND_PV, BOUND_PVC, _db(), web), until="12m", steps=steps)
    (launch,) = [e for e in sc.events(result, "DisruptionLaunching") if "Launching" in e["message"]]
    replacement = launch["involvedObject"]["name"]
    claims = {c["metadata"]["name"]: c for c in result.objects["nodeclaims"]}
    assert replacement in claims, "the replacement must be where the pod went, not emptied again"
    assert claims[replacement]["metadata"]["labels"]["topology.kubernetes.io/zone"] == "us-east-1b"
    assert _zone_of_pod(result, "db-") == "us-east-1b"
    assert sc.launched(result) == 3


NODE_A = """
apiVersion: v1
kind: Node
metadata:
  name: static-a
  labels: {kubernetes.io/hostname: static-a, topology.kubernetes.io/zone: us-east-1a, kubernetes.io/os: linux}
spec: {providerID: "aws:///us-east-1a/i-0000000000000000a"}
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  allocatable: {cpu: 3920m, memory: 15Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
"""


def test_the_kube_scheduler_keeps_a_pod_off_nodes_outside_its_volumes_zone_and_says_so() -> None:
    _, result = sc.simulate(sc.docs(NODE_A, BOUND_PV, BOUND_PVC, _db()), until="1m", karpy=False)
    (p,) = sc.pods(result, "db-")
    assert not p["spec"].get("nodeName")
    (cond,) = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["message"] == "0/1 nodes are available: 1 node(s) had volume node affinity conflict."


def test_the_kube_scheduler_keeps_a_pod_whose_claim_cannot_be_used_pending_and_says_why() -> None:
    no_class = WFFC_PVC.replace("zonal-gp3", "missing-class")
    _, result = sc.simulate(sc.docs(NODE_A, no_class, _db()), until="1m", karpy=False)
    (p,) = sc.pods(result, "db-")
    assert not p["spec"].get("nodeName")
    (cond,) = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "storageclass missing-class not found" in cond["message"]
