"""The Azure (AKS Node Auto-Provisioning) cloud provider over the Azure SDK.

:class:`AzureCloudProvider` satisfies :class:`karpy.cloudprovider.interface.CloudProvider` (read
the contract there). Azure specifics a caller may rely on:

* instance types are the Resource SKUs of the region (:mod:`.skus`), priced by :mod:`.pricing`
  (Retail Prices API, refreshed every 12 hours, packaged table as fallback), built with AKS's
  formulas (:mod:`.instancetypes`) for the NodePool's AKSNodeClass (``osDiskSizeGB`` ->
  ephemeral-storage; ``maxPods`` and ``kubelet`` -> pods and overhead); sizes without a price are
  left out. Offerings in the unavailable-offerings cache (:mod:`.offerings`) are
  ``available=False``;
* :meth:`create` tries the compatible offerings spot first (when the claim allows spot), then
  on-demand, each cheapest first, skipping cached ones; per offering it creates the NIC and the VM
  (:mod:`.instances`). A capacity or quota error marks the cache (:func:`.offerings.classify`),
  removes the half-made VM and NIC, and moves on to the next offering; any other error stops the
  launch as a :class:`CreateError` (retryable when ARM said so). When every offering failed:
  :class:`InsufficientCapacityError` naming them;
* a repeated :meth:`create` for the same NodeClaim (a restart mid-launch) finds the VM
  ``aks-<nodeclaim>`` it made and returns it instead of launching again (a VM left ``Failed`` is
  removed and the launch goes on);
* provider IDs are ``azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/
  virtualMachines/aks-<nodeclaim>``; :meth:`list` and :meth:`get` see only VMs tagged
  ``karpenter.azure.com_cluster=<cluster>``; :meth:`delete` refuses others (:class:`NotOwnedError`);
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
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from karpy import clock
from karpy.api import aksnodeclass, labels, meta, nodeclaim, nodepool
from karpy.cloudprovider import catalog, errors, instancetype, interface
from karpy.cloudprovider.azure import (
    bootstrap,
    clients,
    gallery,
    images,
    instances,
    instancetypes,
    offerings,
    pricing,
    skus,
)
from karpy.cloudprovider.fake import capacity

log = logging.getLogger("karpy.cloudprovider.azure")

NodeClassLookup = Callable[[str], Mapping[str, Any] | None]
"""AKSNodeClass name -> the object as the API returns it (``None`` when missing)."""

SKU_REFRESH_SECONDS = 12 * 3600.0
NIC_GC_INTERVAL = 300.0
"""At most this often :meth:`AzureCloudProvider.list` also removes orphaned NICs."""
AKS_LABELS = {"kubernetes.azure.com/mode": "user", "kubernetes.azure.com/role": "agent",
              "kubernetes.azure.com/podnetwork-type": "overlay", "kubernetes.azure.com/ebpf-dataplane": "cilium"}
"""The AKS labels of a node of the default network (Azure CNI overlay, Cilium dataplane)."""
DEFAULT_KUBERNETES_VERSION = "1.31"
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
"""Karpenter Azure sets it: the node's startup taints come from the kubelet, not from syncing the claim."""
OS_SKU = {"Ubuntu": "Ubuntu", "Ubuntu2204": "Ubuntu", "Ubuntu2404": "Ubuntu", "AzureLinux": "AzureLinux"}


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """Where and for whom the provider launches."""

    cluster_name: str
    region: str
    resource_group: str
    """The node resource group (``MC_<rg>_<cluster>_<region>``)."""
    subnet_id: str
    cluster_endpoint: str = ""
    ssh_public_key: str = ""
    kubernetes_version: str = ""
    # how nodes join the cluster (Karpenter Azure's operator settings; :mod:`.bootstrap`)
    ca_bundle: str = ""
    """The cluster CA, PEM, base64-encoded."""
    bootstrap_token: str = dataclasses.field(default="", repr=False)
    subscription_id: str = ""
    tenant_id: str = ""
    network_plugin: str = "azure"
    network_plugin_mode: str = "overlay"
    network_policy: str = ""
    network_dataplane: str = "cilium"
    dns_service_ip: str = ""
    vnet_guid: str = ""
    kubelet_identity_client_id: str = ""
    node_identities: tuple[str, ...] = ()
    admin_username: str = instances.ADMIN_USERNAME

    def bootstrap(self) -> bootstrap.ClusterBootstrap:
        """The cluster-wide part of every node's custom data."""
        return bootstrap.ClusterBootstrap(
            cluster_name=self.cluster_name, api_server=bootstrap.api_server_name(self.cluster_endpoint),
            ca_bundle=self.ca_bundle, bootstrap_token=self.bootstrap_token,
            kubernetes_version=self.kubernetes_version or DEFAULT_KUBERNETES_VERSION,
            subscription_id=self.subscription_id, location=self.region, node_resource_group=self.resource_group,
            subnet_id=self.subnet_id, tenant_id=self.tenant_id, network_plugin=self.network_plugin,
            network_plugin_mode=self.network_plugin_mode, network_policy=self.network_policy,
            dns_service_ip=self.dns_service_ip, kubelet_identity_client_id=self.kubelet_identity_client_id,
            admin_username=self.admin_username)


