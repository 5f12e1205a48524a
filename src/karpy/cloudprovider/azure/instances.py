"""VMs and NICs in the node resource group: the ARM bodies karpy sends and the calls it makes.

:func:`nic_body` and :func:`vm_body` build the request bodies (plain dicts in ARM's wire form,
which azure-mgmt-compute / azure-mgmt-network accept as they are); :class:`Instances` sends them.
What a caller may rely on:

* names: a NodeClaim ``default-abcde`` gets the VM ``aks-default-abcde``, its NIC of the same name
  and its OS disk of the same name (Karpenter's ``GenerateResourceName``);
* every resource carries :func:`tags`: ``karpenter.azure.com_cluster=<cluster>`` (the ownership tag
  :meth:`Instances.list_vms` and :meth:`Instances.list_nics` filter on),
  ``karpenter.sh_nodepool``, ``karpenter.sh_nodeclaim``, ``compute.aks.billing=linux`` and the
  AKSNodeClass's ``tags`` (``/`` in keys becomes ``_``; karpy's own keys win);
* the NIC has one dynamic IP configuration in the subnet, accelerated networking where the size
  has it; the VM refers to it with ``deleteOption: Delete``;
* the OS disk is ``osDiskSizeGB`` GB with ``deleteOption: Delete``; it is ephemeral
  (``diffDiskSettings.option: Local``, on the cache disk when it fits there, else the resource disk)
  where the size supports ephemeral OS disks of that size, else a managed Premium_LRS disk
  (Standard_LRS on sizes without premium storage);
* ``osProfile``: the admin user (``LINUX_ADMIN_USERNAME``) with only the SSH key (``SSH_PUBLIC_KEY``),
  the custom data of :mod:`.bootstrap`; ``identity``: the user-assigned ``NODE_IDENTITIES``;
* ``securityProfile`` as the AKSNodeClass ``security`` says (Karpenter's ``setVMPropertiesSecurityProfile``):
  ``encryptionAtHost`` when set (true or false), and with trusted launch (secure boot or vTPM on)
  ``securityType: TrustedLaunch`` with ``uefiSettings`` ``secureBootEnabled`` / ``vTpmEnabled``;
  no ``securityProfile`` otherwise;
* ``additionalCapabilities.ultraSSDEnabled: true`` when the NodeClaim requires
  ``karpenter.azure.com/sku-storage-ultra-ssd=true`` (Karpenter's ``resolveUltraSSDRequested``);
* spot VMs have ``priority: Spot``, ``evictionPolicy: Delete`` and ``billingProfile.maxPrice: -1``;
  on-demand VMs ``priority: Regular``;
* after the VM (and the CSE of ``bootstrappingclient``) the launcher adds the AKS identifying extension
  ``computeAksLinuxBilling`` in the clouds where Karpenter's Azure provider does (public, China, US
  Government: :func:`billing_extension_body`);
* :meth:`Instances.delete` removes the VM, then its NICs and its managed OS disk (each not-found is
  fine), as Karpenter's ``cleanupAzureResources`` does, but only what is karpy's: each NIC and the
  disk is read first and deleted only when it is in the node resource group (subscription and
  resource group of its ID) and carries this cluster's ownership tag; anything else is left alone
  and named in the log. A VM that names no NIC deletes none (no NIC is guessed from its name).

Every azure.core error comes out as :class:`karpy.cloudprovider.azure.clients.AzureAPIError`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import labels
from karpy.cloudprovider.azure import clients

log = logging.getLogger("karpy.cloudprovider.azure.instances")

CLUSTER_TAG = "karpenter.azure.com_cluster"
NODEPOOL_TAG = "karpenter.sh_nodepool"
NODECLAIM_TAG = "karpenter.sh_nodeclaim"
NODECLASS_TAG = "karpenter.azure.com_aksnodeclass"
BILLING_TAG = "compute.aks.billing"
ADMIN_USERNAME = "azureuser"
CSE_NAME = "cse-agent-karpenter"
BILLING_EXTENSION = "computeAksLinuxBilling"
"""The extension that identifies a VM as an AKS node (Azure public, China and US Government clouds)."""
PRIORITY = {labels.CAPACITY_TYPE_SPOT: "Spot", labels.CAPACITY_TYPE_ON_DEMAND: "Regular"}
CAPACITY_TYPE = {v: k for k, v in PRIORITY.items()}


def resource_name(nodeclaim_name: str) -> str:
    """``aks-<nodeclaim>``: the name of the VM, its NIC and its OS disk."""
    return f"aks-{nodeclaim_name}"


def tags(cluster_name: str, nodepool: str, nodeclaim: str, nodeclass: str = "",
         extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tags of every resource of one node (see the module docstring)."""
    out = {k.replace("/", "_"): v for k, v in (extra or {}).items()}
    out.update({CLUSTER_TAG: cluster_name, BILLING_TAG: "linux", NODECLAIM_TAG: nodeclaim})
    if nodepool:
        out[NODEPOOL_TAG] = nodepool
    if nodeclass:
        out[NODECLASS_TAG] = nodeclass
    return out


