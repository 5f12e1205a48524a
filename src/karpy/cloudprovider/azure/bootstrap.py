"""The VM custom data that joins a new VM to the AKS cluster as a Node of its NodeClaim.

:func:`custom_data` renders a ``#cloud-config`` document and returns it base64-encoded, as ARM's
``osProfile.customData`` wants it. It writes the kubelet's node labels (the NodeClaim's labels and
AKS's ``kubernetes.azure.com/*`` ones), its register-with taints (taints and startup taints), the
kubelet settings of the AKSNodeClass (``maxPods``, reserved resources, eviction thresholds), the
API server endpoint and cluster name, then runs AKS's node provisioning script. The output depends
only on the arguments (sorted keys), so the same NodeClaim always gets the same custom data.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PROVISION_SCRIPT = "/opt/azure/containers/provision_start.sh"


@dataclass(frozen=True)
class NodeBootstrap:
    """What the node needs to know to join the cluster."""

    cluster_name: str
    cluster_endpoint: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[str] = ()
    """``key=value:Effect`` strings."""
    max_pods: int | None = None
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)


def kubelet_flags(b: NodeBootstrap) -> list[str]:
    """The kubelet command-line flags of the node, in a stable order."""
    flags = []
    if b.node_labels:
        flags.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(b.node_labels.items())))
    if b.taints:
        flags.append("--register-with-taints=" + ",".join(b.taints))
    if b.max_pods is not None:
        flags.append(f"--max-pods={b.max_pods}")
    if b.kube_reserved:
        flags.append("--kube-reserved=" + ",".join(f"{k}={v}" for k, v in sorted(b.kube_reserved.items())))
    if b.eviction_hard:
        flags.append("--eviction-hard=" + ",".join(f"{k}<{v}" for k, v in sorted(b.eviction_hard.items())))
    return flags


def render(b: NodeBootstrap) -> str:
    """The cloud-config text (before base64)."""
    env = {
        "API_SERVER_NAME": b.cluster_endpoint,
        "CLUSTER_NAME": b.cluster_name,
        "KUBELET_FLAGS": " ".join(kubelet_flags(b)),
    }
    env_file = "".join(f"{k}={json.dumps(v)}\n" for k, v in sorted(env.items()))
    lines = [
        "#cloud-config",
        "write_files:",
        "- path: /etc/default/karpy-node",
        "  permissions: '0644'",
        "  content: |",
        *(f"    {line}" for line in env_file.splitlines()),
        "runcmd:",
        f"- [bash, -c, 'set -a; . /etc/default/karpy-node; {PROVISION_SCRIPT}']",
    ]
    return "\n".join(lines) + "\n"


def custom_data(b: NodeBootstrap) -> str:
    """``osProfile.customData``: the cloud-config, base64."""
    return base64.b64encode(render(b).encode()).decode()


def decode(data: str) -> str:
    """The cloud-config text of a ``customData`` value (for tests and debugging)."""
    return base64.b64decode(data.encode()).decode()
