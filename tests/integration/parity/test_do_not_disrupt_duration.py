"""Issue 21 item 2.3: ``karpenter.sh/do-not-disrupt: "3m"`` protects a node for three minutes
counted from the pod's *start* (``status.startTime``), for drift and for consolidation; once it
has passed the node is disrupted.

Karpenter: ``pkg/utils/pod/scheduling.go`` ``IsDoNotDisruptActive`` (pod age is now minus
``status.startTime``; no start time fails safe) and ``pkg/controllers/disruption/consolidation_test.go``
("can consolidate nodes after duration-based do-not-disrupt annotation expires"). karpy counted
from the pod's creation, so a pod that waited for its node lost its protection early.

The instances take 2m to register (``launchLatency``), so the pods start about 2m after they
were created: protected until about 5m, not 3m.
"""

from __future__ import annotations

import textwrap

from karpy.simulator import engine, scenario

from . import scenarios as sc

START = 120.0
"""The pods start once their node registers, 2m (the launch latency) after they were created."""


def _protected(name: str, replicas: int, cpu: str) -> str:
    return textwrap.dedent(f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: {name}, namespace: default}}
    spec:
      replicas: {replicas}
      selector: {{matchLabels: {{app: {name}}}}}
      template:
        metadata:
          labels: {{app: {name}}}
          annotations: {{karpenter.sh/do-not-disrupt: 3m}}
        spec:
          containers:
          - name: app
            image: registry.example/app:1
            resources: {{requests: {{cpu: {cpu}, memory: 256Mi}}}}
    """)


def _run(documents: str, until: str, steps: str) -> engine.Result:
    text = sc.text(documents, until=until, steps=steps).replace("  seed: 3\n", "  seed: 3\n  launchLatency: 2m\n")
    return engine.Simulation(scenario.load_text(text, source="parity.yaml")).run()


DRIFT_POOL = sc.nodepool(disruption="{consolidationPolicy: WhenEmpty, consolidateAfter: 1h}")
DRIFT_STEP = "- at: 2m30s\n  apply:\n  - " + textwrap.indent(
    sc.nodepool(template_metadata="labels: {example.com/generation: two}",
                disruption="{consolidationPolicy: WhenEmpty, consolidateAfter: 1h}").strip("\n"), "    ")[4:]
"""A new template label: the node launched before drifts."""


def _first_replacement(result: engine.Result) -> float:
    launching = sc.events(result, "DisruptionLaunching")
    assert launching, "the node was never replaced after the protection passed"
    return min(float(e["t"]) for e in launching)


def test_a_drifted_node_waits_until_the_duration_has_passed_since_the_pod_started() -> None:
    result = _run(sc.docs(DRIFT_POOL, _protected("job", 1, "1")), "12m", DRIFT_STEP)
    (job,) = sc.running(result, "job-")
    assert _first_replacement(result) >= START + 180  # pre-fix: 3m after the pod's creation
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == job["spec"]["nodeName"])
    assert node["metadata"]["labels"].get("example.com/generation") == "two"


def test_consolidation_waits_until_the_duration_has_passed_since_the_pods_started() -> None:
    pool = sc.nodepool(disruption="{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}")
    big = sc.deployment("big", 2, cpu="1500m")
    steps = "- at: 2m30s\n  scale: {kind: Deployment, namespace: default, name: big, replicas: 0}"
    result = _run(sc.docs(pool, big, _protected("small", 2, "200m")), "12m", steps)
    # the node the big pods left empty goes at once; the small pods' node is replaced (cheaper)
    # only once their protection has passed
    assert _first_replacement(result) >= START + 180
    evicted = [e for e in sc.events(result, "Evicted") if e["involvedObject"]["name"].startswith("small-")]
    assert evicted and min(float(e["t"]) for e in evicted) >= START + 180
    assert len(sc.running(result, "small-")) == 2
