"""The chaos scenario of ``bench/chaos.py`` and its bounded CI form: every fault on at once.

:func:`text` writes a Scenario (YAML) for one seed: a spot + on-demand NodePool with consolidation,
three Deployments (one behind a ``minAvailable: 80%`` PDB, one behind ``maxUnavailable: 1``, one
whose pods are ``karpenter.sh/do-not-disrupt``), scale waves, spot interruptions, drift (the
NodePool's template changes), API and cloud errors, insufficient capacity at launch, lost and
duplicated interruption messages, controller restarts, instances that never register and nodes
going NotReady (repaired under the ``NodeRepair`` gate), pods failing to start and graceful pod
termination. Whatever the seed draws, its ``plan`` makes each fault of :data:`PLANNED` certain at a
named moment (:mod:`karpy.simulator.faultspec`), and restarts and NotReady nodes come at fixed
moments, so every run exercises those kinds however many calls the controllers make. :func:`run`
simulates it with
:class:`karpy.simulator.invariants.Checker` sampling the world every ``sample_every`` virtual seconds.
The last disruptive step is an hour before the end, so that the end state can be judged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from karpy.simulator import engine, invariants, scenario

PLANNED: dict[str, int] = {"iceAtLaunch": 0, "neverRegisters": 0, "conflict": 300, "lostResponse": 600,
                           "cloudThrottle": 900, "lostLaunchResponse": 1200}
"""Fault kind -> seconds after the start from which the scenario's plan makes it certain (every one
hits a call that is sure to come: the first launches are at the start, and the drift step replaces
nodes later)."""


def text(seed: int, hours: float = 6.0) -> str:
    rng = random.Random(seed)
    until = int(hours * 3600)
    quiet = until - 3600
    steps: list[str] = []
    t = 600
    while t < quiet:
        replicas = rng.randint(4, 24)
        steps.append(f"  - at: {t}s\n    scale: {{kind: Deployment, name: web, replicas: {replicas}}}")
        if rng.random() < 0.6:
            steps.append(f"  - at: {t + rng.randint(60, 900)}s\n    interrupt: "
                         "{nodeSelector: {karpenter.sh/capacity-type: spot}, kind: SpotInterruption}")
        t += rng.randint(1200, 3000)
    steps.append(f"  - at: {min(quiet, until // 3)}s\n    apply:\n" + _nodepool(drifted=True, indent="    - "))
    steps.append(f"  - at: {quiet}s\n    scale: {{kind: Deployment, name: web, replicas: 12}}")
    not_ready = max(1800, until // 4)
    return f"""apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {{name: chaos-{seed}}}
spec:
  cloud: {{provider: aws, region: us-east-1, zones: [us-east-1a, us-east-1b, us-east-1c]}}
  settings: {{clusterName: chaos, featureGates: {{NodeRepair: true}}}}
  until: {until}s
  seed: {seed}
  faults:
    api: {{conflict: 0.01, throttle: 0.01, serverError: 0.005, timeout: 0.005, lostResponse: 0.005,
          readError: 0.005, watchDrop: 0.002}}
    cloud: {{throttle: 0.01, serverError: 0.01, lostLaunch: 0.05, iceAtLaunch: 0.1, lostInterruption: 0.1,
            duplicateInterruption: 0.2, reorderInterruptions: 0.5}}
    restarts: {{at: [{rng.randint(300, 1800)}s], every: {rng.randint(5400, 9000)}s}}
    nodes: {{neverRegister: 0.05, notReadyEvery: {not_ready}s}}
    pods: {{startFailure: 0.05, gracefulTermination: true}}
    plan: [{", ".join(f"{{at: {at}s, fault: {name}}}" for name, at in PLANNED.items())}]
  steps:
{chr(10).join(steps)}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  amiSelectorTerms: [{{alias: al2023@latest}}]
  role: KarpenterNodeRole-chaos
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: chaos}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: chaos}}}}]
---
{_nodepool(drifted=False, indent="")}
---
{_deployment("web", 10, "1", "2Gi")}
---
{_deployment("api", 4, "500m", "1Gi")}
---
{_deployment("batch", 3, "500m", "1Gi", do_not_disrupt=True)}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: default}}
spec: {{minAvailable: 80%, selector: {{matchLabels: {{app: web}}}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: api, namespace: default}}
spec: {{maxUnavailable: 1, selector: {{matchLabels: {{app: api}}}}}}
"""


def _nodepool(*, drifted: bool, indent: str) -> str:
    labels = "{team: chaos, generation: two}" if drifted else "{team: chaos}"
    body = f"""apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    metadata: {{labels: {labels}}}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}}
      - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5, r5, m6i]}}
      - {{key: karpenter.k8s.aws/instance-size, operator: In, values: [large, xlarge, 2xlarge]}}
  disruption: {{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 2m}}"""
    if not indent:
        return body
    pad = " " * len(indent)
    lines = body.splitlines()
    return "\n".join([indent + lines[0], *(pad + line for line in lines[1:])])


def _deployment(name: str, replicas: int, cpu: str, memory: str, *, do_not_disrupt: bool = False) -> str:
    annotations = "\n      annotations: {karpenter.sh/do-not-disrupt: \"true\"}" if do_not_disrupt else ""
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata:
      labels: {{app: {name}}}{annotations}
    spec:
      containers: [{{name: {name}, image: app, resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}}}]"""


@dataclass
class Outcome:
    seed: int
    faults: dict[str, int]
    launches: int
    interruptions: int
    disruptions: int
    violations: list[str]
    unexpected_errors: int
    samples: int
    error_lines: list[str]


def run(seed: int, hours: float = 6.0, sample_every: float = 30.0) -> Outcome:
    scn = scenario.load_text(text(seed, hours), source=f"chaos-{seed}")
    holder: dict[str, Any] = {}

    def progress(done: float, _total: float) -> None:
        checker: invariants.Checker = holder["checker"]
        if done >= holder.get("next", 0.0):
            checker.sample()
            holder["next"] = done + sample_every

    sim = engine.Simulation(scn, progress=progress)
    holder["checker"] = invariants.Checker(sim.cluster, sim.cloud, sim.clock)
    sim.wire()
    holder["checker"].attach()
    result = sim.run()
    checker: invariants.Checker = holder["checker"]
    checker.finish()
    sim_metrics = result.metrics["simulator"]
    return Outcome(
        seed=seed, faults=dict(sim_metrics.get("faultsInjected", {})), launches=int(sim_metrics["instancesLaunched"]),
        interruptions=sum(1 for e in result.events if e["reason"] == "SpotInterrupted"
                          and e["involvedObject"].get("kind") == "NodeClaim"),
        disruptions=sum(1 for e in result.events if e["reason"] == "DisruptionTerminating"
                        and e["involvedObject"].get("kind") == "NodeClaim"),
        violations=list(checker.violations), unexpected_errors=result.unexpected_errors, samples=checker.samples,
        error_lines=list(result.error_lines))
