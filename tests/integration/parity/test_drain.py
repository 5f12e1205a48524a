"""Issue 21 2.1, 2.4 and 2.9 (and issue 19): how a node is drained and which nodes may be, as Karpenter.

* 2.1 drain order: Karpenter's ``DrainReconciler.drain`` / ``groupPodsByPriority``
  (``pkg/controllers/node/termination/drain.go``) evicts non-critical pods, then non-critical DaemonSet
  pods, then critical ones; each group holds its terminating pods, so the next group starts only when
  the previous one is fully deleted.
* 2.4: the Eviction API refuses a pod two budgets select (kube-apiserver's ``eviction.go``: 500 "This
  pod has more than one PodDisruptionBudget"), and Karpenter's ``pdb.Limits.CanEvictPods`` reads every
  evictable pod, DaemonSet pods included, against ``status.disruptionsAllowed``: such nodes are not
  candidates for voluntary disruption.
* 2.9: ``pkg/controllers/node/termination/volumedetachment.go``: the instance is terminated only once
  the node's VolumeAttachments are gone (``VolumesDetached``), with ``AwaitingVolumeDetachment`` meanwhile.
"""

from __future__ import annotations

import textwrap
from typing import Any

from karpy.simulator import engine, scenario

from . import scenarios as sc

EXPIRING_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 3m
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1h}
"""

DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs, namespace: default}
spec:
  selector: {matchLabels: {app: logs}}
  template:
    metadata: {labels: {app: logs}}
    spec:
      terminationGracePeriodSeconds: 30
      containers:
      - name: agent
        image: registry.example/agent:1
        resources: {requests: {cpu: 50m, memory: 64Mi}}
"""


def _graceful(documents: str, until: str) -> tuple[engine.Simulation, engine.Result]:
    """A parity scenario whose evicted pods linger their terminationGracePeriodSeconds (spec.faults.pods)."""
    text = sc.text(documents, until=until).replace(
        "  seed: 3\n", "  seed: 3\n  faults: {pods: {gracefulTermination: true}}\n", 1)
    sim = engine.Simulation(scenario.load_text(text, source="parity.yaml"))
    return sim, sim.run()


def _first_eviction(result: engine.Result, prefix: str) -> float:
    times = [float(e["t"]) for e in sc.events(result, "Evicted") if str(e["involvedObject"]["name"]).startswith(prefix)]
    assert times, f"no pod {prefix}* was evicted"
    return min(times)


def test_each_drain_group_starts_only_once_the_previous_group_is_fully_deleted() -> None:
    grace = "terminationGracePeriodSeconds: 30"
    docs = sc.docs(EXPIRING_POOL, DAEMONSET,
                   sc.deployment("app", 1, cpu="300m", pod_spec=grace),
                   sc.deployment("crit", 1, cpu="300m",
                                 pod_spec=grace + "\npriorityClassName: system-cluster-critical"))
    _, result = _graceful(docs, "6m")
    app, logs, crit = (_first_eviction(result, p) for p in ("app-", "logs-", "crit-"))
    assert app + 30 <= logs, (app, logs, crit)  # the DaemonSet pod waits for the app pod's 30 s of grace
    assert logs + 30 <= crit, (app, logs, crit)  # the critical pod waits for the DaemonSet pod


BUSY = "{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}"
SHRINK = "- at: 2m\n  scale: {kind: Deployment, namespace: default, name: web, replicas: 1}"


def _pdb(name: str, app: str, limit: str) -> str:
    return textwrap.dedent(f"""
    apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {{name: {name}, namespace: default}}
    spec:
      {limit}
      selector: {{matchLabels: {{app: {app}}}}}
    """)


def _shrunk(*extra: str) -> engine.Result:
    """Six 1.5-CPU web pods on two nodes, then one: the node left empty goes, and the one still running a
    web pod (an m5a.2xlarge for 1.5 CPU) would be replaced by a smaller one, its pod evicted."""
    docs = sc.docs(sc.nodepool(disruption=BUSY), sc.deployment("web", 6, cpu="1500m"), *extra)
    return sc.run(docs, until="8m", steps=SHRINK)


def _web_evicted(result: engine.Result) -> list[dict[str, Any]]:
    return [e for e in sc.events(result, "Evicted") if str(e["involvedObject"]["name"]).startswith("web-")]


def _unconsolidatable(result: engine.Result) -> list[str]:
    return [str(e["message"]) for e in sc.events(result, "Unconsolidatable")]


def test_without_a_blocking_budget_the_shrunk_node_is_consolidated() -> None:
    """The control of the two tests below: the same scenario under one budget that allows disruption."""
    result = _shrunk(_pdb("web", "web", "maxUnavailable: 1"))
    assert _web_evicted(result)


def test_a_node_with_a_pod_under_two_budgets_is_never_chosen() -> None:
    result = _shrunk(_pdb("web", "web", "maxUnavailable: 1"), _pdb("web-too", "web", "maxUnavailable: 1"))
    assert not _web_evicted(result)
    assert any("more than one PodDisruptionBudget (default/web, default/web-too)" in m
               for m in _unconsolidatable(result)), _unconsolidatable(result)
    assert all(p["status"]["phase"] == "Running" for p in sc.pods(result, "web-"))


def test_a_node_with_a_daemonset_pod_under_a_fully_blocking_budget_is_never_chosen() -> None:
    agent = DAEMONSET.replace("logs", "agent")
    result = _shrunk(_pdb("web", "web", "maxUnavailable: 1"), agent, _pdb("agent", "agent", "maxUnavailable: 0"))
    assert not _web_evicted(result)
    assert 'pdb "default/agent" prevents pod evictions' in _unconsolidatable(result)


WFFC_CLASS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
"""

DATA_PVC = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  resources: {requests: {storage: 10Gi}}
"""


def test_an_expired_node_is_terminated_only_after_its_volume_attachments_are_gone() -> None:
    volume = "volumes:\n- name: data\n  persistentVolumeClaim: {claimName: data}"
    sim, result = sc.simulate(sc.docs(EXPIRING_POOL, WFFC_CLASS, DATA_PVC, sc.deployment("db", 1, pod_spec=volume)),
                              until="6m")
    waits = sc.events(result, "AwaitingVolumeDetachment")
    assert waits and all(str(e["message"]).startswith("Awaiting deletion of bound volumeattachments (csi-")
                         for e in waits)
    node_names = {n["metadata"]["name"] for n in result.objects["nodes"]}
    expired = {str(e["involvedObject"]["name"]) for e in waits}
    assert not expired & node_names  # those nodes went, once their volumes detached
    attachments: list[dict[str, Any]] = list(sim.cluster.objects("VolumeAttachment"))
    assert attachments and {a["spec"]["nodeName"] for a in attachments} <= node_names
    assert len(sc.running(result, "db-")) == 1
