"""Issue 12 item 5: DaemonSet host ports count on every node where the DaemonSet runs.

Karpenter adds the host ports of the DaemonSets that would run on a new NodeClaim to its port
usage: a pod needing a port a DaemonSet holds on every node fits nowhere, so Karpenter launches
nothing for it (and the pod stays pending), however long it waits.
"""

from __future__ import annotations

import textwrap

from karpy.simulator import engine

from . import scenarios as sc

DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: node-agent}}
  template:
    metadata: {labels: {app: node-agent}}
    spec:
      containers:
      - name: agent
        image: registry.example/agent:1
        ports: [{containerPort: 9100, hostPort: 9100}]
        resources: {requests: {cpu: 100m, memory: 64Mi}}
"""


def _port_pod_spec(port: int) -> str:
    return textwrap.dedent(f"""
    containers:
    - name: app
      image: registry.example/app:1
      ports: [{{containerPort: {port}, hostPort: {port}}}]
      resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
    """)


def _run(port: int) -> engine.Result:
    web = sc.deployment("web", 2, cpu="1")
    exporter = sc.deployment("exporter", 0)
    # the deployment's own container replaced by one that asks for the host port
    own_spec = textwrap.indent(_port_pod_spec(port).strip("\n"), "      ")
    exporter = exporter.split("      containers:")[0] + own_spec + "\n"
    return sc.run(sc.docs(sc.nodepool(), DAEMONSET, web, exporter), until="6m",
                  steps="- at: 2m\n  scale: {kind: Deployment, namespace: default, name: exporter, replicas: 1}")


def test_a_pod_needing_a_port_every_daemonset_pod_holds_launches_nothing_and_waits() -> None:
    result = _run(9100)
    assert len(sc.running(result, "web-")) == 2
    assert len(sc.pending(result, "exporter-")) == 1
    before = {c["metadata"]["name"] for c in result.objects["nodeclaims"]}
    assert sc.launched(result) == len(before)
    assert not [e for e in sc.events(result, "Nominated") if "exporter-" in e["involvedObject"]["name"]]
    reasons = [e["message"] for e in sc.events(result, "FailedScheduling")
               if e.get("source") == "karpenter" and "exporter-" in e["involvedObject"]["name"]]
    assert reasons and all("9100" in m for m in reasons), reasons


def test_a_pod_needing_another_port_runs_beside_the_daemonset() -> None:
    result = _run(9200)
    assert len(sc.running(result, "exporter-")) == 1