def owned(resource_tags: Mapping[str, str] | None, cluster_name: str) -> bool:
    """True when a resource carries this cluster's ownership tag."""
    return (resource_tags or {}).get(CLUSTER_TAG) == cluster_name


@dataclass(frozen=True)
class LaunchSpec:
    """Everything one VM launch needs."""

    name: str
    region: str
    zone: str
    """``""`` for a regional VM, else the ARM zone number (``"2"``)."""
    size: str
    capacity_type: str
    image_id: str
    os_disk_gb: int
    subnet_id: str
    tags: Mapping[str, str]
    custom_data: str
    ssh_public_key: str
    accelerated_networking: bool = False
    premium_storage: bool = True
    ephemeral_placement: str | None = None
    """``"CacheDisk"`` / ``"ResourceDisk"`` for an ephemeral OS disk, ``None`` for a managed disk."""
    admin_username: str = ADMIN_USERNAME
    node_identities: tuple[str, ...] = ()
    """User-assigned managed identities (resource ids) the VM gets (``NODE_IDENTITIES``)."""
    encryption_at_host: bool | None = None
    """``security.encryptionAtHost`` (``None``: unset, not sent)."""
    secure_boot: bool = False
    vtpm: bool = False
    ultra_ssd: bool = False
    """``additionalCapabilities.ultraSSDEnabled`` (the NodeClaim requires ``sku-storage-ultra-ssd=true``)."""


def ephemeral_placement(record: Mapping[str, Any], os_disk_gb: int) -> str | None:
    """Where an ephemeral OS disk of ``os_disk_gb`` GB fits on a size, or ``None`` (managed disk)."""
    if not record.get("ephemeral_os"):
        return None
    need = os_disk_gb * 10**9
    if int(record.get("cached_disk_bytes") or 0) >= need:
        return "CacheDisk"
    if int(record.get("max_resource_volume_mb") or 0) * 2**20 >= need:
        return "ResourceDisk"
    return None


def nic_body(spec: LaunchSpec) -> dict[str, Any]:
    return {
        "location": spec.region,
        "tags": dict(spec.tags),
        "properties": {
            "enableAcceleratedNetworking": spec.accelerated_networking,
            "enableIPForwarding": True,
            "ipConfigurations": [{
                "name": "ipconfig0",
                "properties": {"primary": True, "privateIPAllocationMethod": "Dynamic",
                               "subnet": {"id": spec.subnet_id}},
            }],
        },
    }