class AzureCloudProvider:
    """See the module docstring."""

    name = "azure"

    def __init__(self, azure: clients.AzureClients, config: ClusterConfig, clk: clock.Clock,
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
        self._launching: set[str] = set()
        self._nics_collected_at: float | None = None
        self._lock = threading.Lock()
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
        kc = catalog.kubelet_config(kubelet or None)
        os_disk = nc.os_disk_size_gb if nc is not None else instancetypes.DEFAULT_OS_DISK_GB
        key = (kc, os_disk, self.prices.version)
        cached = self._types.get(key)
        if cached is None:
            spot = self.prices.spot_prices()
            cached = []
            for name, rec in records.items():
                price = self.prices.on_demand(name)
                if price is None:
                    continue
                t = instancetypes.build(name, {**rec, "price": price}, region=self.config.region, kubelet=kc,
                                        os_disk_gb=os_disk, spot_prices=spot)
                if t is not None:
                    cached.append(t)
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
        ready = images.resolve_status(obj)["conditions"][-1]
        if ready["status"] != "True":
            raise errors.NodeClassNotReadyError(f"AKSNodeClass {ref.name} is not ready: {ready['message']}")
        return aksnodeclass.AKSNodeClass.from_manifest(obj)

    def _ordered(self, claim: nodeclaim.NodeClaim, types: builtins.list[instancetype.InstanceType]
                 ) -> builtins.list[capacity.Candidate]:
        allowed = types
        for req in claim.spec.requirements:
            if req.key == labels.INSTANCE_TYPE and req.operator == "In":
                names = set(req.values)
                allowed = [t for t in types if t.name in names]
        cands = capacity.candidates(allowed, claim.spec.requirements, claim.spec.resources_requests,
                                    self.config.region, capacity.defined_keys(types))
        order = {ct: i for i, ct in enumerate(capacity.CAPACITY_TYPE_PREFERENCE)}
        return sorted(cands, key=lambda c: (order.get(c.offering.capacity_type, len(order)), *c.sort_key()))

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        nc = self._ready_node_class(claim)
        types = self._types_for(nc)
        cands = self._ordered(claim, types)
        if not cands:
            raise errors.CreateError(
                f"no offering of any instance type is compatible with NodeClaim {claim.name}'s requirements "
                "and resource requests", reason="NoCompatibleInstanceTypes")
        failed: builtins.list[errors.OfferingKey] = []
        name = instances.resource_name(claim.name)
        existing = self._existing(name)
        if existing is not None:  # a launch repeated after a restart: the VM is already there
            adopted = self._adopt(claim, nc, types, existing)
            if adopted is not None:
                return adopted
        with self._lock:
            self._launching.add(name)
        try:
            for cand in cands:
                it, offer = cand.instance_type, cand.offering
                if self.unavailable.is_unavailable(it.name, offer.zone, offer.capacity_type):
                    failed.append(cand.key)
                    continue
                try:
                    vm = self._launch(claim, nc, cand)
                except clients.AzureAPIError as exc:
                    failure = offerings.classify(exc.code, exc.message, it, offer.zone, offer.capacity_type)
                    self._cleanup(name)
                    if failure is None:
                        raise errors.CreateError(f"launching NodeClaim {claim.name}: {exc.message}",
                                                 reason=exc.code or "LaunchFailed", retryable=exc.retryable) from exc
                    self.unavailable.mark_all(failure)
                    failed.append(cand.key)
                    continue
                return self._launched(claim, nc, it, offer, vm)
        finally:
            with self._lock:
                self._launching.discard(name)
        raise errors.InsufficientCapacityError(failed)

    def _existing(self, name: str) -> dict[str, Any] | None:
        try:
            vm = self.instances.get_vm(name)
        except clients.NotFoundError:
            return None
        except clients.AzureAPIError as exc:
            raise errors.CreateError(f"looking for VM {name}: {exc.message}", reason=exc.code or "AzureAPIError",
                                     retryable=exc.retryable) from exc
        if not instances.owned(vm.get("tags"), self.config.cluster_name):
            raise errors.CreateError(f"VM {name} exists and is not this cluster's; refusing to reuse its name",
                                     reason="NotOwned")
        return vm

    def _adopt(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
               types: builtins.list[instancetype.InstanceType], vm: Mapping[str, Any]) -> nodeclaim.NodeClaim | None:
        """The launched NodeClaim for a VM a previous attempt created (``None``: it failed; it is removed)."""
        props = vm.get("properties") or {}
        if props.get("provisioningState") == "Failed":
            self._cleanup(str(vm.get("name")))
            return None
        view = self._claim_of(vm)
        size = view.metadata.labels[labels.INSTANCE_TYPE]
        zone = view.metadata.labels[labels.ZONE]
        ct = view.metadata.labels[labels.CAPACITY_TYPE]
        it = next((t for t in types if t.name == size), None)
        if it is None:
            return None
        offer = next((o for o in it.offerings if o.zone == zone and o.capacity_type == ct),
                     instancetype.Offering(zone, ct, 0.0))
        return self._launched(claim, nc, it, offer, vm)

    def _launch(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
                cand: capacity.Candidate) -> dict[str, Any]:
        it, offer = cand.instance_type, cand.offering
        name = instances.resource_name(claim.name)
        family = nc.image_family if nc is not None else "Ubuntu2204"
        image = images.image_for(family, nc.image_version if nc is not None else None, it.labels,
                                 self.image_versions.latest)
        if image is None:
            raise clients.AzureAPIError(f"no {family} image for {it.name}", code="ImageNotFound")
        os_disk = nc.os_disk_size_gb if nc is not None else instancetypes.DEFAULT_OS_DISK_GB
        rec = self.records().get(it.name, {})
        zone = offer.zone.rsplit("-", 1)[-1] if offer.zone else ""
        node_labels = self._node_labels(claim, it, offer)
        spec = instances.LaunchSpec(
            name=name, region=self.config.region, zone=zone, size=it.name, capacity_type=offer.capacity_type,
            image_id=image, os_disk_gb=os_disk,
            subnet_id=(nc.vnet_subnet_id if nc is not None and nc.vnet_subnet_id else self.config.subnet_id),
            tags=instances.tags(self.config.cluster_name, claim.metadata.labels.get(labels.NODEPOOL, ""),
                                claim.name, nc.name if nc is not None else "", nc.tags if nc is not None else None),
            custom_data=bootstrap.custom_data(self._bootstrap(claim, nc, it, node_labels)),
            ssh_public_key=self.config.ssh_public_key, admin_username=self.config.admin_username,
            node_identities=self.config.node_identities,
            accelerated_networking=bool(rec.get("accelerated_networking")),
            premium_storage=bool(rec.get("premium_io", True)),
            ephemeral_placement=instances.ephemeral_placement(rec, os_disk),
        )
        nic = self.instances.create_nic(spec)
        return self.instances.create_vm(spec, str(nic.get("id") or ""))

    def _node_labels(self, claim: nodeclaim.NodeClaim, it: instancetype.InstanceType,
                     offer: instancetype.Offering) -> dict[str, str]:
        cfg = self.config
        out = {"kubernetes.azure.com/mode": "user", "kubernetes.azure.com/role": "agent",
               DO_NOT_SYNC_TAINTS: "true"}  # defaults: a NodePool template may say mode=system
        if cfg.network_plugin_mode == "overlay":
            out["kubernetes.azure.com/podnetwork-type"] = "overlay"
            out["kubernetes.azure.com/azure-cni-overlay"] = "true"
        if cfg.network_dataplane == "cilium":
            out["kubernetes.azure.com/ebpf-dataplane"] = "cilium"
        if cfg.vnet_guid:
            out["kubernetes.azure.com/nodenetwork-vnetguid"] = cfg.vnet_guid
        if cfg.kubelet_identity_client_id:
            out["kubernetes.azure.com/kubelet-identity-client-id"] = cfg.kubelet_identity_client_id
        out.update(claim.metadata.labels)
        out.update(it.labels)
        out.update({labels.INSTANCE_TYPE: it.name, labels.ZONE: offer.zone, labels.REGION: self.config.region,
                    labels.CAPACITY_TYPE: offer.capacity_type,
                    "kubernetes.azure.com/cluster": self.config.resource_group})
        if offer.capacity_type == labels.CAPACITY_TYPE_SPOT:
            out["kubernetes.azure.com/scalesetpriority"] = "spot"
        if self.config.subnet_id:
            parts = self.config.subnet_id.split("/")
            out["kubernetes.azure.com/network-subnet"] = parts[-1]
            out["kubernetes.azure.com/network-name"] = parts[-3] if len(parts) >= 3 else ""
            out["kubernetes.azure.com/network-subscription"] = parts[2] if len(parts) > 2 else ""
        return out

    def _bootstrap(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
                   it: instancetype.InstanceType, node_labels: Mapping[str, str]) -> bootstrap.NodeBootstrap:
        taints = [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                  for t in (*claim.spec.taints, *claim.spec.startup_taints)]
        kubelet = nc.kubelet if nc is not None else None
        max_pods = instancetypes.DEFAULT_MAX_PODS
        if kubelet is not None and kubelet.max_pods is not None:
            max_pods = kubelet.max_pods
        if nc is not None and nc.max_pods is not None:
            max_pods = nc.max_pods
        family = nc.image_family if nc is not None else "Ubuntu2204"
        node_labels = {**node_labels, "kubernetes.azure.com/os-sku": OS_SKU.get(family, family)}
        return bootstrap.NodeBootstrap(
            cluster=self.config.bootstrap(), node_labels=node_labels, taints=taints, max_pods=max_pods,
            kubelet=kubelet, arch=it.labels.get(labels.ARCH, "amd64"),
            gpu_node=it.labels.get(labels.AZURE_SKU_GPU_MANUFACTURER) == "nvidia")

    def _cleanup(self, name: str) -> None:
        """Remove what a failed launch left (the VM in Failed state, the NIC)."""
        try:
            self.instances.delete_vm(name)
            self.instances.delete_nic(name)
        except clients.AzureAPIError:
            pass  # the NIC garbage collection removes what is left

    def _launched(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
                  it: instancetype.InstanceType, offer: instancetype.Offering, vm: Mapping[str, Any]
                  ) -> nodeclaim.NodeClaim:
        md = claim.metadata
        annotations = dict(md.annotations)
        if nc is not None:
            annotations[labels.NODECLASS_HASH_AZURE] = nc.hash()
        node_labels = self._node_labels(claim, it, offer)
        image = ((vm.get("properties") or {}).get("storageProfile") or {}).get("imageReference") or {}
        return dataclasses.replace(
            claim,
            metadata=dataclasses.replace(md, labels=node_labels, annotations=annotations),
            status=dataclasses.replace(
                claim.status, provider_id=self.provider_id(str(vm.get("name"))),
                image_id=str(image.get("communityGalleryImageId") or image.get("id") or ""),
                capacity=dict(it.capacity), allocatable=dict(it.allocatable)),
        )

    # ------------------------------------------------------------------------------------------
    # Delete, get, list

    def provider_id(self, vm_name: str) -> str:
        return "azure://" + self.instances.vm_id(vm_name)

    def _vm_name(self, provider_id: str) -> str:
        prefix = "azure:///subscriptions/"
        if not provider_id.startswith(prefix) or "/virtualMachines/" not in provider_id:
            raise errors.NodeClaimNotFoundError(f"{provider_id or '(no provider id)'} is not an Azure VM")
        return provider_id.rsplit("/", 1)[-1]

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

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        vm = self._owned_vm(claim.status.provider_id)
        if not instances.owned(vm.get("tags"), self.config.cluster_name):
            raise errors.NotOwnedError(f"VM {vm.get('name')} is not tagged {instances.CLUSTER_TAG}="
                                       f"{self.config.cluster_name}; refusing to delete it")
        try:
            self.instances.delete(vm)
        except clients.AzureAPIError as exc:
            raise errors.CloudProviderError(f"deleting NodeClaim {claim.name}: {exc.message}",
                                            reason=exc.code or "AzureAPIError", retryable=exc.retryable) from exc

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        vm = self._owned_vm(provider_id)
        if not instances.owned(vm.get("tags"), self.config.cluster_name):
            raise errors.NodeClaimNotFoundError(f"VM {vm.get('name')} not found")
        return self._claim_of(vm)

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
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
        claims = [self._claim_of(vm) for vm in vms]
        claims.sort(key=lambda c: (c.metadata.creation_timestamp or 0.0, c.status.provider_id))
        return claims

    def _claim_of(self, vm: Mapping[str, Any]) -> nodeclaim.NodeClaim:
        props = vm.get("properties") or {}
        tags = vm.get("tags") or {}
        size = str((props.get("hardwareProfile") or {}).get("vmSize") or "")
        zones = vm.get("zones") or []
        zone = f"{self.config.region}-{zones[0]}" if zones else ""
        ct = instances.CAPACITY_TYPE.get(str(props.get("priority") or "Regular"), labels.CAPACITY_TYPE_ON_DEMAND)
        node_labels = {labels.INSTANCE_TYPE: size, labels.ZONE: zone, labels.REGION: self.config.region,
                       labels.CAPACITY_TYPE: ct}
        if tags.get(instances.NODEPOOL_TAG):
            node_labels[labels.NODEPOOL] = str(tags[instances.NODEPOOL_TAG])
        created = props.get("timeCreated")
        when = clock.parse_rfc3339(str(created)) if created else None
        ref = None
        if tags.get(instances.NODECLASS_TAG):
            ref = nodeclaim.NodeClassRef(group=labels.AZURE_GROUP, kind=aksnodeclass.AKS_KIND,
                                         name=str(tags[instances.NODECLASS_TAG]))
        image = ((props.get("storageProfile") or {}).get("imageReference") or {})
        return nodeclaim.NodeClaim(
            metadata=meta.ObjectMeta(name=str(tags.get(instances.NODECLAIM_TAG) or vm.get("name")),
                                     labels=node_labels, creation_timestamp=when),
            spec=nodeclaim.NodeClaimSpec(node_class_ref=ref),
            status=nodeclaim.NodeClaimStatus(provider_id=self.provider_id(str(vm.get("name"))),
                                             image_id=str(image.get("communityGalleryImageId") or "")),
        )

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
        with self._lock:
            launching = set(self._launching)
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
        vm = self._owned_vm(claim.status.provider_id)
        ref = claim.spec.node_class_ref
        nc = self._node_class(ref.name if ref is not None else None)
        if nc is None:
            return ""
        have = claim.metadata.annotations.get(labels.NODECLASS_HASH_AZURE)
        if have is not None and have != nc.hash():
            return "NodeClassDrift"
        image = str(((vm.get("properties") or {}).get("storageProfile") or {}).get("imageReference", {})
                    .get("communityGalleryImageId") or "")
        expected = {i.id for i in images.images(nc.image_family, nc.image_version, self.image_versions.latest)}
        if image and expected and image not in expected:
            return "ImageDrift"
        return ""

    def mark_insufficient(self, instance_type: str, zone: str, capacity_type: str, until: float) -> None:
        """Treat an offering as out of capacity until ``until`` (a simulator scenario step)."""
        self.unavailable.mark((instance_type, zone, capacity_type), max(0.0, until - self.clock.now()),
                              "InsufficientCapacity")

    def repair_policies(self) -> builtins.list[interface.RepairPolicy]:
        return [interface.RepairPolicy("Ready", "False", 10 * 60.0),
                interface.RepairPolicy("Ready", "Unknown", 10 * 60.0)]

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        return images.resolve_status(node_class, self.config.kubernetes_version, self.image_versions.latest)
