"""The launcher of ``PROVISION_MODE=aksmachineapi``: :class:`.launch.Launcher`'s offering order, capacity
fallback and unavailable-offerings cache, with one AKS machine (:mod:`.machines`) in place of a NIC and a VM.

The image is the size's shared image gallery image (``USE_SIG=true`` is required with this mode) sent as
``nodeImageVersion``; a machine that already exists for the NodeClaim (a launch repeated after a restart) is
adopted, a failed one deleted; a failed create deletes the machine (as Karpenter's Azure provider does).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from karpy.api import aksnodeclass, labels, nodeclaim
from karpy.cloudprovider import errors, instancetype
from karpy.cloudprovider.azure import clients, gallery, images, instances, instancetypes, launch, machines, offerings
from karpy.cloudprovider.fake import capacity


class MachineLauncher(launch.Launcher):
    """See the module docstring."""

    def __init__(self, vms: instances.Instances, config: launch.ClusterConfig,
                 unavailable: offerings.UnavailableOfferings, image_versions: gallery.ImageVersions,
                 records: Callable[[], dict[str, dict[str, Any]]], api: machines.MachinesClient,
                 latest: images.Resolver) -> None:
        super().__init__(vms, config, unavailable, image_versions, records)
        self.api = api
        self.latest = latest

    @staticmethod
    def _machine(resource_name: str) -> str:
        return machines.machine_name(resource_name.removeprefix("aks-"))

    def _existing(self, name: str) -> dict[str, Any] | None:
        try:
            return self.api.get(self._machine(name))
        except clients.NotFoundError:
            return None
        except clients.AzureAPIError as exc:
            raise errors.CreateError(f"looking for AKS machine {self._machine(name)}: {exc.message}",
                                     reason=exc.code or "AzureAPIError", retryable=exc.retryable) from exc

    def _adopt(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
               types: list[instancetype.InstanceType], vm: Mapping[str, Any]) -> nodeclaim.NodeClaim | None:
        if (vm.get("properties") or {}).get("provisioningState") == "Failed":
            self._cleanup("aks-" + claim.name)
            return None
        return super()._adopt(claim, nc, types, vm)

    def _launch(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
                cand: capacity.Candidate) -> dict[str, Any]:
        it, offer = cand.instance_type, cand.offering
        version = self.config.kubernetes_version or launch.DEFAULT_KUBERNETES_VERSION
        family = nc.image_family if nc is not None else launch.DEFAULT_IMAGE_FAMILY
        image = images.image_for(family, nc.image_version if nc is not None else None, it.labels, self.latest,
                                 trusted_launch=nc is not None and nc.trusted_launch(),
                                 fips=nc is not None and nc.fips(), kubernetes_version=version,
                                 sig_subscription=self.config.sig_subscription_id)
        if image is None:
            raise clients.AzureAPIError(f"no {family} image for {it.name}", code="ImageNotFound")
        os_disk = nc.os_disk_size_gb if nc is not None else instancetypes.DEFAULT_OS_DISK_GB
        rec = self.records().get(it.name, {})
        labels_ = launch.node_labels(self.config, claim, it, offer, nc)
        node = launch.node_bootstrap(self.config, claim, nc, it, labels_)
        tags = instances.tags(self.config.cluster_name, claim.metadata.labels.get(labels.NODEPOOL, ""), claim.name,
                              nc.name if nc is not None else "", nc.tags if nc is not None else None)
        body = machines.machine_body(
            claim=claim, nc=nc, it=it, offer=offer, image_id=image, node_labels=labels_, tags=tags,
            kubernetes_version=version, ephemeral=instances.ephemeral_placement(rec, os_disk) is not None,
            max_pods=node.max_pods, ultra_ssd=launch.ultra_ssd_requested(claim))
        machine = self.api.create(machines.machine_name(claim.name), body)
        if (machine.get("properties") or {}).get("provisioningState") == "Failed":
            err = ((machine.get("properties") or {}).get("status") or {}).get("provisioningError") or {}
            raise clients.AzureAPIError(str(err.get("message") or "AKS machine provisioning failed"),
                                        code=str(err.get("code") or "ProvisioningFailed"))
        return machine

    def _cleanup(self, name: str) -> None:
        with contextlib.suppress(clients.AzureAPIError):
            self.api.delete(self._machine(name))

    def _launched(self, claim: nodeclaim.NodeClaim, nc: aksnodeclass.AKSNodeClass | None,
                  it: instancetype.InstanceType, offer: instancetype.Offering, vm: Mapping[str, Any]
                  ) -> nodeclaim.NodeClaim:
        view = self.claim_of(vm)
        annotations = {**claim.metadata.annotations, **view.metadata.annotations}
        if nc is not None:
            annotations[labels.NODECLASS_HASH_AZURE] = nc.hash()
        md = dataclasses.replace(claim.metadata, labels=launch.node_labels(self.config, claim, it, offer, nc),
                                 annotations=annotations)
        return dataclasses.replace(claim, metadata=md, status=dataclasses.replace(
            claim.status, provider_id=view.status.provider_id, image_id=view.status.image_id,
            capacity=dict(it.capacity), allocatable=dict(it.allocatable)))

    def claim_of(self, vm: Mapping[str, Any]) -> nodeclaim.NodeClaim:
        return machines.claim_of(vm, self.config.region)
