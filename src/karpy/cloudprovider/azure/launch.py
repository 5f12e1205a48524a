"""Launching one NodeClaim as an Azure VM, and reading a VM back as a NodeClaim.

:class:`Launcher` is the launch half of :class:`karpy.cloudprovider.azure.provider.AzureCloudProvider`
(which checks the AKSNodeClass is ready and builds the instance types, then hands both here).
:class:`ClusterConfig` says where and for whom it launches. What a caller may rely on:

* :meth:`Launcher.create` tries the compatible offerings spot first (when the claim allows spot), then
  on-demand, each cheapest first, skipping those in the unavailable-offerings cache
  (:mod:`.offerings`); per offering it creates the NIC and the VM (:mod:`.instances`). A capacity or
  quota error marks the cache (:func:`.offerings.classify`), removes the half-made VM and NIC, and
  moves on to the next offering; any other ARM error stops the launch as a
  :class:`karpy.cloudprovider.errors.CreateError` (retryable when ARM said so). No compatible
  offering at all: ``CreateError`` with reason ``NoCompatibleInstanceTypes``; every offering failed:
  :class:`karpy.cloudprovider.errors.InsufficientCapacityError` naming them;
* a repeated :meth:`Launcher.create` for the same NodeClaim (a restart mid-launch) finds the VM
  ``aks-<nodeclaim>`` it made and returns it instead of launching again (a VM left ``Failed`` is
  removed and the launch goes on; a VM of that name not tagged for this cluster is refused with
  reason ``NotOwned``);
* while a launch runs, :meth:`Launcher.in_progress` names its VM (the NIC garbage collection leaves
  that NIC alone);
* the node's labels (:func:`node_labels`) are the claim's, the instance type's and the well-known
  ones (instance type, zone, region, capacity type) plus AKS's ``kubernetes.azure.com/*`` labels of
  the cluster's network and of the AKSNodeClass (:func:`nodeclass_labels`: ``os-sku``,
  ``os-sku-requested``, ``os-sku-effective``, ``fips_enabled``, ``localdns-state``,
  ``artifactstreaming-enabled``, as Karpenter's Azure provider sets them); the custom data
  (:func:`node_bootstrap`, :mod:`.bootstrap`) carries them with the claim's taints and startup
  taints, ``maxPods`` (the AKSNodeClass's ``maxPods``, else its kubelet's, else AKS's default), and
  the AKSNodeClass's ``gpu.mode``, ``linuxOSConfig`` and ``kubelet.failSwapOn``; the VM's
  ``securityProfile`` and trusted-launch image follow its ``security``;
* the launched NodeClaim has those labels, the AKSNodeClass hash annotation, the provider ID, the
  image ID and the instance type's capacity and allocatable;
* provider IDs are ``azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/
  virtualMachines/aks-<nodeclaim>`` (:meth:`Launcher.provider_id`); :meth:`Launcher.claim_of` is
  the NodeClaim a VM stands for (name, instance type, zone, capacity type, NodePool, AKSNodeClass,
  creation time, image), as ``get`` and ``list`` return it.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

from karpy import clock
from karpy.api import aksnodeclass, labels, meta, nodeclaim
from karpy.cloudprovider import errors, instancetype
from karpy.cloudprovider.azure import (
    bootstrap,
    clients,
    gallery,
    images,
    instances,
    instancetypes,
    nodebootstrapping,
    offerings,
    ultra_ssd,
)
from karpy.cloudprovider.fake import capacity

DEFAULT_KUBERNETES_VERSION = "1.31"
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
"""Karpenter Azure sets it: the node's startup taints come from the kubelet, not from syncing the claim."""
OS_SKU = {"Ubuntu": "Ubuntu", "Ubuntu2204": "Ubuntu", "Ubuntu2404": "Ubuntu", "AzureLinux": "AzureLinux"}
DEFAULT_IMAGE_FAMILY = "Ubuntu2204"
LABEL_OS_SKU = "kubernetes.azure.com/os-sku"
LABEL_OS_SKU_REQUESTED = "kubernetes.azure.com/os-sku-requested"
LABEL_OS_SKU_EFFECTIVE = "kubernetes.azure.com/os-sku-effective"
LABEL_FIPS = "kubernetes.azure.com/fips_enabled"
LABEL_SCALESET_PRIORITY = "kubernetes.azure.com/scalesetpriority"
LABEL_PRIORITY = "kubernetes.azure.com/priority"
"""Both ``regular`` or ``spot`` on every node (Karpenter Azure writes ``regular`` too, though AKS never does)."""
LABEL_LOCAL_DNS = "kubernetes.azure.com/localdns-state"
LABEL_ARTIFACT_STREAMING = "kubernetes.azure.com/artifactstreaming-enabled"


