"""Every controller of a ``karpy simulate`` run reads in proportion to what changed.

The whole loop - the simulated kube-scheduler, kubelet and workload controllers, and karpy's own
(provisioner, disruption, lifecycle, termination...) - with 2,000 Deployments of one replica each:
once every pod runs, one Deployment is scaled from 1 to 2 (its pods need 3 CPUs: a new node), or
its pod is deleted (its ReplicaSet makes another). From then on, the objects the reconciles read
(the in-memory store's ``scanned`` counter: every object a ``list`` looked at, plus every object
an ``objects`` call handed back) are counted per controller. They must be the same as with 20
Deployments, and few: a controller that lists every Deployment, Pod or Node per reconcile fails.
(Watch handlers and the caches they feed are not counted: they see each change once.)
"""

from __future__ import annotations

import collections
from typing import Any

from karpy.simulator import engine, scenario

CHANGE_AT = 90
TOUCHED_PER_CHANGE = 16
"""Objects all reconciles may read after the change: the workload controllers' Deployment, its
ReplicaSets, the ReplicaSet and its pods (a few reconciles each), and the disruption pass's few."""


def _scenario(deployments: int, scale: bool = True) -> str:
    head = ("apiVersion: karpy.io/v1alpha1\nkind: Scenario\nmetadata: {name: cost}\nspec:\n"
            "  cloud: {provider: aws, region: us-east-1, zones: [us-east-1a, us-east-1b]}\n"
            "  settings: {clusterName: cost}\n  until: 3m\n"
            + (f"  steps: [{{at: {CHANGE_AT}s, scale: {{kind: Deployment, namespace: default, name: app-7, "
               "replicas: 2}}]\n" if scale else "")
            + "---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n"
            "  amiSelectorTerms: [{alias: al2023@latest}]\n  role: KarpenterNodeRole-cost\n"
            "  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: cost}}]\n"
            "  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: cost}}]\n"
            "---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n"
            "  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, "
            "name: default}\n      requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, "
            "values: [m5]}]\n")
    return head + "".join(
        "---\napiVersion: apps/v1\nkind: Deployment\n"
        f"metadata: {{name: app-{i}, namespace: default}}\n"
        f"spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: app-{i}}}}}\n"
        f"  template:\n    metadata: {{labels: {{app: app-{i}}}}}\n"
        f"    spec: {{containers: [{{name: web, image: nginx, resources: {{requests: {{cpu: {_cpu(i)}}}}}}}]}}\n"
        for i in range(deployments))


def _cpu(i: int) -> str:
    """app-7's pods are big: its second one needs a new node (the provisioner runs)."""
    return "3" if i == 7 else "100m"


def _reads_after_the_change(deployments: int, delete_pod: bool = False) -> tuple[dict[str, int], engine.Result]:
    """Objects read per controller from just before the change to the end of the run. The change:
    app-7 scaled to 2 (a scenario step), or with ``delete_pod`` its pod deleted (between two steps
    of the loop, as a user would)."""
    counting = [False]
    read: collections.Counter[str] = collections.Counter()
    deleted: list[str] = []

    def progress(done: float, _total: float) -> None:
        counting[0] = done >= CHANGE_AT - 1
        if delete_pod and done >= CHANGE_AT and not deleted:
            (pod,) = [p for p in cluster.objects("Pod") if p["metadata"]["labels"].get("app") == "app-7"]
            deleted.append(pod["metadata"]["name"])
            cluster.delete("Pod", pod["metadata"]["name"], "default")

    sim = engine.Simulation(scenario.load_text(_scenario(deployments, scale=not delete_pod), source="cost.yaml"),
                            progress=progress)
    sim.wire()
    cluster = sim.cluster
    current: list[str] = []
    every = cluster.objects

    def objects(kind: str) -> list[dict[str, Any]]:
        out = every(kind)
        if counting[0] and current:
            read[current[-1]] += len(out)
        return out

    cluster.objects = objects  # type: ignore[method-assign]
    for name, controller in sim.manager.controllers.items():
        def counted(key: str, reconcile: Any = controller.reconcile, name: str = name) -> float | None:
            before = cluster.scanned
            current.append(name)
            try:
                return reconcile(key)  # type: ignore[no-any-return]
            finally:
                current.pop()
                if counting[0]:
                    read[name] += cluster.scanned - before

        controller.reconcile = counted
    result = sim.run()
    return {k: v for k, v in read.items() if v}, result


def test_scaling_one_of_2000_deployments_costs_every_controller_a_constant_number_of_reads() -> None:
    few, _ = _reads_after_the_change(20)
    many, result = _reads_after_the_change(2000)
    app7 = [p for p in result.objects["pods"] if p["metadata"]["labels"].get("app") == "app-7"]
    assert [p["status"].get("phase") for p in app7] == ["Running", "Running"]  # the change was carried out
    assert sum(1 for p in result.objects["pods"] if p["status"].get("phase") == "Running") == 2001
    before = next(x for x in result.timeline if x.t >= CHANGE_AT - 10)
    assert sum(result.timeline[-1].nodes_by_nodepool.values()) > sum(before.nodes_by_nodepool.values())  # launched
    assert many == few
    assert sum(many.values()) <= TOUCHED_PER_CHANGE, many


def test_a_deleted_pod_among_2000_deployments_costs_every_controller_a_constant_number_of_reads() -> None:
    few, _ = _reads_after_the_change(20, delete_pod=True)
    many, result = _reads_after_the_change(2000, delete_pod=True)
    app7 = [p for p in result.objects["pods"] if p["metadata"]["labels"].get("app") == "app-7"]
    assert [p["status"].get("phase") for p in app7] == ["Running"]  # replaced and running again
    assert sum(1 for p in result.objects["pods"] if p["status"].get("phase") == "Running") == 2000
    assert many == few
    assert sum(many.values()) <= TOUCHED_PER_CHANGE, many
