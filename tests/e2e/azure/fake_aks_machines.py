"""The AKS machine API and the node image versions API, served by :class:`fake_arm.FakeARM`.

* ``PUT .../managedClusters/<cluster>/agentPools/<pool>/machines/<name>``: refuses (400 ``InvalidParameter``) a
  body without ``properties.hardware.vmSize`` or whose ``nodeImageVersion`` is not ``<gallery>-<definition>-
  <version>`` of a published node image version; else stores the machine (``properties.resourceId``: the VM AKS
  makes, ``aks-<pool>-<name>-12345678-vm`` in the node resource group; ``status.creationTimestamp``) and
  answers ``201`` with ``Azure-AsyncOperation``; a size scripted with :meth:`FakeMachines.fail` makes the
  operation fail and the machine ``provisioningState: Failed`` with ``status.provisioningError``;
* ``GET`` of one machine or the pool's ``machines``; ``POST .../agentPools/<pool>/deleteMachines``
  ``{"machineNames": [...]}`` removes them (202 with ``Azure-AsyncOperation``; 404 for a missing one);
* ``GET /subscriptions/<sub>/providers/Microsoft.ContainerService/locations/<region>/nodeImageVersions``: the
  entries of :attr:`FakeMachines.node_images`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

_MACHINES = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.ContainerService/"
    r"managedClusters/(?P<cluster>[^/]+)/agentPools/(?P<pool>[^/]+)/(?:machines(?:/(?P<name>[^/]+))?|"
    r"(?P<delete>deleteMachines))$", re.IGNORECASE)
_NODE_IMAGES = re.compile(r"^/subscriptions/[^/]+/providers/Microsoft\.ContainerService/locations/[^/]+/"
                          r"nodeImageVersions$", re.IGNORECASE)

Answer = tuple[int, dict[str, str], Any]


class Operations(Protocol):
    def operation(self, error: dict[str, Any] | None) -> str: ...


@dataclass
class FakeMachines:
    subscription: str
    node_resource_group: str
    now: str
    node_images: list[dict[str, Any]] = field(default_factory=list)
    machines: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(pool, name) -> the stored machine."""
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def fail(self, size: str, code: str, message: str = "") -> None:
        """The next machine of ``size`` fails to provision with ARM error ``code``."""
        self.failures[size] = {"code": code, "message": message or f"{code} for {size}"}

    def publish(self, gallery: str, definition: str, version: str) -> None:
        self.node_images.append({"fullName": f"{gallery}-{definition}-{version}", "os": gallery, "sku": definition,
                                 "version": version})

    def handle(self, method: str, path: str, body: Any, ops: Operations) -> Answer | None:
        if _NODE_IMAGES.match(path) and method == "GET":
            return 200, {}, {"value": list(self.node_images)}
        m = _MACHINES.match(path)
        if m is None:
            return None
        pool = m["pool"]
        if m["delete"]:
            if method != "POST":
                return 405, {}, {"error": {"code": "MethodNotAllowed", "message": method}}
            names = (body or {}).get("machineNames") or []
            missing = [n for n in names if (pool, n) not in self.machines]
            if missing or not names:
                return 404, {}, {"error": {"code": "NotFound", "message": f"machines {missing or names} not found"}}
            for n in names:
                del self.machines[(pool, n)]
            return 202, {"Azure-AsyncOperation": ops.operation(None)}, None
        name = m["name"]
        if name is None:
            return 200, {}, {"value": [v for (p, _), v in sorted(self.machines.items()) if p == pool]}
        if method == "GET":
            found = self.machines.get((pool, name))
            if found is None:
                return 404, {}, {"error": {"code": "NotFound", "message": f"machine {name} not found"}}
            return 200, {}, found
        if method == "PUT":
            return self._put(m["rg"], m["cluster"], pool, name, body or {}, ops)
        return 405, {}, {"error": {"code": "MethodNotAllowed", "message": method}}

    def _put(self, rg: str, cluster: str, pool: str, name: str, body: dict[str, Any], ops: Operations) -> Answer:
        props = body.get("properties") or {}
        size = (props.get("hardware") or {}).get("vmSize")
        if not size:
            return 400, {}, {"error": {"code": "InvalidParameter", "message": "properties.hardware.vmSize is required"}}
        published = {i["fullName"] for i in self.node_images}
        if props.get("nodeImageVersion") not in published:
            return 400, {}, {"error": {"code": "InvalidParameter",
                                       "message": f"nodeImageVersion {props.get('nodeImageVersion')!r} not found"}}
        machine: dict[str, Any] = json.loads(json.dumps(body))
        machine["id"] = (f"/subscriptions/{self.subscription}/resourceGroups/{rg}/providers/"
                         f"Microsoft.ContainerService/managedClusters/{cluster}/agentPools/{pool}/machines/{name}")
        machine["name"] = name
        stored = machine["properties"]
        stored["resourceId"] = (f"/subscriptions/{self.subscription}/resourceGroups/{self.node_resource_group}/"
                                f"providers/Microsoft.Compute/virtualMachines/aks-{pool}-{name}-12345678-vm")
        stored["status"] = {"creationTimestamp": self.now}
        error = self.failures.pop(size, None)
        stored["provisioningState"] = "Failed" if error else "Succeeded"
        if error:
            stored["status"]["provisioningError"] = error
        self.machines[(pool, name)] = machine
        return 201, {"Azure-AsyncOperation": ops.operation(error)}, machine