def nodeclass_labels(nc: aksnodeclass.AKSNodeClass | None, arch: str, kubernetes_version: str = "") -> dict[str, str]:
    """The labels an AKSNodeClass gives its nodes of ``arch`` (see the module docstring); ``os-sku-effective``
    is the family launched on a cluster of ``kubernetes_version`` (:func:`.images.effective_name`)."""
    family = nc.image_family if nc is not None else DEFAULT_IMAGE_FAMILY
    out = {LABEL_OS_SKU: OS_SKU.get(family, family), LABEL_OS_SKU_REQUESTED: family,
           LABEL_OS_SKU_EFFECTIVE: images.effective_name(family, kubernetes_version),
           LABEL_LOCAL_DNS: "enabled" if nc is not None and nc.local_dns_enabled() else "disabled"}
    if nc is not None and nc.fips():
        out[LABEL_FIPS] = "true"
    if nc is not None and nc.artifact_streaming_on(arch):
        out[LABEL_ARTIFACT_STREAMING] = "true"
    return out


PROVISION_MODE_SCRIPTLESS = "aksscriptless"
PROVISION_MODE_BOOTSTRAPPING_CLIENT = "bootstrappingclient"
PROVISION_MODE_AKS_MACHINE_API = "aksmachineapi"


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
    provision_mode: str = PROVISION_MODE_SCRIPTLESS
    """``PROVISION_MODE``: ``aksscriptless`` (karpy renders the custom data), ``bootstrappingclient`` or
    ``aksmachineapi`` (AKS machines, :mod:`.machines`)."""
    node_bootstrapping_server_url: str = ""
    cluster_resource_group: str = ""
    use_sig: bool = False
    sig_subscription_id: str = ""
    """``SIG_SUBSCRIPTION_ID``: the subscription of AKS's shared image galleries (with ``USE_SIG``)."""
    aks_machines_pool_name: str = ""
    """``AKS_MACHINES_POOL_NAME``: the agent pool the AKS machines go in (``aksmachineapi``)."""
    aks_identifying_extension: bool = False
    """Add ``computeAksLinuxBilling`` to every VM (ARM of the public, China or US Government cloud)."""
    """``USE_SIG``: AKS's shared image gallery images (the node image versions API) instead of the community ones."""
    """The managed cluster's own resource group (``ARM_RESOURCE_GROUP``), for the node bootstrapping API."""

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


def ultra_ssd_requested(claim: nodeclaim.NodeClaim) -> bool:
    """The NodeClaim's requirements allow ``sku-storage-ultra-ssd=true`` and not ``false`` (:mod:`.ultra_ssd`)."""
    return ultra_ssd.requested(claim.spec.requirements)


ultra_ssd_available = ultra_ssd.available
"""Whether a size's Resource SKU record has Ultra SSD in ``zone`` (``""``: a regional VM)."""


