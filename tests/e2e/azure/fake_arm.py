"""A small fake of Azure Resource Manager on 127.0.0.1 for driving the real Azure SDK pipeline.

No Azure emulator exists, so the tests run azure-mgmt-compute / azure-mgmt-network (their real
serialisation, authentication header, retry and long-running-operation polling) against this
threaded HTTP server. It keeps state for Resource SKUs, NICs, VMs and managed disks of one
subscription and answers as ARM does where the SDK looks:

* ``PUT`` of a NIC or VM answers ``201`` with an ``Azure-AsyncOperation`` header; the operation
  reports ``InProgress`` on its first poll and then ``Succeeded`` (or ``Failed`` with the scripted
  ARM error); the SDK then GETs the resource. A VM whose creation fails stays with
  ``provisioningState: Failed``, as on Azure.
* ``DELETE`` answers ``202`` with a ``Location`` header that answers ``202`` once, then ``200``;
  deleting something missing answers ``204``. ``deleteOption`` is NOT applied (karpy deletes a VM's
  NIC and disk itself).
* errors are ARM's ``{"error": {"code", "message"}}``; unknown resources are 404 ``ResourceNotFound``.
* a request without ``Authorization: Bearer ...`` is refused with 401.

Failures are scripted with :meth:`FakeARM.fail_vm` (by size, ARM zone and priority; synchronous
409 or asynchronous through the operation). The Retail Prices API is served at
``/api/retail/prices`` in two pages. Community gallery image versions
(``GET .../locations/<region>/communityGalleries/<gallery>/images/<definition>/versions``) are those
:meth:`FakeARM.publish_image` put in place (404 ``ResourceNotFound`` for a definition without any, as
ARM answers). :attr:`FakeARM.requests` records every call (method, path,
JSON body). VM extensions (``PUT``/``GET .../virtualMachines/<vm>/extensions/<name>``; the stored copy
drops ``protectedSettings`` as ARM does) and AKS's node bootstrapping API (``GET .../Microsoft.ContainerService/
managedclusters/<cluster>/nodeBootstrapping`` with a ``ProvisionValues`` body: custom data and a CSE command
with the bootstrap token redacted, 400 ``MissingRequiredProperty`` for a missing required field, 500 when
:attr:`FakeARM.bootstrapping_down`) are served too. Start with ``with FakeARM(...) as arm:``;
``arm.endpoint`` is the base URL.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import fake_aks_machines

SUBSCRIPTION = "00000000-1111-2222-3333-444444444444"

_RESOURCE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
    r"(?P<provider>Microsoft\.Compute|Microsoft\.Network)/(?P<type>virtualMachines|networkInterfaces|disks)"
    r"(?:/(?P<name>[^/]+))?$", re.IGNORECASE)
_GALLERY = re.compile(r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/locations/(?P<loc>[^/]+)/"
                      r"communityGalleries/(?P<gallery>[^/]+)/images/(?P<image>[^/]+)/versions$", re.IGNORECASE)
_EXTENSION = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/virtualMachines/"
    r"(?P<vm>[^/]+)/extensions/(?P<name>[^/]+)$", re.IGNORECASE)
_BOOTSTRAPPING = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.ContainerService/"
    r"managedclusters/(?P<cluster>[^/]+)/nodeBootstrapping$", re.IGNORECASE)
BOOTSTRAPPING_REQUIRED = ("name", "vmSize", "osType", "osSku", "storageProfile", "distro", "orchestratorVersion",
                          "vnetCidrs", "vnetSubnetID", "mode", "architecture", "maxPods")
"""The ``provisionProfile`` fields AKS's node bootstrapping API refuses to go without."""
_OPERATION = re.compile(r"^/subscriptions/[^/]+/providers/Microsoft\.Compute/locations/[^/]+/operations/(?P<id>[^/]+)$")


@dataclass
class Call:
    method: str
    path: str
    body: Any = None


@dataclass
class _Operation:
    polls: int = 0
    error: dict[str, Any] | None = None
    kind: str = "async"
    """``async`` (Azure-AsyncOperation status) or ``location`` (202 until done, then 200)."""


@dataclass
class _Failure:
    size: str
    zone: str | None
    priority: str | None
    code: str
    message: str
    synchronous: bool
    times: int
    wrapped_in: str = ""


