"""Small ``karpy simulate`` scenarios for the Karpenter-parity behaviours (issue 12).

:func:`run` loads a scenario text (an AWS us-east-1 cloud with three zones, the ``default``
EC2NodeClass, and the documents given) and simulates it; the helpers read the result.
"""

from __future__ import annotations

import textwrap
from typing import Any

from karpy.simulator import engine, scenario

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")

NODECLASS = """---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-parity
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: parity}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: parity}}]
"""


def text(documents: str, *, until: str = "5m", steps: str = "", settings: str = "") -> str:
    """A scenario file: the Scenario document, the NodeClass and ``documents`` (YAML)."""
    head = ("apiVersion: karpy.io/v1alpha1\nkind: Scenario\nmetadata: {name: parity}\nspec:\n"
            "  cloud: {provider: aws, region: us-east-1, zones: [" + ", ".join(ZONES) + "]}\n"
            "  settings: {clusterName: parity" + (", " + settings if settings else "") + "}\n"
            f"  until: {until}\n  seed: 3\n")
    if steps:
        head += "  steps:\n" + textwrap.indent(textwrap.dedent(steps).strip("\n"), "  ") + "\n"
    return head + NODECLASS + "---\n" + textwrap.dedent(documents).strip("\n") + "\n"


def run(documents: str, *, until: str = "5m", steps: str = "", settings: str = "") -> engine.Result:
    return simulate(documents, until=until, steps=steps, settings=settings)[1]


def simulate(documents: str, *, until: str = "5m", steps: str = "", settings: str = "", karpy: bool = True
             ) -> tuple[engine.Simulation, engine.Result]:
    """The simulation (to read its cluster afterwards) and its result; ``karpy=False``: the world
    alone (kube-scheduler, kubelet, workload controllers)."""
    loaded = scenario.load_text(text(documents, until=until, steps=steps, settings=settings),
                                source="parity.yaml")
    sim = engine.Simulation(loaded, karpy=karpy)
    return sim, sim.run()


def nodepool(name: str = "default", *, requirements: str = "", extra_spec: str = "",
             template_metadata: str = "", disruption: str = "") -> str:
    """A v1 NodePool on the default EC2NodeClass (on-demand, amd64 unless requirements say)."""
    reqs = requirements or """
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}
    """
    out = f"""
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: {name}}}
    spec:
      template:
        metadata: {{{template_metadata}}}
        spec:
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
          requirements:
    """
    out = textwrap.dedent(out)
    out += textwrap.indent(textwrap.dedent(reqs).strip("\n"), "      ") + "\n"
    if disruption:
        out += "  disruption: " + disruption + "\n"
    if extra_spec:
        out += textwrap.indent(textwrap.dedent(extra_spec).strip("\n"), "  ") + "\n"
    return out


def deployment(name: str, replicas: int, *, cpu: str = "500m", memory: str = "512Mi",
               pod_spec: str = "", labels: str = "") -> str:
    """A Deployment of ``replicas`` pods labelled ``app: name``; ``pod_spec`` adds pod spec fields."""
    extra = textwrap.indent(textwrap.dedent(pod_spec).strip("\n"), "      ") + "\n" if pod_spec else ""
    return textwrap.dedent(f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: {name}, namespace: default}}
    spec:
      replicas: {replicas}
      selector: {{matchLabels: {{app: {name}}}}}
      template:
        metadata: {{labels: {{app: {name}{", " + labels if labels else ""}}}}}
        spec:
          containers:
          - name: app
            image: registry.example/app:1
            resources: {{requests: {{cpu: {cpu}, memory: {memory}}}}}
    """).strip("\n") + "\n" + extra


def docs(*parts: str) -> str:
    return "---\n".join(textwrap.dedent(p).strip("\n") + "\n" for p in parts)


def karpy_nodes(result: engine.Result) -> list[dict[str, Any]]:
    return [n for n in result.objects["nodes"]
            if "karpenter.sh/nodepool" in (n["metadata"].get("labels") or {})]


def pods(result: engine.Result, prefix: str) -> list[dict[str, Any]]:
    return [p for p in result.objects["pods"] if p["metadata"]["name"].startswith(prefix)]


def running(result: engine.Result, prefix: str) -> list[dict[str, Any]]:
    return [p for p in pods(result, prefix) if (p.get("status") or {}).get("phase") == "Running"]


def pending(result: engine.Result, prefix: str) -> list[dict[str, Any]]:
    return [p for p in pods(result, prefix) if not p["spec"].get("nodeName")]


def events(result: engine.Result, reason: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e.get("reason") == reason]


def launched(result: engine.Result) -> int:
    """Instances the simulated cloud launched during the run."""
    return int(result.metrics["simulator"]["instancesLaunched"])


def terminated(result: engine.Result) -> int:
    return int(result.metrics["simulator"]["instancesTerminated"])
