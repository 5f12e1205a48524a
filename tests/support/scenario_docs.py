"""Scenario texts the simulator tests share: a Scenario whose one step scales the Deployment ``web`` up, a
NodePool, its NodeClass and that Deployment, each a YAML document joined by :func:`documents`.

A test names only what it is about (the cloud, the NodeClass spec, the NodePool's requirements); the rest is
the same small workload everywhere: ``web`` (nginx, 500m CPU and 1Gi a pod), at 0 replicas until the step.
"""

from __future__ import annotations

from collections.abc import Sequence

ON_DEMAND = "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"
D_FAMILY = "{key: karpenter.azure.com/sku-family, operator: In, values: [D]}"
AKS_REF = "{group: karpenter.azure.com, kind: AKSNodeClass, name: default}"
EC2_SPEC = ("{amiSelectorTerms: [{alias: al2023@latest}], role: KarpenterNodeRole, "
            "subnetSelectorTerms: [{tags: {x: y}}], securityGroupSelectorTerms: [{tags: {x: y}}]}")

WEB = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}
"""
"""The Deployment every scenario here scales."""


def arch(*values: str) -> str:
    """A requirement on ``kubernetes.io/arch``."""
    return f"{{key: kubernetes.io/arch, operator: In, values: [{', '.join(values)}]}}"


def scenario(name: str, cloud: str, *, until: str, replicas: int, at: str = "10s", seed: int = 1) -> str:
    """The Scenario document: ``cloud`` as a YAML flow mapping, one step scaling ``web`` to ``replicas``."""
    return f"""apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {{name: {name}}}
spec:
  cloud: {cloud}
  until: {until}
  seed: {seed}
  steps:
  - at: {at}
    scale: {{kind: Deployment, namespace: default, name: web, replicas: {replicas}}}
"""


def node_class(api_version: str, kind: str, spec: str) -> str:
    """A NodeClass named ``default`` with ``spec`` (a YAML flow mapping)."""
    return f"""apiVersion: {api_version}
kind: {kind}
metadata: {{name: default}}
spec: {spec}
"""


def nodepool(node_class_ref: str, requirements: Sequence[str], *, api_version: str = "karpenter.sh/v1",
             disruption: str | None = None) -> str:
    """The NodePool ``default`` of that NodeClass (``node_class_ref`` a YAML flow mapping)."""
    lines = [f"apiVersion: {api_version}", "kind: NodePool", "metadata: {name: default}", "spec:", "  template:",
             "    spec:", f"      nodeClassRef: {node_class_ref}", "      requirements:",
             *(f"      - {r}" for r in requirements)]
    if disruption is not None:
        lines.append(f"  disruption: {disruption}")
    return "\n".join(lines) + "\n"


def documents(*docs: str) -> str:
    """The documents as one multi-document YAML text."""
    return "---\n".join(d if d.endswith("\n") else d + "\n" for d in docs)