def vm_body(spec: LaunchSpec, nic_id: str) -> dict[str, Any]:
    os_disk: dict[str, Any] = {
        "name": spec.name, "createOption": "FromImage", "diskSizeGB": spec.os_disk_gb, "deleteOption": "Delete",
    }
    if spec.ephemeral_placement is not None:
        os_disk["caching"] = "ReadOnly"
        os_disk["diffDiskSettings"] = {"option": "Local", "placement": spec.ephemeral_placement}
    else:
        os_disk["caching"] = "ReadWrite"
        os_disk["managedDisk"] = {"storageAccountType": "Premium_LRS" if spec.premium_storage else "Standard_LRS"}
    properties: dict[str, Any] = {
        "hardwareProfile": {"vmSize": spec.size},
        "storageProfile": {"imageReference": {"communityGalleryImageId": spec.image_id}, "osDisk": os_disk},
        "networkProfile": {"networkInterfaces": [
            {"id": nic_id, "properties": {"primary": True, "deleteOption": "Delete"}}]},
        "osProfile": {
            "computerName": spec.name, "adminUsername": spec.admin_username, "customData": spec.custom_data,
            "linuxConfiguration": {"disablePasswordAuthentication": True, "ssh": {"publicKeys": [
                {"path": f"/home/{spec.admin_username}/.ssh/authorized_keys", "keyData": spec.ssh_public_key}]}},
        },
        "priority": PRIORITY[spec.capacity_type],
    }
    security: dict[str, Any] = {}
    if spec.encryption_at_host is not None:
        security["encryptionAtHost"] = spec.encryption_at_host
    if spec.secure_boot or spec.vtpm:
        security["securityType"] = "TrustedLaunch"
        security["uefiSettings"] = {"secureBootEnabled": spec.secure_boot, "vTpmEnabled": spec.vtpm}
    if security:
        properties["securityProfile"] = security
    if spec.ultra_ssd:
        properties["additionalCapabilities"] = {"ultraSSDEnabled": True}
    if spec.capacity_type == labels.CAPACITY_TYPE_SPOT:
        properties["evictionPolicy"] = "Delete"
        properties["billingProfile"] = {"maxPrice": -1}
    body: dict[str, Any] = {"location": spec.region, "tags": dict(spec.tags), "properties": properties}
    if spec.zone:
        body["zones"] = [spec.zone]
    if spec.node_identities:
        body["identity"] = {"type": "UserAssigned", "userAssignedIdentities": {i: {} for i in spec.node_identities}}
    return body


def cse_body(spec: LaunchSpec, command: str) -> dict[str, Any]:
    """The Linux Custom Script Extension that runs the node bootstrapping API's command (protected)."""
    return {"location": spec.region, "tags": dict(spec.tags), "properties": {
        "publisher": "Microsoft.Azure.Extensions", "type": "CustomScript", "typeHandlerVersion": "2.0",
        "autoUpgradeMinorVersion": True, "settings": {}, "protectedSettings": {"commandToExecute": command}}}


def billing_extension_body(spec: LaunchSpec) -> dict[str, Any]:
    """The AKS identifying extension ``computeAksLinuxBilling`` (``Microsoft.AKS`` / ``Compute.AKS.Linux.Billing``)."""
    return {"location": spec.region, "tags": dict(spec.tags), "properties": {
        "publisher": "Microsoft.AKS", "type": "Compute.AKS.Linux.Billing", "typeHandlerVersion": "1.0",
        "autoUpgradeMinorVersion": True, "settings": {}}}


def _dict(model: Any) -> dict[str, Any]:
    if isinstance(model, Mapping):
        return dict(model)
    out: dict[str, Any] = model.as_dict()
    return out