def node_labels(config: ClusterConfig, claim: nodeclaim.NodeClaim, it: instancetype.InstanceType,
                offer: instancetype.Offering, nc: aksnodeclass.AKSNodeClass | None = None) -> dict[str, str]:
    """The labels of the node ``claim`` becomes on ``offer`` of ``it`` (see the module docstring)."""
    out = {"kubernetes.azure.com/mode": "user", "kubernetes.azure.com/role": "agent",
           DO_NOT_SYNC_TAINTS: "true"}  # defaults: a NodePool template may say mode=system
    out.update(nodeclass_labels(nc, it.labels.get(labels.ARCH, "amd64"),
                                config.kubernetes_version or DEFAULT_KUBERNETES_VERSION))
    if config.network_plugin_mode == "overlay":
        out["kubernetes.azure.com/podnetwork-type"] = "overlay"
        out["kubernetes.azure.com/azure-cni-overlay"] = "true"
    if config.network_dataplane == "cilium":
        out["kubernetes.azure.com/ebpf-dataplane"] = "cilium"
    if config.vnet_guid:
        out["kubernetes.azure.com/nodenetwork-vnetguid"] = config.vnet_guid
    if config.kubelet_identity_client_id:
        out["kubernetes.azure.com/kubelet-identity-client-id"] = config.kubelet_identity_client_id
    out.update(claim.metadata.labels)
    out.update(it.labels)
    out.update({labels.INSTANCE_TYPE: it.name, labels.ZONE: offer.zone, labels.REGION: config.region,
                labels.CAPACITY_TYPE: offer.capacity_type,
                "kubernetes.azure.com/cluster": config.resource_group})
    out[labels.AZURE_SKU_STORAGE_ULTRA_SSD] = "true" if ultra_ssd_requested(claim) else "false"
    priority = "spot" if offer.capacity_type == labels.CAPACITY_TYPE_SPOT else "regular"
    out[LABEL_SCALESET_PRIORITY] = out[LABEL_PRIORITY] = priority
    if config.subnet_id:
        parts = config.subnet_id.split("/")
        out["kubernetes.azure.com/network-subnet"] = parts[-1]
        out["kubernetes.azure.com/network-name"] = parts[-3] if len(parts) >= 3 else ""
        out["kubernetes.azure.com/network-subscription"] = parts[2] if len(parts) > 2 else ""
    return out


def _taint(t: Any) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def node_bootstrap(config: ClusterConfig, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
                   it: instancetype.InstanceType, labels_: Mapping[str, str]) -> bootstrap.NodeBootstrap:
    """The per-node part of the custom data (see the module docstring)."""
    taints = [_taint(t) for t in (*claim.spec.taints, *claim.spec.startup_taints)]
    kubelet = nc.kubelet if nc is not None else None
    max_pods = instancetypes.DEFAULT_MAX_PODS
    if kubelet is not None and kubelet.max_pods is not None:
        max_pods = kubelet.max_pods
    if nc is not None and nc.max_pods is not None:
        max_pods = nc.max_pods
    nvidia = it.labels.get(labels.AZURE_SKU_GPU_MANUFACTURER) == "nvidia"
    return bootstrap.NodeBootstrap(
        cluster=config.bootstrap(), node_labels=labels_, taints=taints, max_pods=max_pods,
        kubelet=kubelet, arch=it.labels.get(labels.ARCH, "amd64"),
        gpu_node=nvidia and (nc is None or nc.gpu_driver_installation()),
        fail_swap_on=nc.fail_swap_on if nc is not None else None,
        linux_os=nc.linux_os_config if nc is not None else None)


