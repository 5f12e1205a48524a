"""``PROVISION_MODE=aksmachineapi``: one AKS machine per NodeClaim, as Karpenter's Azure provider makes it.

AKS (not karpy) then makes the VM, its NIC and disk and joins it to the cluster. What a caller may rely on:

* the machine ``<name>`` (:func:`machine_name`: the NodeClaim's name, or, past 34 characters, its prefix cut
  and a 6-character hash of what was cut put before the ``-<suffix>``) lives at ``/subscriptions/<sub>/
  resourceGroups/<ARM_RESOURCE_GROUP>/providers/Microsoft.ContainerService/managedClusters/<cluster>/agentPools/
  <AKS_MACHINES_POOL_NAME>/machines/<name>``: ``PUT`` creates it (long-running: ``Azure-AsyncOperation``
  polled), ``GET`` reads it, ``GET .../machines`` lists the pool, ``POST .../agentPools/<pool>/deleteMachines``
  with ``{"machineNames": [name]}`` deletes it;
* the body (:func:`machine_body`): ``zones``; ``properties.nodeImageVersion`` (:func:`.sig.node_image_version`
  of the size's shared-gallery image), ``network.vnetSubnetID`` (the AKSNodeClass's, else left to AKS),
  ``hardware`` (``vmSize``, ``ultraSsdEnabled``, ``gpuProfile.driver`` ``Install`` / ``None`` on GPU sizes),
  ``operatingSystem`` (``osType: Linux``, ``osSKU`` ``Ubuntu2204`` / ``Ubuntu2404`` / ``AzureLinux`` (``Ubuntu``
  with FIPS), ``osDiskSizeGB``, ``osDiskType`` ``Ephemeral`` / ``Managed``, ``enableFips``, ``linuxProfile.
  linuxOSConfig``), ``kubernetes`` (``nodeLabels``: the node's labels without AKS's own ``kubernetes.azure.com/``
  ones, those the kubelet manages and those it may not set; ``orchestratorVersion``, ``kubeletConfig``,
  ``nodeInitializationTaints``: every taint and startup taint, ``nodeTaints: []``, ``maxPods``,
  ``artifactStreamingProfile``), ``mode`` (``System`` when ``kubernetes.azure.com/mode=system``, else
  ``User``), ``security`` (``sshAccess: LocalUser``, ``enableEncryptionAtHost``, ``enableVTPM``,
  ``enableSecureBoot``), ``priority`` (``Spot`` / ``Regular``), ``tags`` (the VM tags and
  ``karpenter.azure.com_aksmachine_nodeclaim``), ``localDNSProfile``;
* a machine's NodeClaim (:func:`claim_of`): provider ID ``azure://`` + ``properties.resourceId`` (the VM AKS
  made), annotation ``karpenter.azure.com/aks-machine-resource-id`` (the machine's id), zone, capacity type,
  ultra SSD label, NodePool from the tags, ``imageID`` the ``nodeImageVersion``, created at
  ``properties.status.creationTimestamp``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from azure.core import PipelineClient

from karpy import clock
from karpy.api import aksnodeclass, labels, meta, nodeclaim
from karpy.cloudprovider import instancetype
from karpy.cloudprovider.azure import bootstrap, clients, images, instances, nodebootstrapping, sig

API_VERSION = "2025-10-02-preview"
"""The ContainerService API version karpy sends (the machine API is in AKS's 2025 API versions)."""
NODECLAIM_TAG = "karpenter.azure.com_aksmachine_nodeclaim"
ANNOTATION_MACHINE_ID = "karpenter.azure.com/aks-machine-resource-id"
MAX_NAME = 34
_KUBELET_MANAGED = frozenset({labels.HOSTNAME, labels.ZONE, labels.REGION, labels.INSTANCE_TYPE, labels.ARCH,
                              labels.OS, "failure-domain.beta.kubernetes.io/zone",
                              "failure-domain.beta.kubernetes.io/region", "beta.kubernetes.io/instance-type",
                              "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "node.kubernetes.io/instance-type"})
POLL_SECONDS = 1.0
POLL_LIMIT = 900


def machine_name(claim_name: str) -> str:
    """The machine name of a NodeClaim (module docstring); a long name without ``-`` is a ValueError."""
    if len(claim_name) <= MAX_NAME:
        return claim_name
    dash = claim_name.rfind("-")
    if dash < 0:
        raise ValueError(f"NodeClaim name {claim_name!r} is longer than {MAX_NAME} characters and has no '-'")
    prefix, suffix = claim_name[:dash], claim_name[dash:]
    keep = MAX_NAME - len(suffix) - 6
    digest = int.from_bytes(hashlib.sha256(prefix[keep:].encode()).digest()[:8], "big")
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    hashed = ""
    for _ in range(6):
        digest, r = divmod(digest, 36)
        hashed += alphabet[r]
    return prefix[:keep] + hashed + suffix


def os_sku(nc: aksnodeclass.AKSNodeClass | None, kubernetes_version: str) -> str:
    family = nc.image_family if nc is not None else "Ubuntu2204"
    if family == "AzureLinux":
        return "AzureLinux"
    if family in ("Ubuntu2204", "Ubuntu2404"):
        return family
    if nc is not None and nc.fips():
        return "Ubuntu"
    return images.family_of("Ubuntu", kubernetes_version) or "Ubuntu2204"


def machine_body(*, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None, it: instancetype.InstanceType,
                 offer: instancetype.Offering, image_id: str, node_labels: Mapping[str, str], tags: Mapping[str, str],
                 kubernetes_version: str, ephemeral: bool, max_pods: int, ultra_ssd: bool) -> dict[str, Any]:
    """The ``PUT`` body of the machine ``claim`` becomes on ``offer`` of ``it`` (module docstring)."""
    taints = []
    for t in (*claim.spec.taints, *claim.spec.startup_taints):
        text = f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
        if text not in taints:
            taints.append(text)
    sent_labels = {k: v for k, v in sorted(node_labels.items())
                   if not k.startswith("kubernetes.azure.com/") and k not in _KUBELET_MANAGED
                   and bootstrap.kubelet_may_set(k)}
    hardware: dict[str, Any] = {"vmSize": it.name, "ultraSsdEnabled": ultra_ssd}
    if it.labels.get(labels.AZURE_SKU_GPU_MANUFACTURER):
        hardware["gpuProfile"] = {"driver": "Install" if nc is None or nc.gpu_driver_installation() else "None"}
    os_profile: dict[str, Any] = {"osType": "Linux", "osSKU": os_sku(nc, kubernetes_version),
                                  "osDiskType": "Ephemeral" if ephemeral else "Managed",
                                  "enableFips": nc is not None and nc.fips()}
    if nc is not None and nc.os_disk_size_gb:
        os_profile["osDiskSizeGB"] = nc.os_disk_size_gb
    linux = nodebootstrapping.linux_os_config(nc) if nc is not None else None
    if linux is not None:
        os_profile["linuxProfile"] = {"linuxOSConfig": linux}
    kube: dict[str, Any] = {"nodeLabels": sent_labels, "orchestratorVersion": kubernetes_version,
                            "nodeInitializationTaints": taints, "nodeTaints": [], "maxPods": max_pods}
    kubelet = nodebootstrapping.kubelet_config(nc) if nc is not None else None
    if kubelet is not None:
        kube["kubeletConfig"] = kubelet
    if nc is not None and nc.artifact_streaming_on(it.labels.get(labels.ARCH, "amd64")):
        kube["artifactStreamingProfile"] = {"enabled": True}
    security = {"sshAccess": "LocalUser",
                "enableEncryptionAtHost": bool(nc is not None and nc.security is not None
                                               and nc.security.encryption_at_host),
                "enableVTPM": nc is not None and nc.vtpm(), "enableSecureBoot": nc is not None and nc.secure_boot()}
    props: dict[str, Any] = {
        "nodeImageVersion": sig.node_image_version(image_id),
        "network": {"vnetSubnetID": nc.vnet_subnet_id} if nc is not None and nc.vnet_subnet_id else {},
        "hardware": hardware, "operatingSystem": os_profile, "kubernetes": kube,
        "mode": "System" if node_labels.get("kubernetes.azure.com/mode") == "system" else "User",
        "security": security, "priority": instances.PRIORITY.get(offer.capacity_type, "Regular"),
        "tags": {**tags, NODECLAIM_TAG: claim.name},
    }
    dns = nodebootstrapping.local_dns_profile(nc) if nc is not None else None
    if dns is not None:
        props["localDNSProfile"] = dns
    zone = offer.zone.rsplit("-", 1)[-1] if offer.zone else ""
    return {"zones": [zone] if zone else [], "properties": props}


class MachinesClient:
    """The machines of one agent pool of one managed cluster (module docstring)."""

    def __init__(self, client: PipelineClient[Any, Any], *, subscription_id: str, resource_group: str,
                 cluster_name: str, pool: str, sleep: Any = time.sleep) -> None:
        self.client = client
        self.pool_path = (f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
                          f"Microsoft.ContainerService/managedClusters/{cluster_name}/agentPools/{pool}")
        self._sleep = sleep

    def _path(self, suffix: str) -> str:
        return f"{self.pool_path}{suffix}?api-version={API_VERSION}"

    def _wait(self, headers: Mapping[str, str], action: str) -> None:
        url = next((v for k, v in headers.items() if k.lower() == "azure-asyncoperation"), "")
        for _ in range(POLL_LIMIT if url else 0):
            _, _, op = sig.get_json(self.client, "GET", url, action)
            status = str((op or {}).get("status") or "")
            if status == "Succeeded":
                return
            if status in ("Failed", "Canceled"):
                err = (op or {}).get("error") or {}
                raise clients.AzureAPIError(f"{action}: {err.get('message') or status}",
                                            code=str(err.get("code") or status))
            self._sleep(POLL_SECONDS)
        if url:
            raise clients.AzureAPIError(f"{action}: still in progress after {POLL_LIMIT} polls",
                                        code="OperationTimedOut", retryable=True)

    def create(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``PUT`` the machine and wait for it; the machine as ``GET`` then returns it."""
        action = f"creating AKS machine {name}"
        _, headers, _ = sig.get_json(self.client, "PUT", self._path(f"/machines/{name}"), action, dict(body),
                                     ok=(200, 201))
        self._wait(headers, action)
        return self.get(name)

    def get(self, name: str) -> dict[str, Any]:
        _, _, machine = sig.get_json(self.client, "GET", self._path(f"/machines/{name}"), f"reading AKS machine {name}")
        return dict(machine or {})

    def list(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        path: str | None = self._path("/machines")
        while path:
            _, _, page = sig.get_json(self.client, "GET", path, "listing AKS machines")
            out.extend(page.get("value") or ())
            link = page.get("nextLink")
            path = str(link) if link else None
        return out

    def delete(self, name: str) -> None:
        action = f"deleting AKS machine {name}"
        _, headers, _ = sig.get_json(self.client, "POST", self._path("/deleteMachines"), action,
                                     {"machineNames": [name]}, ok=(200, 202, 204))
        self._wait(headers, action)


def claim_of(machine: Mapping[str, Any], region: str) -> nodeclaim.NodeClaim:
    """The NodeClaim a machine stands for (module docstring)."""
    props = machine.get("properties") or {}
    tags = props.get("tags") or {}
    zones: Sequence[str] = machine.get("zones") or []
    ct = instances.CAPACITY_TYPE.get(str(props.get("priority") or "Regular"), labels.CAPACITY_TYPE_ON_DEMAND)
    ultra = bool((props.get("hardware") or {}).get("ultraSsdEnabled"))
    spot = "spot" if ct == labels.CAPACITY_TYPE_SPOT else "regular"
    labels_ = {labels.INSTANCE_TYPE: str((props.get("hardware") or {}).get("vmSize") or ""),
               labels.ZONE: f"{region}-{zones[0]}" if zones else "", labels.REGION: region, labels.CAPACITY_TYPE: ct,
               labels.AZURE_SKU_STORAGE_ULTRA_SSD: "true" if ultra else "false",
               "kubernetes.azure.com/scalesetpriority": spot, "kubernetes.azure.com/priority": spot}
    if tags.get(instances.NODEPOOL_TAG):
        labels_[labels.NODEPOOL] = str(tags[instances.NODEPOOL_TAG])
    created = (props.get("status") or {}).get("creationTimestamp")
    ref = None
    if tags.get(instances.NODECLASS_TAG):
        ref = nodeclaim.NodeClassRef(group=labels.AZURE_GROUP, kind=aksnodeclass.AKS_KIND,
                                     name=str(tags[instances.NODECLASS_TAG]))
    resource = str(props.get("resourceId") or "")
    return nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(name=str(tags.get(NODECLAIM_TAG) or machine.get("name")), labels=labels_,
                                 annotations={ANNOTATION_MACHINE_ID: str(machine.get("id") or "")},
                                 creation_timestamp=clock.parse_rfc3339(str(created)) if created else None),
        spec=nodeclaim.NodeClaimSpec(node_class_ref=ref),
        status=nodeclaim.NodeClaimStatus(provider_id="azure://" + resource if resource else "",
                                         image_id=str(props.get("nodeImageVersion") or "")),
    )


def name_of_vm(pool: str, vm_name: str) -> str | None:
    """The machine of an AKS machine VM ``aks-<pool>-<machine>-<8 digits>-vm`` (``None`` for another VM)."""
    head = f"aks-{pool}-"
    if not vm_name.startswith(head) or not vm_name.endswith("-vm"):
        return None
    rest = vm_name[len(head):-len("-vm")]
    dash = rest.rfind("-")
    return rest[:dash] if dash > 0 else None