class Instances:
    """ARM calls on the VMs and NICs of one node resource group."""

    def __init__(self, azure: clients.AzureClients, resource_group: str) -> None:
        self.azure = azure
        self.resource_group = resource_group

    def vm_id(self, name: str) -> str:
        return self.resource_id("Microsoft.Compute", "virtualMachines", name)

    def resource_id(self, provider: str, rtype: str, name: str) -> str:
        return (f"/subscriptions/{self.azure.subscription_id}/resourceGroups/{self.resource_group}"
                f"/providers/{provider}/{rtype}/{name}")

    def delete_if_owned(self, name: str, cluster_name: str) -> None:
        """Delete the VM and the NIC called ``name`` when each carries this cluster's tag (what a failed
        launch leaves); a resource of that name without the tag is left alone."""
        for rtype, get, delete in (("virtualMachines", self.get_vm, self.delete_vm),
                                   ("networkInterfaces", self.get_nic, self.delete_nic)):
            try:
                found = get(name)
            except clients.NotFoundError:
                continue
            if owned(found.get("tags"), cluster_name):
                delete(name)
            else:
                log.warning("not deleting %s %s: it is not tagged %s=%s", rtype, name, CLUSTER_TAG, cluster_name)

    def create_nic(self, spec: LaunchSpec) -> dict[str, Any]:
        poller = clients.call(f"creating NIC {spec.name}", self.azure.network.network_interfaces.begin_create_or_update,
                              self.resource_group, spec.name, nic_body(spec))
        return _dict(clients.call(f"creating NIC {spec.name}", poller.result))

    def create_vm(self, spec: LaunchSpec, nic_id: str) -> dict[str, Any]:
        """Create the VM and wait for the long-running operation; ARM's launch errors come out as
        :class:`clients.AzureAPIError` with their code (``AllocationFailed``...)."""
        action = f"creating VM {spec.name} ({spec.size}, zone {spec.zone or 'regional'}, {spec.capacity_type})"
        poller = clients.call(action, self.azure.compute.virtual_machines.begin_create_or_update,
                              self.resource_group, spec.name, vm_body(spec, nic_id))
        return _dict(clients.call(action, poller.result))

    def create_cse(self, spec: LaunchSpec, command: str) -> dict[str, Any]:
        """Add the Custom Script Extension ``cse-agent-karpenter`` that runs ``command`` (the node
        bootstrapping API's, ``PROVISION_MODE=bootstrappingclient``) to VM ``spec.name``, and wait."""
        action = f"creating the CSE of VM {spec.name}"
        poller = clients.call(action, self.azure.compute.virtual_machine_extensions.begin_create_or_update,
                              self.resource_group, spec.name, CSE_NAME, cse_body(spec, command))
        return _dict(clients.call(action, poller.result))

    def create_billing_extension(self, spec: LaunchSpec) -> dict[str, Any]:
        """Add the AKS identifying extension (:func:`billing_extension_body`) to VM ``spec.name``, and wait."""
        action = f"creating the AKS identifying extension of VM {spec.name}"
        poller = clients.call(action, self.azure.compute.virtual_machine_extensions.begin_create_or_update,
                              self.resource_group, spec.name, BILLING_EXTENSION, billing_extension_body(spec))
        return _dict(clients.call(action, poller.result))

    def get_vm(self, name: str) -> dict[str, Any]:
        return _dict(clients.call(f"getting VM {name}", self.azure.compute.virtual_machines.get,
                                  self.resource_group, name))

    def list_vms(self, cluster_name: str) -> list[dict[str, Any]]:
        """The VMs of the resource group that carry this cluster's ownership tag."""
        def fetch() -> list[dict[str, Any]]:
            return [_dict(v) for v in self.azure.compute.virtual_machines.list(self.resource_group)]

        vms = clients.call(f"listing VMs in {self.resource_group}", fetch)
        return [v for v in vms if owned(v.get("tags"), cluster_name)]

    def list_nics(self, cluster_name: str) -> list[dict[str, Any]]:
        """The NICs of the resource group that carry this cluster's ownership tag."""
        def fetch() -> list[dict[str, Any]]:
            return [_dict(n) for n in self.azure.network.network_interfaces.list(self.resource_group)]

        nics = clients.call(f"listing NICs in {self.resource_group}", fetch)
        return [n for n in nics if owned(n.get("tags"), cluster_name)]

    def _ignore_missing(self, action: str, fn: Any, *args: Any, **kwargs: Any) -> bool:
        """Run a delete and wait; False when the resource was already gone."""
        try:
            poller = clients.call(action, fn, *args, **kwargs)
            clients.call(action, poller.result)
        except clients.NotFoundError:
            return False
        return True

    def delete_vm(self, name: str) -> bool:
        return self._ignore_missing(f"deleting VM {name}", self.azure.compute.virtual_machines.begin_delete,
                                    self.resource_group, name, force_deletion=True)

    def delete_nic(self, name: str) -> bool:
        return self._ignore_missing(f"deleting NIC {name}", self.azure.network.network_interfaces.begin_delete,
                                    self.resource_group, name)

    def delete_disk(self, name: str) -> bool:
        return self._ignore_missing(f"deleting disk {name}", self.azure.compute.disks.begin_delete,
                                    self.resource_group, name)

    def get_nic(self, name: str) -> dict[str, Any]:
        return _dict(clients.call(f"getting NIC {name}", self.azure.network.network_interfaces.get,
                                  self.resource_group, name))

    def get_disk(self, name: str) -> dict[str, Any]:
        return _dict(clients.call(f"getting disk {name}", self.azure.compute.disks.get, self.resource_group, name))

    def in_resource_group(self, resource_id: Any, provider: str, rtype: str) -> str | None:
        """The resource's name when ``resource_id`` is an ARM ID of type ``provider/rtype`` in this
        subscription and node resource group (compared as ARM does, ignoring case); else ``None``."""
        if not isinstance(resource_id, str):
            return None
        parts = resource_id.strip("/").split("/")
        if len(parts) != 8 or [p.lower() for p in (parts[0], parts[2], parts[4], parts[5], parts[6])] != \
                ["subscriptions", "resourcegroups", "providers", provider.lower(), rtype.lower()]:
            return None
        if parts[1].lower() != str(self.azure.subscription_id).lower() or \
                parts[3].lower() != self.resource_group.lower() or not parts[7]:
            return None
        return parts[7]

    def _owned_by_id(self, resource_id: Any, rtype: str, cluster_name: str) -> str | None:
        """The name of the NIC or disk ``resource_id`` names when it is karpy's to delete (see the module
        docstring); ``None`` (logged) otherwise, or when it is already gone."""
        provider = "Microsoft.Network" if rtype == "networkInterfaces" else "Microsoft.Compute"
        name = self.in_resource_group(resource_id, provider, rtype)
        if name is None:
            log.warning("not deleting %s %s: not in node resource group %s of subscription %s",
                        rtype, resource_id, self.resource_group, self.azure.subscription_id)
            return None
        try:
            found = self.get_nic(name) if rtype == "networkInterfaces" else self.get_disk(name)
        except clients.NotFoundError:
            return None
        if not owned(found.get("tags"), cluster_name):
            log.warning("not deleting %s %s: it is not tagged %s=%s", rtype, name, CLUSTER_TAG, cluster_name)
            return None
        return name

    def delete(self, vm: Mapping[str, Any], cluster_name: str) -> None:
        """Remove a VM, then those of its NICs and its managed OS disk that are karpy's (see the module
        docstring). The caller has checked the VM's own ownership tag."""
        name = str(vm.get("name"))
        props = vm.get("properties") or {}
        refs = ((props.get("networkProfile") or {}).get("networkInterfaces") or ()) if isinstance(props, Mapping) \
            else ()
        nics = [n for n in (self._owned_by_id(r.get("id"), "networkInterfaces", cluster_name)
                            for r in refs if isinstance(r, Mapping)) if n is not None]
        os_disk = ((props.get("storageProfile") or {}).get("osDisk") or {}) if isinstance(props, Mapping) else {}
        managed = os_disk.get("managedDisk") if isinstance(os_disk, Mapping) else None
        disk = None
        if isinstance(managed, Mapping):  # ARM gives the disk's ID; without one, the disk of that name here
            disk_id = managed.get("id") or (self.resource_id("Microsoft.Compute", "disks", os_disk["name"])
                                            if isinstance(os_disk.get("name"), str) and os_disk["name"] else None)
            disk = self._owned_by_id(disk_id, "disks", cluster_name)
        self.delete_vm(name)
        for nic in nics:
            self.delete_nic(nic)
        if disk:
            self.delete_disk(disk)