class Launcher:
    """See the module docstring. ``records`` returns the region's Resource SKU records by size."""

    def __init__(self, vms: instances.Instances, config: ClusterConfig, unavailable: offerings.UnavailableOfferings,
                 image_versions: gallery.ImageVersions, records: Callable[[], dict[str, dict[str, Any]]],
                 node_bootstrapping: nodebootstrapping.NodeBootstrappingClient | None = None) -> None:
        self.instances = vms
        self.node_bootstrapping = node_bootstrapping
        self.config = config
        self.unavailable = unavailable
        self.image_versions = image_versions
        self.records = records
        self._launching: set[str] = set()
        self._lock = threading.Lock()

    def in_progress(self) -> set[str]:
        """The VM names whose launch is under way now (a copy)."""
        with self._lock:
            return set(self._launching)

    def _ordered(self, claim: nodeclaim.NodeClaim, types: builtins.list[instancetype.InstanceType]
                 ) -> builtins.list[capacity.Candidate]:
        allowed = types
        for req in claim.spec.requirements:
            if req.key == labels.INSTANCE_TYPE and req.operator == "In":
                names = set(req.values)
                allowed = [t for t in types if t.name in names]
        cands = capacity.candidates(allowed, claim.spec.requirements, claim.spec.resources_requests,
                                    self.config.region, capacity.defined_keys(types))
        if ultra_ssd_requested(claim):  # only offerings whose Resource SKU has Ultra SSD there
            records = self.records()
            cands = [c for c in cands if ultra_ssd_available(records.get(c.instance_type.name, {}), c.offering.zone)]
        order = {ct: i for i, ct in enumerate(capacity.CAPACITY_TYPE_PREFERENCE)}
        return sorted(cands, key=lambda c: (order.get(c.offering.capacity_type, len(order)), *c.sort_key()))

    def create(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
               types: builtins.list[instancetype.InstanceType]) -> nodeclaim.NodeClaim:
        """Launch ``claim`` on the first offering of ``types`` that works (see the module docstring)."""
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
        view = self.claim_of(vm)
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
        family = nc.image_family if nc is not None else DEFAULT_IMAGE_FAMILY
        image = images.image_for(family, nc.image_version if nc is not None else None, it.labels,
                                 self.image_versions.latest, trusted_launch=nc is not None and nc.trusted_launch(),
                                 fips=nc is not None and nc.fips(),
                                 kubernetes_version=self.config.kubernetes_version or DEFAULT_KUBERNETES_VERSION)
        if image is None:
            raise clients.AzureAPIError(f"no {family} image for {it.name}", code="ImageNotFound")
        os_disk = nc.os_disk_size_gb if nc is not None else instancetypes.DEFAULT_OS_DISK_GB
        rec = self.records().get(it.name, {})
        zone = offer.zone.rsplit("-", 1)[-1] if offer.zone else ""
        labels_ = node_labels(self.config, claim, it, offer, nc)
        subnet_id = nc.vnet_subnet_id if nc is not None and nc.vnet_subnet_id else self.config.subnet_id
        ephemeral = instances.ephemeral_placement(rec, os_disk)
        node = node_bootstrap(self.config, claim, nc, it, labels_)
        cse = None
        if self.node_bootstrapping is None:
            custom_data = bootstrap.custom_data(node)
        else:  # PROVISION_MODE=bootstrappingclient: AKS's node bootstrapping API writes it
            custom_data, cse = self.node_bootstrapping.get(nodebootstrapping.provision_values(
                node, nc, it, image_id=image, subnet_id=subnet_id, ephemeral=ephemeral is not None,
                taints=[_taint(t) for t in claim.spec.taints],
                startup_taints=[_taint(t) for t in claim.spec.startup_taints]))
        spec = instances.LaunchSpec(
            name=name, region=self.config.region, zone=zone, size=it.name, capacity_type=offer.capacity_type,
            image_id=image, os_disk_gb=os_disk,
            subnet_id=subnet_id,
            tags=instances.tags(self.config.cluster_name, claim.metadata.labels.get(labels.NODEPOOL, ""),
                                claim.name, nc.name if nc is not None else "", nc.tags if nc is not None else None),
            custom_data=custom_data,
            ssh_public_key=self.config.ssh_public_key, admin_username=self.config.admin_username,
            node_identities=self.config.node_identities,
            accelerated_networking=bool(rec.get("accelerated_networking")),
            premium_storage=bool(rec.get("premium_io", True)),
            ephemeral_placement=ephemeral,
            encryption_at_host=nc.security.encryption_at_host if nc is not None and nc.security is not None else None,
            secure_boot=nc is not None and nc.secure_boot(), vtpm=nc is not None and nc.vtpm(),
            ultra_ssd=ultra_ssd_requested(claim),
        )
        nic = self.instances.create_nic(spec)
        vm = self.instances.create_vm(spec, str(nic.get("id") or ""))
        if cse is not None:  # the extension that runs the node bootstrapping API's command
            self.instances.create_cse(spec, cse)
        if self.config.aks_identifying_extension:
            self.instances.create_billing_extension(spec)
        return vm

    def _cleanup(self, name: str) -> None:
        """Remove what a failed launch left (the VM in Failed state, the NIC)."""
        with contextlib.suppress(clients.AzureAPIError):  # the NIC garbage collection removes what is left
            self.instances.delete_if_owned(name, self.config.cluster_name)

    def _launched(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
                  it: instancetype.InstanceType, offer: instancetype.Offering, vm: Mapping[str, Any]
                  ) -> nodeclaim.NodeClaim:
        md = claim.metadata
        annotations = dict(md.annotations)
        if nc is not None:
            annotations[labels.NODECLASS_HASH_AZURE] = nc.hash()
        labels_ = node_labels(self.config, claim, it, offer, nc)
        image = ((vm.get("properties") or {}).get("storageProfile") or {}).get("imageReference") or {}
        return dataclasses.replace(
            claim,
            metadata=dataclasses.replace(md, labels=labels_, annotations=annotations),
            status=dataclasses.replace(
                claim.status, provider_id=self.provider_id(str(vm.get("name"))),
                image_id=str(image.get("communityGalleryImageId") or image.get("id") or ""),
                capacity=dict(it.capacity), allocatable=dict(it.allocatable)),
        )

    def provider_id(self, vm_name: str) -> str:
        """``azure://`` and the VM's ARM resource ID."""
        return "azure://" + self.instances.vm_id(vm_name)

    def claim_of(self, vm: Mapping[str, Any]) -> nodeclaim.NodeClaim:
        """The NodeClaim ``vm`` stands for (see the module docstring)."""
        props = vm.get("properties") or {}
        tags = vm.get("tags") or {}
        size = str((props.get("hardwareProfile") or {}).get("vmSize") or "")
        zones = vm.get("zones") or []
        zone = f"{self.config.region}-{zones[0]}" if zones else ""
        ct = instances.CAPACITY_TYPE.get(str(props.get("priority") or "Regular"), labels.CAPACITY_TYPE_ON_DEMAND)
        ultra = bool((props.get("additionalCapabilities") or {}).get("ultraSSDEnabled"))
        labels_ = {labels.INSTANCE_TYPE: size, labels.ZONE: zone, labels.REGION: self.config.region,
                   labels.CAPACITY_TYPE: ct, labels.AZURE_SKU_STORAGE_ULTRA_SSD: "true" if ultra else "false",
                   LABEL_SCALESET_PRIORITY: "spot" if ct == labels.CAPACITY_TYPE_SPOT else "regular",
                   LABEL_PRIORITY: "spot" if ct == labels.CAPACITY_TYPE_SPOT else "regular"}
        if tags.get(instances.NODEPOOL_TAG):
            labels_[labels.NODEPOOL] = str(tags[instances.NODEPOOL_TAG])
        created = props.get("timeCreated")
        when = clock.parse_rfc3339(str(created)) if created else None
        ref = None
        if tags.get(instances.NODECLASS_TAG):
            ref = nodeclaim.NodeClassRef(group=labels.AZURE_GROUP, kind=aksnodeclass.AKS_KIND,
                                         name=str(tags[instances.NODECLASS_TAG]))
        image = ((props.get("storageProfile") or {}).get("imageReference") or {})
        return nodeclaim.NodeClaim(
            metadata=meta.ObjectMeta(name=str(tags.get(instances.NODECLAIM_TAG) or vm.get("name")),
                                     labels=labels_, creation_timestamp=when),
            spec=nodeclaim.NodeClaimSpec(node_class_ref=ref),
            status=nodeclaim.NodeClaimStatus(provider_id=self.provider_id(str(vm.get("name"))),
                                             image_id=str(image.get("communityGalleryImageId") or "")),
        )