def sku(name: str, region: str, *, zones: tuple[str, ...] = ("1", "2", "3"), vcpus: int = 2, memory_gb: float = 8,
        low_priority: bool = True, ephemeral: bool = True, cached_disk_bytes: int = 0, resource_disk_mb: int = 0,
        arch: str = "x64", accelerated: bool = True, restrictions: list[dict[str, Any]] | None = None,
        resource_type: str = "virtualMachines", encryption_at_host: bool = True,
        extra: dict[str, str] | None = None) -> dict[str, Any]:
    """A Resource SKU in ARM's wire form (``extra``: more capabilities, e.g. ``{"GPUs": "1"}``)."""
    size = name.removeprefix("Standard_")
    caps = {"vCPUs": str(vcpus), "MemoryGB": str(memory_gb), "CpuArchitectureType": arch,
            "HyperVGenerations": "V1,V2", "PremiumIO": "True", "AcceleratedNetworkingEnabled": str(accelerated),
            "EncryptionAtHostSupported": str(encryption_at_host), "EphemeralOSDiskSupported": str(ephemeral),
            "LowPriorityCapable": str(low_priority), "CachedDiskBytes": str(cached_disk_bytes),
            "MaxResourceVolumeMB": str(resource_disk_mb), "MaxNetworkInterfaces": "2", **(extra or {})}
    return {"resourceType": resource_type, "name": name, "tier": "Standard", "size": size,
            "family": f"standard{size}Family", "locations": [region],
            "locationInfo": [{"location": region, "zones": list(zones)}],
            "capabilities": [{"name": k, "value": v} for k, v in caps.items()],
            "restrictions": restrictions or []}


