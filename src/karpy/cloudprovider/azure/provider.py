"""The Azure (AKS Node Auto-Provisioning) cloud provider over the Azure SDK.

:class:`AzureCloudProvider` satisfies :class:`karpy.cloudprovider.interface.CloudProvider` (read
the contract there). Azure specifics a caller may rely on:

* instance types are the Resource SKUs of the region (:mod:`.skus`), priced by :mod:`.pricing`
  (Retail Prices API, refreshed every 12 hours, packaged table as fallback), built with AKS's
  formulas (:mod:`.instancetypes`) for the NodePool's AKSNodeClass (``osDiskSizeGB`` ->
  ephemeral-storage; ``maxPods`` and ``kubelet`` -> pods and overhead); sizes without a price are
  left out, and so are sizes the AKSNodeClass cannot launch (:func:`.instancetypes.for_nodeclass`:
  encryption at host, trusted launch, LocalDNS, artifact streaming); AMD GPU sizes only for an
  AKSNodeClass with ``gpu.mode: None`` (:func:`.instancetypes.amd_gpus_allowed`). Offerings in the
  unavailable-offerings cache (:mod:`.offerings`) are ``available=False``;
* :meth:`create` checks the claim's AKSNodeClass is there and ``Ready`` (else
  :class:`NodeClassNotReadyError`), then launches on the offerings of its instance types as
  :mod:`.launch` says (spot first, cheapest first, skipping cached offerings, moving on after a
  capacity or quota error; a restart mid-launch adopts the VM it made);
* provider IDs are ``azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/
  virtualMachines/aks-<nodeclaim>``; :meth:`list` and :meth:`get` see only VMs tagged
  ``karpenter.azure.com_cluster=<cluster>`` (each as :meth:`.launch.Launcher.claim_of` reads it);
  :meth:`delete` refuses others (:class:`NotOwnedError`), as it refuses a provider ID whose subscription
  or resource group is not the node resource group's (the whole ID must match, not the VM name), and
  deletes a VM's NICs and OS disk only when each carries the tag too (:meth:`.instances.Instances.delete`);
* images: the AKSNodeClass family's definition for the size (arch, Hyper-V generation) at its pinned
  ``imageVersion``, else the gallery's newest version (:mod:`.gallery`, kept 3 days), else the default;
  a VM whose image is no longer one of those is ``ImageDrift`` (a new gallery version drifts nodes);
* :meth:`garbage_collect_nics` deletes this cluster's NICs that no VM uses and no launch in
  progress is creating (a failed launch between NIC and VM leaves such a NIC). :meth:`list`, which
  the garbage-collection controller calls every two minutes, runs it at most every
  :data:`NIC_GC_INTERVAL` seconds (failures are logged, never raised from :meth:`list`).
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from karpy import clock
from karpy.api import aksnodeclass, labels, nodeclaim, nodepool
from karpy.cloudprovider import errors, instancetype, interface, kubelet_overrides
from karpy.cloudprovider.azure import (
    clients,
    gallery,
    images,
    instances,
    instancetypes,
    launch,
    machine_launch,
    machines,
    nodebootstrapping,
    offerings,
    pricing,
    sig,
    skus,
)

log = logging.getLogger("karpy.cloudprovider.azure")

NodeClassLookup = Callable[[str], Mapping[str, Any] | None]
"""AKSNodeClass name -> the object as the API returns it (``None`` when missing)."""

SKU_REFRESH_SECONDS = 12 * 3600.0
NIC_GC_INTERVAL = 300.0
"""At most this often :meth:`AzureCloudProvider.list` also removes orphaned NICs."""


class AzureCloudProvider:
    """See the module docstring."""

    name = "azure"

    def __init__(self, azure: clients.AzureClients, config: launch.ClusterConfig, clk: clock.Clock,
                 node_classes: NodeClassLookup, prices: pricing.PriceBook | None = None) -> None:
        self.azure = azure
        self.config = config
        self.clock = clk
        self.node_classes = node_classes
        self.prices = prices or pricing.PriceBook(config.region, clk)
        self.unavailable = offerings.UnavailableOfferings(clk)
        self.image_versions = gallery.ImageVersions(azure, config.region, clk)
        self.instances = instances.Instances(azure, config.resource_group)
        self._records: dict[str, dict[str, Any]] | None = None
        self._records_at = 0.0
        self._types: dict[Any, list[instancetype.InstanceType]] = {}
        bootstrapping = None
        if config.provision_mode == launch.PROVISION_MODE_BOOTSTRAPPING_CLIENT:
            bootstrapping = nodebootstrapping.NodeBootstrappingClient(
                config.node_bootstrapping_server_url, azure.credential, subscription_id=azure.subscription_id,
                resource_group=config.cluster_resource_group, cluster_name=config.cluster_name,
                bootstrap_token=config.bootstrap_token)
        self.machines: machines.MachinesClient | None = None
        self.latest: images.Resolver = self.image_versions.latest
        self.launcher: launch.Launcher
        if config.provision_mode == launch.PROVISION_MODE_AKS_MACHINE_API:
            pipe = sig.pipeline(azure.endpoint, azure.credential)
            self.latest = sig.NodeImageVersions(pipe, azure.subscription_id, config.region, clk).latest
            self.machines = machines.MachinesClient(
                pipe, subscription_id=azure.subscription_id, resource_group=config.cluster_resource_group,
                cluster_name=config.cluster_name, pool=config.aks_machines_pool_name)
            self.launcher = machine_launch.MachineLauncher(self.instances, config, self.unavailable,
                                                           self.image_versions, self.records, self.machines,
                                                           self.latest)
        else:
            self.launcher = launch.Launcher(self.instances, config, self.unavailable, self.image_versions,
                                            self.records, bootstrapping)
        self._nics_collected_at: float | None = None
        self._cache_lock = threading.RLock()

    # ------------------------------------------------------------------------------------------
    # Instance types

    def records(self) -> dict[str, dict[str, Any]]:
        """Size -> Resource SKU record of the region, refreshed every 12 hours."""
        now = self.clock.now()
        with self._cache_lock:
            if self._records is None or now - self._records_at >= SKU_REFRESH_SECONDS:
                self._records = skus.discover(self.azure, self.config.region)
                self._records_at = now
                self._types.clear()
            return self._records

    def _node_class(self, name: str | None) -> aksnodeclass.AKSNodeClass | None:
        if not name:
            return None
        obj = self.node_classes(name)
        return aksnodeclass.AKSNodeClass.from_manifest(obj) if obj is not None else None

    def _types_for(self, nc: aksnodeclass.AKSNodeClass | None) -> list[instancetype.InstanceType]:
        self.prices.refresh()
        records = self.records()
        kubelet: dict[str, Any] = nc.kubelet.to_dict() if nc is not None and nc.kubelet is not None else {}
        if nc is not None and nc.max_pods is not None:
            kubelet["maxPods"] = nc.max_pods
        kc = kubelet_overrides.kubelet_config(kubelet or None)
        os_disk = nc.os_disk_size_gb if nc is not None else instancetypes.DEFAULT_OS_DISK_GB
        key = (kc, os_disk, self.prices.version, instancetypes.nodeclass_filter(nc))
        cached = self._types.get(key)
        if cached is None:
            spot = self.prices.spot_prices()
            cached = []
            for name, rec in records.items():
                price = self.prices.on_demand(name)
                if price is None:
                    continue
                t = instancetypes.build(name, {**rec, "price": price}, region=self.config.region, kubelet=kc,
                                        os_disk_gb=os_disk, spot_prices=spot,
                                        amd_gpus=instancetypes.amd_gpus_allowed(nc))
                if t is not None:
                    cached.append(t)
            cached = instancetypes.for_nodeclass(cached, nc)
            if nc is not None and nc.trusted_launch():  # the Resource SKU says which sizes cannot
                cached = [t for t in cached if not records.get(t.name, {}).get("trusted_launch_disabled")]
            self._types[key] = cached
        return cached

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        ref = pool.node_class_ref if pool is not None else None
        nc = self._node_class(ref.name if ref is not None else None)
        return sorted(self.unavailable.apply(self._types_for(nc)), key=lambda t: t.name)

    # ------------------------------------------------------------------------------------------
    # Launch

    def _ready_node_class(self, claim: nodeclaim.NodeClaim) -> aksnodeclass.AKSNodeClass | None:
        ref = claim.spec.node_class_ref
        if ref is None:
            return None
        obj = self.node_classes(ref.name)
        if obj is None:
            raise errors.NodeClassNotReadyError(f"AKSNodeClass {ref.name} not found")
        ready = images.resolve_status(obj, sig_subscription=self._sig_subscription())["conditions"][-1]
        if ready["status"] != "True":
            raise errors.NodeClassNotReadyError(f"AKSNodeClass {ref.name} is not ready: {ready['message']}")
        return aksnodeclass.AKSNodeClass.from_manifest(obj)

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        nc = self._ready_node_class(claim)
        return self.launcher.create(claim, nc, self._types_for(nc))

    # ------------------------------------------------------------------------------------------
    # Delete, get, list

    def provider_id(self, vm_name: str) -> str:
        return self.launcher.provider_id(vm_name)

    def _vm_name(self, provider_id: str) -> str:
        """The VM name of a provider ID naming a VM of the node resource group; a VM elsewhere (another
        resource group or subscription) is not karpy's: :class:`NodeClaimNotFoundError`."""
        prefix = "azure://"
        if not provider_id.startswith(prefix + "/subscriptions/") or "/virtualMachines/" not in provider_id:
            raise errors.NodeClaimNotFoundError(f"{provider_id or '(no provider id)'} is not an Azure VM")
        name = self.instances.in_resource_group(provider_id[len(prefix):], "Microsoft.Compute", "virtualMachines")
        if name is None:
            raise errors.NodeClaimNotFoundError(
                f"{provider_id} is not a VM of node resource group {self.instances.resource_group} in subscription "
                f"{self.instances.azure.subscription_id}")
        return name

    def _owned_vm(self, provider_id: str) -> dict[str, Any]:
        name = self._vm_name(provider_id)
        try:
            vm = self.instances.get_vm(name)
        except clients.NotFoundError as exc:
            raise errors.NodeClaimNotFoundError(f"VM {name} not found") from exc
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(exc.message, reason=exc.code or "AzureAPIError",
                                            retryable=exc.retryable) from exc
        return vm

    def _machine(self, provider_id: str) -> dict[str, Any]:
        """The owned AKS machine behind a provider ID (``aksmachineapi``)."""
        assert self.machines is not None
        vm = provider_id.rsplit("/", 1)[-1]
        name = machines.name_of_vm(self.config.aks_machines_pool_name, vm)
        if "/virtualMachines/" not in provider_id or name is None:
            raise errors.NodeClaimNotFoundError(f"{provider_id or '(no provider id)'} is not a VM of an AKS machine "
                                                f"of agent pool {self.config.aks_machines_pool_name}")
        try:
            machine = self.machines.get(name)
        except clients.NotFoundError as exc:
            raise errors.NodeClaimNotFoundError(f"AKS machine {name} not found") from exc
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(exc.message, reason=exc.code or "AzureAPIError",
                                            retryable=exc.retryable) from exc
        if not instances.owned((machine.get("properties") or {}).get("tags"), self.config.cluster_name):
            raise errors.NodeClaimNotFoundError(f"AKS machine {name} is not this cluster's")
        return machine

    def _delete_machine(self, claim: nodeclaim.NodeClaim) -> None:
        assert self.machines is not None
        machine = self._machine(claim.status.provider_id)
        try:
            self.machines.delete(str(machine.get("name")))
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(f"deleting NodeClaim {claim.name}: {exc.message}",
                                            reason=exc.code or "AzureAPIError", retryable=exc.retryable) from exc

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        if self.machines is not None:
            return self._delete_machine(claim)
        try:
            self._vm_name(claim.status.provider_id)
        except errors.NodeClaimNotFoundError as exc:
            if claim.status.provider_id.startswith("azure:///subscriptions/"):
                raise errors.NotOwnedError(f"refusing to delete: {exc}") from exc
            raise
        vm = self._owned_vm(claim.status.provider_id)
        if not instances.owned(vm.get("tags"), self.config.cluster_name):
            raise errors.NotOwnedError(f"VM {vm.get('name')} is not tagged {instances.CLUSTER_TAG}="
                                       f"{self.config.cluster_name}; refusing to delete it")
        try:
            self.instances.delete(vm, self.config.cluster_name)
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(f"deleting NodeClaim {claim.name}: {exc.message}",
                                            reason=exc.code or "AzureAPIError", retryable=exc.retryable) from exc

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        if self.machines is not None:
            return self.launcher.claim_of(self._machine(provider_id))
        vm = self._owned_vm(provider_id)
        if not instances.owned(vm.get("tags"), self.config.cluster_name):
            raise errors.NodeClaimNotFoundError(f"VM {vm.get('name')} not found")
        return self.launcher.claim_of(vm)

    def _list_machines(self) -> builtins.list[nodeclaim.NodeClaim]:
        assert self.machines is not None
        try:
            found = self.machines.list()
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(exc.message, reason=exc.code or "AzureAPIError",
                                            retryable=exc.retryable) from exc
        claims = [self.launcher.claim_of(m) for m in found
                  if instances.owned((m.get("properties") or {}).get("tags"), self.config.cluster_name)]
        claims.sort(key=lambda c: (c.metadata.creation_timestamp or 0.0, c.status.provider_id))
        return claims

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        if self.machines is not None:
            return self._list_machines()
        try:
            vms = self.instances.list_vms(self.config.cluster_name)
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(exc.message, reason=exc.code or "AzureAPIError",
                                            retryable=exc.retryable) from exc
        now = self.clock.now()
        if self._nics_collected_at is None or now - self._nics_collected_at >= NIC_GC_INTERVAL:
            self._nics_collected_at = now
            try:
                removed = self.garbage_collect_nics(vms)
            except errors.CloudProviderError as exc:
                log.warning("could not garbage-collect orphaned NICs: %s", exc)
            else:
                if removed:
                    log.info("deleted orphaned network interfaces %s", ", ".join(removed))
        claims = [self.launcher.claim_of(vm) for vm in vms]
        claims.sort(key=lambda c: (c.metadata.creation_timestamp or 0.0, c.status.provider_id))
        return claims

    def garbage_collect_nics(self, vms_now: builtins.list[dict[str, Any]] | None = None) -> builtins.list[str]:
        """Delete this cluster's NICs no VM uses and no launch is creating; returns their names.
        ``vms_now`` is this cluster's VM list when the caller just fetched it."""
        try:
            nics = self.instances.list_nics(self.config.cluster_name)
            listed = vms_now if vms_now is not None else self.instances.list_vms(self.config.cluster_name)
            vms = {str(v.get("name")) for v in listed}
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(exc.message, reason=exc.code or "AzureAPIError",
                                            retryable=exc.retryable) from exc
        launching = self.launcher.in_progress()
        removed = []
        for nic in nics:
            name = str(nic.get("name"))
            attached = (nic.get("properties") or {}).get("virtualMachine")
            if name in vms or name in launching or attached:
                continue
            try:
                if self.instances.delete_nic(name):
                    removed.append(name)
            except clients.AzureAPIError:
                continue  # tried again on the next sweep
        return removed

    # ------------------------------------------------------------------------------------------
    # Drift, repair, NodeClass status

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        """``NodeClassDrift`` (the claim's AKSNodeClass hash changed) or ``ImageDrift`` (its VM's community
        gallery image, or its AKS machine's ``nodeImageVersion``, is none of the AKSNodeClass's images now)."""
        pid = claim.status.provider_id
        instance = self._machine(pid) if self.machines is not None else self._owned_vm(pid)
        ref = claim.spec.node_class_ref
        nc = self._node_class(ref.name if ref is not None else None)
        if nc is None:
            return ""
        have = claim.metadata.annotations.get(labels.NODECLASS_HASH_AZURE)
        if have is not None and have != nc.hash():
            return "NodeClassDrift"
        props = instance.get("properties") or {}
        if self.machines is not None:
            image = str(props.get("nodeImageVersion") or "")
            expected = {sig.node_image_version(i.id) for i in images.images(
                nc.image_family, nc.image_version, self.latest, trusted_launch=nc.trusted_launch(), fips=nc.fips(),
                kubernetes_version=self.config.kubernetes_version, sig_subscription=self.config.sig_subscription_id)}
        else:
            image = str((props.get("storageProfile") or {}).get("imageReference", {}).get("communityGalleryImageId")
                        or "")
            expected = {i.id for i in images.images(nc.image_family, nc.image_version, self.image_versions.latest,
                                                    trusted_launch=nc.trusted_launch(), fips=nc.fips(),
                                                    kubernetes_version=self.config.kubernetes_version)}
        return "ImageDrift" if image and expected and image not in expected else ""

    def mark_insufficient(self, instance_type: str, zone: str, capacity_type: str, until: float) -> None:
        """Treat an offering as out of capacity until ``until`` (a simulator scenario step)."""
        self.unavailable.mark((instance_type, zone, capacity_type), max(0.0, until - self.clock.now()),
                              "InsufficientCapacity")

    def repair_policies(self) -> builtins.list[interface.RepairPolicy]:
        return [interface.RepairPolicy("Ready", "False", 10 * 60.0),
                interface.RepairPolicy("Ready", "Unknown", 10 * 60.0)]

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        return images.resolve_status(node_class, self.config.kubernetes_version, self.latest,
                                     self.config.network_plugin, self._sig_subscription())

    def _sig_subscription(self) -> str:
        """Where the shared image gallery images are (``USE_SIG``, the AKS machine API mode); ``""``: community."""
        return self.config.sig_subscription_id if self.machines is not None else ""
