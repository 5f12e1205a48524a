"""What the simulated kubelet writes: Node manifests, conditions, a started pod's status.

Pure functions over plain dicts, shared by :mod:`karpy.simulator.kubelet`: :func:`build_node`
(the Node a launched instance registers as; its naming and labels are described in the kubelet's
docstring), :func:`node_condition`, :func:`replace_conditions` (put conditions in by type, keeping
``lastTransitionTime`` when the status is unchanged), :func:`running_status` (the status merge
patch that makes a bound pod ``Running``), :func:`region_of`. Same inputs, same output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels, nodeclaim, quantity
from karpy.scheduling import requirements

UNREGISTERED_TAINT = {"key": labels.TAINT_UNREGISTERED, "effect": "NoExecute"}
NOT_READY_TAINT = {"key": labels.TAINT_NOT_READY, "effect": "NoSchedule"}

_AWS_REGION = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)")
_AZURE_REGION = re.compile(r"^([a-z0-9]+)-\d+$")
_OS_IMAGES = {"aws": "Amazon Linux 2023", "azure": "Ubuntu 22.04.5 LTS"}
POD_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """What the simulated cloud knows about a launched instance. Resources in milli-units."""

    provider_id: str
    instance_type: str
    zone: str
    capacity_type: str
    capacity: Mapping[str, int] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    """The node name when the cloud decides it; empty to let the kubelet name it."""
    karpenter: bool = True
    """Launched for a NodeClaim: the Node registers with Karpenter's ``karpenter.sh/unregistered`` taint,
    which the NodeClaim lifecycle removes. False for nodes of other autoscalers (a node group's)."""

    @property
    def provider(self) -> str:
        """The provider id's scheme: ``aws``, ``azure``, ``kwok``, ``fake``... (``""`` when none)."""
        scheme, sep, _ = self.provider_id.partition("://")
        return scheme if sep else ""


def replace_conditions(existing: Iterable[Mapping[str, Any]],
                       updates: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``existing`` with each condition of ``updates`` put in by type; an unchanged status keeps
    its ``lastTransitionTime``."""
    out = [dict(c) for c in existing]
    for new in updates:
        for i, c in enumerate(out):
            if c.get("type") == new["type"]:
                if c.get("status") == new["status"] and c.get("lastTransitionTime"):
                    new = {**new, "lastTransitionTime": c["lastTransitionTime"]}
                out[i] = new
                break
        else:
            out.append(new)
    return out


def same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.get("key") == b.get("key") and \
        (a.get("effect") or "NoSchedule") == (b.get("effect") or "NoSchedule")


def region_of(provider: str, zone: str) -> str:
    """``us-west-2a`` -> ``us-west-2`` (AWS), ``eastus-1`` -> ``eastus`` (Azure), else ``""``."""
    if provider == "aws":
        m = _AWS_REGION.match(zone)
        return m.group(1) if m else ""
    if provider == "azure":
        m = _AZURE_REGION.match(zone)
        return m.group(1) if m else ""
    return ""


def with_device_plugins(inst: InstanceInfo, claim: Mapping[str, Any] | None) -> InstanceInfo:
    """``inst`` advertising the extended resources its NodeClaim's status says the node has and the instance
    type does not (a NodeOverlay's ``capacity``: fuse devices, hugepages), as the device plugin configured for
    them would; everything else as the instance type has it."""
    status = (claim or {}).get("status") if isinstance((claim or {}).get("status"), Mapping) else None
    if not status:
        return inst
    try:
        capacity = quantity.parse_list(status.get("capacity") or {})
        allocatable = quantity.parse_list(status.get("allocatable") or {})
    except (quantity.QuantityError, TypeError, AttributeError):
        return inst
    extra = {k: v for k, v in capacity.items() if k not in inst.capacity and k not in _STANDARD_RESOURCES}
    if not extra:
        return inst
    return dataclasses.replace(inst, capacity={**inst.capacity, **extra},
                               allocatable={**(inst.allocatable or inst.capacity),
                                            **{k: allocatable.get(k, v) for k, v in extra.items()}})


_STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


def node_condition(type_: str, status: str, reason: str, now: float) -> dict[str, Any]:
    ts = clock_mod.rfc3339(now)
    return {"type": type_, "status": status, "reason": reason,
            "lastHeartbeatTime": ts, "lastTransitionTime": ts}


def build_node(inst: InstanceInfo, claim: nodeclaim.NodeClaim, name: str, address: str, *, region: str,
               ready_delay: float, now: float, kubelet_version: str) -> dict[str, Any]:
    """The Node instance ``inst`` of ``claim`` registers as (see :mod:`karpy.simulator.kubelet`)."""
    node_labels: dict[str, str] = dict(inst.labels)
    # a NodeClaim karpy wrote has valid requirements; be lenient with hand-written ones
    with contextlib.suppress(ValueError):
        node_labels.update(
            requirements.Requirements.from_node_selector_requirements(claim.spec.requirements).labels())
    node_labels.update(claim.labels)
    for key, value in ((labels.INSTANCE_TYPE, inst.instance_type), (labels.ZONE, inst.zone),
                       (labels.CAPACITY_TYPE, inst.capacity_type)):
        if value:
            node_labels[key] = value
    node_labels.setdefault(labels.ARCH, "amd64")
    node_labels.setdefault(labels.OS, "linux")
    region = region or region_of(inst.provider, inst.zone)
    if region:
        node_labels.setdefault(labels.REGION, region)
    node_labels[labels.HOSTNAME] = name

    taints: list[dict[str, Any]] = []
    for t in (*claim.spec.taints, *claim.spec.startup_taints):
        d = t.to_dict()
        if not any(same_taint(d, x) for x in taints):
            taints.append(d)
    extra = ([UNREGISTERED_TAINT] if inst.karpenter else []) + ([NOT_READY_TAINT] if ready_delay > 0 else [])
    taints.extend(dict(t) for t in extra if not any(same_taint(t, x) for x in taints))

    ready = ready_delay <= 0
    addresses = [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}]
    if inst.provider == "aws":
        addresses.append({"type": "InternalDNS", "address": name})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": {"providerID": inst.provider_id, "taints": taints},
        "status": {
            "capacity": quantity.format_list(inst.capacity),
            "allocatable": quantity.format_list(inst.allocatable or inst.capacity),
            "conditions": [
                node_condition("Ready", "True" if ready else "False",
                                "KubeletReady" if ready else "KubeletNotReady", now),
                node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory", now),
                node_condition("DiskPressure", "False", "KubeletHasNoDiskPressure", now),
                node_condition("PIDPressure", "False", "KubeletHasSufficientPID", now),
            ],
            "addresses": addresses,
            "nodeInfo": {
                "architecture": node_labels[labels.ARCH],
                "operatingSystem": node_labels[labels.OS],
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "containerRuntimeVersion": "containerd://1.7.22",
                "osImage": _OS_IMAGES.get(inst.provider, "simulated"),
            },
        },
    }


def running_status(pod: Mapping[str, Any], host_ip: str, now: float) -> dict[str, Any]:
    """The ``status`` merge patch of a pod that started: ``Running``, its four conditions ``True``,
    ``startTime``, host IPs and one running container status per container."""
    ts = clock_mod.rfc3339(now)
    status: dict[str, Any] = {"reason": None, "message": None, "nominatedNodeName": None,
                              "phase": "Running", "startTime": ts}
    if host_ip:
        status["hostIP"] = host_ip
        status["hostIPs"] = [{"ip": host_ip}]
    status["conditions"] = replace_conditions(
        (pod.get("status") or {}).get("conditions") or (),
        [{"type": t, "status": "True", "lastTransitionTime": ts} for t in POD_CONDITIONS])
    status["containerStatuses"] = [
        {"name": c.get("name", ""), "image": c.get("image", ""), "ready": True, "started": True,
         "restartCount": 0, "state": {"running": {"startedAt": ts}}}
        for c in (pod.get("spec") or {}).get("containers") or ()
    ]
    return status