@dataclass
class FakeARM:
    """The fake service; see the module docstring."""

    skus: list[dict[str, Any]] = field(default_factory=list)
    prices: list[dict[str, Any]] = field(default_factory=list)
    subscription: str = SUBSCRIPTION
    now: str = "2026-11-24T07:00:00Z"
    """``timeCreated`` of new VMs."""
    node_resource_group: str = "MC_rg_cluster_eastus"
    """Where AKS machines' VMs are (their ``resourceId``)."""

    def __post_init__(self) -> None:
        self.resources: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.requests: list[Call] = []
        self._ops: dict[str, _Operation] = {}
        self._failures: list[_Failure] = []
        self.image_versions: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""
        self.bootstrapping_down = False
        """True: the node bootstrapping API answers 500."""
        self.aks = fake_aks_machines.FakeMachines(self.subscription, self.node_resource_group, self.now)
        """The AKS machine API and node image versions (:mod:`.fake_aks_machines`)."""

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> FakeARM:
        arm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                status, headers, payload = arm.handle(self.command, self.path, body,
                                                      self.headers.get("Authorization", ""))
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_DELETE = do_PATCH = do_POST = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-arm", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- scripting and inspection ----------------------------------------------------------

    def fail_vm(self, size: str, code: str, message: str = "", *, zone: str | None = None,
                priority: str | None = None, synchronous: bool = False, times: int = 1_000_000,
                wrapped_in: str = "") -> None:
        """The next ``times`` creations of a VM of ``size`` (in ARM ``zone``, with ``priority``
        ``Spot``/``Regular``; ``None`` = any) fail with ARM error ``code`` (inside a ``wrapped_in``
        error's ``details`` when given, as ARM sometimes reports them)."""
        self._failures.append(_Failure(size, zone, priority, code, message or f"{code} for {size}",
                                       synchronous, times, wrapped_in))

    def publish_image(self, gallery: str, definition: str, version: str, published: str, *,
                      exclude_from_latest: bool = False, end_of_life: str | None = None) -> None:
        """A version of a community gallery image definition, in ARM's wire form."""
        props: dict[str, Any] = {"publishedDate": published, "excludeFromLatest": exclude_from_latest}
        if end_of_life is not None:
            props["endOfLifeDate"] = end_of_life
        with self._lock:
            self.image_versions.setdefault((gallery, definition), []).append({
                "name": version, "location": "", "type": "Microsoft.Compute/locations/communityGalleryImageVersions",
                "identifier": {"uniqueId": f"/CommunityGalleries/{gallery}/Images/{definition}/Versions/{version}"},
                "properties": props})

    def of_type(self, rtype: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {name: r for (t, _, name), r in self.resources.items() if t == rtype}

    def put_calls(self, rtype: str) -> list[Call]:
        return [c for c in self.requests if c.method == "PUT" and f"/{rtype}/" in c.path]

    def add(self, rtype: str, rg: str, name: str, body: dict[str, Any]) -> None:
        """Put a resource in place without the SDK (e.g. a VM another tool made)."""
        with self._lock:
            self.resources[(rtype.lower(), rg.lower(), name)] = self._materialise(rtype.lower(), rg, name, body)

    def evict(self, rg: str, vm_name: str) -> None:
        """Azure deletes a VM on its own (a spot eviction with ``evictionPolicy: Delete``): the VM and
        its OS disk go, its NICs stay, detached."""
        with self._lock:
            vm = self.resources.pop(("virtualmachines", rg.lower(), vm_name))
            disk = vm["properties"].get("storageProfile", {}).get("osDisk", {}).get("name")
            if disk:
                self.resources.pop(("disks", rg.lower(), disk), None)
            for (rtype, _, _), r in self.resources.items():
                if rtype == "networkinterfaces" and (r["properties"].get("virtualMachine") or {}).get("id") == vm["id"]:
                    r["properties"].pop("virtualMachine")

    # --- request handling ------------------------------------------------------------------

    def _resource_id(self, rtype: str, rg: str, name: str) -> str:
        provider = "Microsoft.Network" if rtype == "networkinterfaces" else "Microsoft.Compute"
        type_name = {"networkinterfaces": "networkInterfaces", "virtualmachines": "virtualMachines"}.get(rtype, rtype)
        return f"/subscriptions/{self.subscription}/resourceGroups/{rg}/providers/{provider}/{type_name}/{name}"

    def _materialise(self, rtype: str, rg: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(json.dumps(body))
        out.update({"id": self._resource_id(rtype, rg, name), "name": name})
        props = out.setdefault("properties", {})
        props["provisioningState"] = "Succeeded"
        if rtype == "virtualmachines":
            props.setdefault("timeCreated", self.now)
            props["vmId"] = f"vm-{next(self._ids)}"
        return out

    def _operation(self, op: _Operation) -> str:
        op_id = f"op-{next(self._ids)}"
        self._ops[op_id] = op
        return (f"{self.endpoint}/subscriptions/{self.subscription}/providers/Microsoft.Compute/locations/x"
                f"/operations/{op_id}")

    def operation(self, error: dict[str, Any] | None) -> str:
        """A new asynchronous operation that ends ``Failed`` with ``error`` (else ``Succeeded``)."""
        return self._operation(_Operation(error=error))

    def _take_failure(self, size: str, zone: str | None, priority: str) -> _Failure | None:
        for f in self._failures:
            if f.times > 0 and f.size == size and f.zone in (None, zone) and f.priority in (None, priority):
                f.times -= 1
                return f
        return None

    def handle(self, method: str, raw_path: str, body: Any, auth: str) -> tuple[int, dict[str, str], Any]:
        url = urlsplit(raw_path)
        path, query = url.path, parse_qs(url.query)
        with self._lock:
            self.requests.append(Call(method, path, body))
            if path == "/api/retail/prices":
                return self._prices(query)
            if not auth.startswith("Bearer "):
                return 401, {}, {"error": {"code": "AuthenticationFailed", "message": "no bearer token"}}
            m = _OPERATION.match(path)
            if m:
                return self._poll(m["id"])
            if path.lower() == f"/subscriptions/{self.subscription}/providers/microsoft.compute/skus":
                region = re.search(r"location eq '([^']+)'", (query.get("$filter") or [""])[0])
                wanted = region.group(1).lower() if region else None
                return 200, {}, {"value": [s for s in self.skus
                                           if wanted is None or wanted in [x.lower() for x in s["locations"]]]}
            m = _GALLERY.match(path)
            if m is not None and method == "GET":
                published = self.image_versions.get((m["gallery"], m["image"]))
                if not published:
                    return 404, {}, {"error": {"code": "ResourceNotFound",
                                               "message": f"image {m['gallery']}/{m['image']} not found"}}
                return 200, {}, {"value": [{**v, "location": m["loc"]} for v in published]}
            answer = self.aks.handle(method, path, body, self)
            if answer is not None:
                return answer
            m = _BOOTSTRAPPING.match(path)
            if m is not None and method == "GET":
                return self._node_bootstrapping(m["cluster"], body)
            m = _EXTENSION.match(path)
            if m is not None and method == "PUT":
                return self._put_extension(m["rg"], m["vm"], m["name"], body or {})
            if m is not None and method == "GET":
                ext = self.resources.get(("extensions", m["rg"].lower(), f"{m['vm']}/{m['name']}"))
                if ext is None:
                    return 404, {}, {"error": {"code": "ResourceNotFound", "message": f"{m['name']} not found"}}
                return 200, {}, ext
            m = _RESOURCE.match(path)
            if m is None or m["sub"] != self.subscription:
                return 404, {}, {"error": {"code": "InvalidResourceType", "message": f"no route for {path}"}}
            rtype, rg, name = m["type"].lower(), m["rg"], m["name"]
            if name is None:
                if method != "GET":
                    return 405, {}, {"error": {"code": "MethodNotAllowed", "message": method}}
                items = [r for (t, g, _), r in sorted(self.resources.items()) if t == rtype and g == rg.lower()]
                return 200, {}, {"value": items}
            key = (rtype, rg.lower(), name)
            if method == "GET":
                found = self.resources.get(key)
                if found is None:
                    return 404, {}, {"error": {"code": "ResourceNotFound", "message": f"{name} not found"}}
                return 200, {}, found
            if method == "PUT":
                return self._put(rtype, rg, name, body or {})
            if method == "DELETE":
                if self.resources.pop(key, None) is None:
                    return 204, {}, None
                return 202, {"Location": self._operation(_Operation(kind="location")), "Retry-After": "0"}, None
        return 405, {}, {"error": {"code": "MethodNotAllowed", "message": method}}

    def _put(self, rtype: str, rg: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        error: dict[str, Any] | None = None
        if rtype == "virtualmachines":
            props = body.get("properties") or {}
            size = (props.get("hardwareProfile") or {}).get("vmSize", "")
            zone = (body.get("zones") or [None])[0]
            failure = self._take_failure(size, zone, props.get("priority", "Regular"))
            if failure is not None:
                error = {"code": failure.code, "message": failure.message}
                if failure.wrapped_in:
                    error = {"code": failure.wrapped_in, "message": "At least one resource deployment operation "
                             "failed.", "details": [error]}
                if failure.synchronous:
                    return 409, {}, {"error": error}
            nics = (props.get("networkProfile") or {}).get("networkInterfaces") or []
            for nic in nics:
                nic_name = str(nic.get("id", "")).rsplit("/", 1)[-1]
                if ("networkinterfaces", rg.lower(), nic_name) not in self.resources:
                    return 400, {}, {"error": {"code": "InvalidResourceReference",
                                               "message": f"NIC {nic_name} not found"}}
        resource = self._materialise(rtype, rg, name, body)
        if error is not None:
            resource["properties"]["provisioningState"] = "Failed"
        elif rtype == "virtualmachines":
            os_disk = resource["properties"].get("storageProfile", {}).get("osDisk", {})
            if "managedDisk" in os_disk:
                disk_name = os_disk.get("name") or f"{name}_OsDisk"
                self.resources[("disks", rg.lower(), disk_name)] = self._materialise(
                    "disks", rg, disk_name, {"location": body.get("location"), "tags": body.get("tags", {}),
                                             "properties": {"diskSizeGB": os_disk.get("diskSizeGB")}})
            for nic in resource["properties"].get("networkProfile", {}).get("networkInterfaces", []):
                nic_key = ("networkinterfaces", rg.lower(), str(nic["id"]).rsplit("/", 1)[-1])
                self.resources[nic_key]["properties"]["virtualMachine"] = {"id": resource["id"]}
        self.resources[(rtype, rg.lower(), name)] = resource
        creating = json.loads(json.dumps(resource))
        creating["properties"]["provisioningState"] = "Creating"
        return 201, {"Azure-AsyncOperation": self._operation(_Operation(error=error)), "Retry-After": "0"}, creating

    def _node_bootstrapping(self, cluster: str, body: Any) -> tuple[int, dict[str, str], Any]:
        """AKS's node bootstrapping API: custom data and a CSE command with the bootstrap token redacted
        (``{{.TokenID}}.{{.TokenSecret}}``), or 400 naming a missing required field."""
        if self.bootstrapping_down:
            return 500, {}, "InternalServerError; NodeBootstrappingAPI is down"
        profile = (body or {}).get("provisionProfile")
        helper = (body or {}).get("provisionHelperValues")
        if not isinstance(profile, dict) or not isinstance(helper, dict):
            return 400, {}, "MissingRequiredProperty; provisionProfile and provisionHelperValues are required"
        for key in (*BOOTSTRAPPING_REQUIRED, "skuCPU", "skuMemory"):
            if (profile if key in BOOTSTRAPPING_REQUIRED else helper).get(key) is None:
                return 400, {}, f"MissingRequiredProperty; missing field: {key} cannot be empty"
        token = "{{.TokenID}}.{{.TokenSecret}}"
        script = f"#!/bin/bash\n# {cluster} {profile['vmSize']}\nTLS_BOOTSTRAP_TOKEN={token}\n"
        return 200, {}, {"customData": base64.b64encode(script.encode()).decode(),
                         "cse": f"/bin/bash /opt/azure/containers/provision_start.sh "
                                f"TOKEN={token} DISTRO={profile['distro']}"}

    def _put_extension(self, rg: str, vm: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        if ("virtualmachines", rg.lower(), vm) not in self.resources:
            return 404, {}, {"error": {"code": "ParentResourceNotFound", "message": f"VM {vm} not found"}}
        ext: dict[str, Any] = json.loads(json.dumps(body))
        ext.update({"id": self._resource_id("virtualmachines", rg, vm) + f"/extensions/{name}", "name": name})
        ext.setdefault("properties", {})["provisioningState"] = "Succeeded"
        ext["properties"].pop("protectedSettings", None)  # ARM never returns them
        self.resources[("extensions", rg.lower(), f"{vm}/{name}")] = ext
        return 201, {"Azure-AsyncOperation": self._operation(_Operation()), "Retry-After": "0"}, ext

    def _poll(self, op_id: str) -> tuple[int, dict[str, str], Any]:
        op = self._ops.get(op_id)
        if op is None:
            return 404, {}, {"error": {"code": "NotFound", "message": op_id}}
        op.polls += 1
        if op.kind == "location":
            return (202, {"Retry-After": "0"}, None) if op.polls == 1 else (200, {}, None)
        if op.polls == 1:
            return 200, {"Retry-After": "0"}, {"status": "InProgress"}
        if op.error is not None:
            return 200, {}, {"status": "Failed", "error": op.error}
        return 200, {}, {"status": "Succeeded"}

    def _prices(self, query: dict[str, list[str]]) -> tuple[int, dict[str, str], Any]:
        region = re.search(r"armRegionName eq '([^']+)'", (query.get("$filter") or [""])[0])
        items = [p for p in self.prices if region is None or p.get("armRegionName") == region.group(1)]
        page = int((query.get("page") or ["0"])[0])
        half = (len(items) + 1) // 2
        chunk = items[:half] if page == 0 else items[half:]
        link = None
        if page == 0:
            link = f"{self.endpoint}/api/retail/prices?page=1&$filter={query.get('$filter', [''])[0]}"
        return 200, {}, {"Items": chunk, "NextPageLink": link, "Count": len(chunk)}


def skus_from_catalog(region: str, names: list[str]) -> list[dict[str, Any]]:
    """Resource SKUs in ARM's wire form for packaged catalog sizes of ``region`` (their real
    hardware facts), so a run against the fake sees the same sizes ``karpy simulate`` does."""
    from karpy.cloudprovider.azure import instancetypes

    out = []
    for name in names:
        rec = instancetypes.record(region, name)
        if rec is None:
            continue
        zones = tuple(z.rsplit("-", 1)[-1] for z in instancetypes.zones(region, rec) if z)
        out.append(sku(name, region, zones=zones, vcpus=int(rec["vcpu"]), memory_gb=float(rec["mem_gib"]),
                       low_priority=instancetypes.spot_capable(rec), ephemeral=bool(rec.get("ephemeral_os")),
                       cached_disk_bytes=int(rec.get("cached_disk_bytes") or 0),
                       resource_disk_mb=int(rec.get("max_resource_volume_mb") or 0), arch=str(rec["arch"]),
                       accelerated=bool(rec.get("accelerated_networking"))))
    return out
