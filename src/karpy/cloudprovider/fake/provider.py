"""The simulated cloud: a deterministic :class:`~karpy.cloudprovider.interface.CloudProvider`.

``karpy simulate`` and the integration tests launch nodes here instead of in EC2 or Azure. It keeps
the contract of :mod:`karpy.cloudprovider.interface` exactly, with these simulated behaviours:

* **Catalog.** :mod:`karpy.cloudprovider.fake.catalog_views`: a built-in catalog or the caller's list,
  per NodeClass kubelet setting (allocatable changes).
* **Launch.** :meth:`SimulatedCloud.create` filters offerings by the NodeClaim's requirements and
  resource requests (:func:`capacity.candidates`), picks the capacity type as Karpenter does
  (reserved, then spot, then on-demand, among those with capacity) and launches the cheapest
  offering with capacity, skipping exhausted ones as CreateFleet skips overrides. When every
  compatible offering is out it raises :class:`errors.InsufficientCapacityError` naming them all.
  With ``launch_failure_rate`` > 0 a launch fails at that rate with a retryable
  :class:`errors.CreateError` (reason ``"LaunchFailed"``).
* **Capacity.** Unlimited by default. :meth:`SimulatedCloud.set_capacity` bounds how many
  instances of one offering may run at once; :meth:`SimulatedCloud.mark_insufficient` (the scenario
  step ``insufficientCapacity: {instanceType, zone, capacityType, for: 10m}``) makes an offering
  unavailable until a time. :meth:`SimulatedCloud.get_instance_types` shows both as
  ``Offering.available = False``.
* **Identity.** Provider IDs have the real formats (see :mod:`karpy.cloudprovider.interface`). AWS
  instance IDs (``i-`` + 17 hex digits) and private DNS names come from the seeded ``rng``: the
  same seed and the same calls give the same IDs. Azure VMs are named ``aks-<nodeclaim>``, KWOK
  nodes ``<nodeclaim>``.
* **Ownership.** Every instance is tagged with its NodePool, NodeClaim and this cluster's ownership
  tag (AWS ``kubernetes.io/cluster/<cluster>=owned``, Azure ``karpenter.azure.com_cluster=<cluster>``,
  KWOK ``karpenter.sh_cluster_<cluster>=owned``). Owned means all of karpy's own tags: that ownership
  tag and the NodePool and NodeClass tags (an instance of a node group carries the cluster tag only).
  :meth:`get` and :meth:`list` see only owned instances; :meth:`delete` refuses others with
  :class:`errors.NotOwnedError`.
  :meth:`add_instance` puts in instances karpy did not launch (another cluster's, a hand-made VM).
* **Interruptions.** :meth:`interrupt` queues a message that :meth:`pending_interruptions` returns
  until :meth:`ack` (:mod:`karpy.cloudprovider.fake.interruptions`); a ``SpotInterruption`` reclaims
  the instance two minutes later, a ``StateChange`` terminates it at once.
* **Images and drift.** :mod:`karpy.cloudprovider.fake.images`: the image an instance launches with
  (:meth:`publish_image` announces new ones) and :meth:`is_drifted`'s ``NodeClassDrift``, ``AMIDrift``
  (AWS) and ``ImageDrift`` (Azure, KWOK).

Time only moves with the ``clock`` passed in; scheduled reclaims happen lazily, at their own time,
whenever the cloud is next called (or :meth:`settle` is). Nothing here does I/O.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from karpy import clock
from karpy.api import labels, nodeclaim, nodeclass, nodepool
from karpy.cloudprovider import commitments as commitments_mod
from karpy.cloudprovider import errors, instancetype, interface
from karpy.cloudprovider import reservations as reservations_mod
from karpy.cloudprovider.fake import billing as billing_mod
from karpy.cloudprovider.fake import capacity, catalog_views, interruptions
from karpy.cloudprovider.fake import identity as identity_mod
from karpy.cloudprovider.fake import images as images_mod
from karpy.cloudprovider.fake import reservations as fake_reservations

NodeClass = capacity.NodeClass
NodeClassLookup = Callable[[str], NodeClass | None]

FORMATS = ("aws", "azure", "kwok")
DEFAULT_REGIONS = {"aws": "us-east-1", "azure": "eastus", "kwok": "us-east-1"}


def provider_format_of(catalog: str | Sequence[instancetype.InstanceType]) -> str:
    """The provider-ID format a catalog implies: ``aws``, ``azure``, else ``kwok``."""
    if isinstance(catalog, str) and catalog in ("aws", "azure"):
        return catalog
    return "kwok"


class SimulatedCloud:
    """A deterministic in-memory cloud; see the module docstring for what it simulates."""

    name = "fake"

    def __init__(self, clock: clock.Clock, rng: random.Random, *,
                 catalog: str | Sequence[instancetype.InstanceType] = "aws",
                 region: str | None = None, zones: Sequence[str] | None = None,
                 cluster_name: str = "karpy", provider_format: str | None = None,
                 node_classes: NodeClassLookup | None = None, launch_failure_rate: float = 0.0,
                 subscription_id: str | None = None, resource_group: str | None = None,
                 commitments: commitments_mod.Commitments | None = None,
                 reservations: fake_reservations.SimulatedReservations | None = None, reserved_enis: int = 0,
                 volume_limits: Mapping[str, int] | None = None) -> None:
        """``catalog`` is a built-in catalog name or a list of instance types; ``zones`` keeps only
        offerings there; ``region`` defaults to the catalog's own (``us-east-1`` when it has none);
        ``provider_format`` (``aws``/``azure``/``kwok``) defaults to the catalog's (a list: ``kwok``);
        ``node_classes`` looks NodeClasses up by name (``None``: NodeClaims' refs are not checked);
        ``launch_failure_rate`` is the chance a launch fails with a retryable CreateError;
        ``commitments`` (RIs, Savings Plans, a discount) make offerings cost their marginal price and
        the bill what is actually paid (:mod:`karpy.cloudprovider.fake.billing`); ``reservations``: capacity
        reservations EC2NodeClasses may select (:mod:`karpy.cloudprovider.fake.reservations`);
        ``volume_limits``: CSI attach counts every type gets (a scenario's ``spec.cloud.volumeLimits``)."""
        self.clock = clock
        self.rng = rng
        self.provider_format = provider_format or provider_format_of(catalog)
        if self.provider_format not in FORMATS:
            raise ValueError(f"provider_format must be one of {', '.join(FORMATS)}, "
                             f"got {self.provider_format!r}")
        if not 0.0 <= launch_failure_rate <= 1.0:
            raise ValueError(f"launch_failure_rate must be within [0, 1], got {launch_failure_rate}")
        self.cluster_name = cluster_name
        self.launch_failure_rate = launch_failure_rate
        self.views = catalog_views.CatalogViews(catalog, zones, region, reserved_enis,  # RESERVED_ENIS: AWS max pods
                                                volume_limits)
        self._node_classes = node_classes
        self.node_class_readiness = catalog_views.NodeClassReadiness()
        self.region = region or ""
        digest = hashlib.sha256(cluster_name.encode()).hexdigest()
        self.subscription_id = subscription_id or (
            f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}")
        self.pools = capacity.CapacityPools()
        self.reservations = reservations or fake_reservations.SimulatedReservations()
        self._live = capacity.LiveInstances()
        self._history: list[capacity.Instance] = []
        self.queue = interruptions.Queue()
        self._manual = 0
        if not self.region:  # the catalog's own region, else the format's default
            first = next(iter(self.views.types(None)), None)
            self.region = (first.labels.get(labels.REGION) if first is not None else None) or \
                DEFAULT_REGIONS[self.provider_format]
        self.resource_group = resource_group or f"MC_{cluster_name}_{cluster_name}_{self.region}"
        self.images = images_mod.Images(self.provider_format, self.region)
        self.identity = identity_mod.Identity(self.provider_format, cluster_name, rng)
        self.identity.region, self.identity.subscription_id = self.region, self.subscription_id
        self.identity.resource_group = self.resource_group
        self._used_ids = self.identity.used_ids
        self.records = capacity.InstanceRecords(self.identity.owns)
        self.billing = billing_mod.Billing(commitments or commitments_mod.NONE, clock,
                                           lambda: [i for i in self._live.values() if self._owned(i)],
                                           self.views.on_demand_prices)

    # ------------------------------------------------------------------------------------------
    # CloudProvider

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        self.settle()
        nc = self._node_class(claim.spec.node_class_ref)
        spec = claim.spec
        listed: dict[str, instancetype.InstanceType] = {}
        if self.billing or self.reservations.for_node_class(nc, self.clock.now()):  # computed each time
            types: Sequence[instancetype.InstanceType] = self.views.types(nc)
            for req in spec.requirements:  # the usual case: the scheduler lists the options
                if req.key == labels.INSTANCE_TYPE and req.operator == "In":
                    index = self.views.index(nc)
                    types = [index[n] for n in sorted(set(req.values)) if n in index]
            types = self.reservations.add_offerings(types, nc, self.clock.now())
            listed = {it.name: it for it in types}
            cands = capacity.candidates(self.billing.price_types(types) if self.billing else types, spec.requirements,
                                        spec.resources_requests, self.region, self.views.defined_keys())
        else:
            cands = self.views.candidates(nc, spec.requirements, spec.resources_requests, self.region)
        cands, extra = self.views.ultra_ssd(cands, spec.requirements, self.provider_format, self.region)
        if not cands:
            raise errors.CreateError(
                f"no offering of any instance type is compatible with NodeClaim {claim.name}'s "
                f"requirements and resource requests", reason="NoCompatibleInstanceTypes")
        chosen, failed = capacity.choose(cands, self.pools, self.clock.now())
        if chosen is None:
            raise errors.InsufficientCapacityError(failed)
        if self.billing:  # chosen at its marginal price; the instance keeps its list price
            it = listed[chosen.instance_type.name]
            chosen = capacity.Candidate(it, next(o for o in it.offerings if (o.zone, o.capacity_type, o.reservation_id)
                                                 == (chosen.offering.zone, chosen.offering.capacity_type,
                                                     chosen.offering.reservation_id)))
        if self.launch_failure_rate > 0 and self.rng.random() < self.launch_failure_rate:
            raise errors.CreateError(f"simulated launch failure for NodeClaim {claim.name}",
                                     reason="LaunchFailed", retryable=True)
        inst = self._launch(claim, chosen, nc, extra)
        md = claim.metadata
        annotations = dict(md.annotations)
        if nc is not None:
            annotations[images_mod.hash_annotation(nc)] = images_mod.nodeclass_hash(nc)
        return dataclasses.replace(
            claim,
            metadata=dataclasses.replace(md, labels={**md.labels, **inst.labels}, annotations=annotations),
            status=dataclasses.replace(claim.status, provider_id=inst.provider_id, image_id=inst.image_id,
                                       capacity=dict(inst.capacity), allocatable=dict(inst.allocatable)),
        )

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        self.settle()
        pid = claim.status.provider_id
        inst = self._live.get(pid) if pid else None
        if inst is None:
            raise errors.NodeClaimNotFoundError(
                f"instance {pid or '(no provider id)'} of NodeClaim {claim.name} not found")
        if not self._owned(inst):
            raise errors.NotOwnedError(
                f"instance {pid} is not tagged as owned by cluster {self.cluster_name}; "
                "refusing to terminate it")
        self._terminate(inst, self.clock.now())

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        self.settle()
        inst = self._live.get(provider_id)
        if inst is None or not self._owned(inst):
            raise errors.NodeClaimNotFoundError(f"instance {provider_id} not found")
        return self.records.claim(inst)

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        self.settle()
        return self._live.listing(self._owned, self.records.claim)

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        self.settle()
        ref = pool.node_class_ref if pool is not None else None
        nc = self._lookup(ref.name) if ref is not None else None
        view = self.reservations.add_offerings(self.views.view(nc, self.pools.unavailable(self.clock.now())), nc,
                                               self.clock.now())
        return self.billing.price_types(view) if self.billing else view

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        """Drift reason of ``claim``'s instance (``""`` when none); NodeClaimNotFoundError when gone."""
        self.settle()
        inst = self._live.get(claim.status.provider_id)
        if inst is None or not self._owned(inst):
            raise errors.NodeClaimNotFoundError(f"instance {claim.status.provider_id} not found")
        ref = claim.spec.node_class_ref
        return self.images.drift(claim, inst, self._lookup(ref.name) if ref is not None else None)

    def repair_policies(self) -> builtins.list[interface.RepairPolicy]:
        """Karpenter's node auto-repair defaults: Ready False or Unknown for 30 minutes."""
        return [interface.RepairPolicy("Ready", "False", 30 * 60.0),
                interface.RepairPolicy("Ready", "Unknown", 30 * 60.0)]

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        """The simulated cloud resolves every EC2NodeClass and AKSNodeClass: keeps their status, Ready."""
        return self.reservations.status(node_class, self.node_class_readiness.resolve(node_class), self.clock.now())

    def set_node_class_ready(self, kind: str, name: str, ready: bool, reason: str = "SubnetsNotFound",
                             message: str = "no subnet matches spec.subnetSelectorTerms") -> None:
        """Make :meth:`resolve_node_class` report NodeClass ``kind/name`` not Ready (or Ready again):
        what a real cloud says when a selector matches nothing."""
        self.node_class_readiness.set_ready(kind, name, ready, reason, message)

    # ------------------------------------------------------------------------------------------
    # Capacity and images (scenario steps)

    def set_capacity(self, instance_type: str, zone: str, capacity_type: str, count: int | None) -> None:
        """At most ``count`` instances of this offering may run at once (``None``: unlimited)."""
        self.pools.set_capacity((instance_type, zone, capacity_type), count)

    def mark_insufficient(self, instance_type: str, zone: str, capacity_type: str, until: float) -> None:
        """The offering has no capacity until ``until`` (seconds since the epoch)."""
        self.pools.mark_insufficient((instance_type, zone, capacity_type), until)

    def publish_image(self, image_id: str, node_class: str = "") -> None:
        """A new image is released for ``node_class`` (``""``: every NodeClass without its own).

        NodeClaims launched afterwards get it; running instances with an older image drift unless
        their NodeClass pins an image (EC2NodeClass ``status.amis``, AKSNodeClass ``imageVersion``).
        """
        self.images.publish(image_id, node_class)

    # ------------------------------------------------------------------------------------------
    # Interruptions (interface.InterruptionQueue)

    def interrupt(self, provider_id: str, kind: str = "SpotInterruption", *,
                  detail: str = "") -> interface.InterruptionMessage:
        """Send an interruption notice for a running instance; see the module docstring.

        Raises :class:`errors.NodeClaimNotFoundError` for an unknown or terminated instance and
        ``ValueError`` for an unknown kind or a spot interruption of a non-spot instance.
        """
        self.settle()
        if kind not in interface.INTERRUPTION_KINDS:
            raise ValueError(f"interruption kind must be one of {', '.join(interface.INTERRUPTION_KINDS)}, "
                             f"got {kind!r}")
        inst = self._live.get(provider_id)
        if inst is None:
            raise errors.NodeClaimNotFoundError(f"instance {provider_id} not found")
        now = self.clock.now()
        if kind == "SpotInterruption":
            if inst.capacity_type != labels.CAPACITY_TYPE_SPOT:
                raise ValueError(f"instance {provider_id} is {inst.capacity_type}, not spot")
            if inst.reclaim_at is None:
                when = now + interface.SPOT_INTERRUPTION_WARNING_SECONDS
                self._live[provider_id] = dataclasses.replace(inst, reclaim_at=when)
                self.queue.schedule_reclaim(provider_id, when)
            return self._send(provider_id, kind, now, detail)
        if kind == "StateChange":
            msg = self._send(provider_id, kind, now, detail or "terminated")
            self._terminate(inst, now)
            return msg
        return self._send(provider_id, kind, now, detail)

    def expiring_reservations(self, reservation_ids: Collection[str]) -> set[str]:
        """Those of ``reservation_ids`` that are expiring capacity blocks (:mod:`karpy.cloudprovider.reservations`)."""
        return self.reservations.expiring(reservation_ids, self.clock.now())

    def pending_interruptions(self) -> builtins.list[interface.InterruptionMessage]:
        self.settle()
        return self.queue.pending()

    def ack(self, message: interface.InterruptionMessage) -> None:
        self.queue.ack(message)

    def settle(self) -> None:
        """Carry out every scheduled spot reclaim due by now, each at its own time."""
        now = self.clock.now()
        if self.billing:
            self.billing.tick()
        for when, pid in sorted([*self.queue.due(now), *self.reservations.reclaims(now)]):
            inst = self._live.get(pid)
            if inst is None:
                continue  # deleted by karpy before the reclaim
            self._terminate(inst, when)
            self._send(pid, "StateChange", when, "terminated")

    # ------------------------------------------------------------------------------------------
    # Reports and test hooks

    def instances(self) -> builtins.list[capacity.Instance]:
        """Every instance ever launched or added, terminated ones included, by launch time."""
        self.settle()
        out = [*self._history, *self._live.values()]
        out.sort(key=lambda i: (i.launch_time, i.instance_id))
        return out

    def instance(self, provider_id: str) -> capacity.Instance | None:
        """The running instance with ``provider_id``, if any (owned or not)."""
        self.settle()
        return self._live.get(provider_id)

    def cost_per_hour(self) -> float:
        """Sum of the hourly prices of this cluster's running instances (with commitments: what is paid,
        RI fees and Savings Plan commitments included)."""
        self.settle()
        if self.billing:
            return self.billing.cost_per_hour()
        return sum(i.price for i in self._live.values() if self._owned(i))

    def billed_price(self, provider_id: str) -> float | None:
        """What the running instance ``provider_id`` adds to the bill per hour under the customer's
        commitments (:class:`interface.Billing`); ``None`` without commitments (its offering price holds)."""
        if not self.billing:
            return None
        self.settle()
        return self.billing.billed_price(provider_id)

    def accrued_cost(self) -> float:
        """Dollars spent so far on this cluster's instances, running and terminated (with commitments:
        what was paid)."""
        self.settle()
        if self.billing:
            return self.billing.accrued()
        now = self.clock.now()
        return sum(i.cost(now) for i in [*self._history, *self._live.values()] if self._owned(i))

    def add_instance(self, instance_type: str, zone: str, capacity_type: str = labels.CAPACITY_TYPE_ON_DEMAND,
                     *, tags: dict[str, str] | None = None, nodeclaim_name: str = "") -> capacity.Instance:
        """Put in a running instance karpy did not launch, with exactly ``tags`` (default: none).

        Pass this cluster's ownership tag (:meth:`ownership_tag`) to simulate a leaked instance
        that garbage collection should find. Raises ``KeyError`` for an unknown instance type.
        """
        self.settle()
        it = self.views.index(None)[instance_type]
        price = next((o.price for o in it.offerings
                      if o.zone == zone and o.capacity_type == capacity_type), 0.0)
        offer = instancetype.Offering(zone, capacity_type, price)
        self._manual += 1
        name = nodeclaim_name or f"manual-{self._manual}"
        return self._new_instance(it, offer, name=name, claim_name=nodeclaim_name, tags=dict(tags or {}),
                                  nodepool_name="", nc=None, ref=None)

    def adopt(self, provider_id: str, instance_type: str, zone: str, capacity_type: str, *,
              nodepool_name: str, nodeclaim_name: str, node_class: str = "",
              node_class_ref: nodeclaim.NodeClassRef | None = None, launch_time: float | None = None,
              image_id: str = "", hostname: str = "") -> capacity.Instance:
        """Take over a running instance that Karpenter or karpy launched before (``karpy whatif``).

        The instance keeps ``provider_id`` and gets karpy's own tags (NodePool, NodeClaim, NodeClass and
        this cluster's ownership tag), so garbage collection treats it as karpy's and never as unknown.
        Raises ``KeyError`` for an instance type the catalog does not know and ``ValueError`` for a
        provider ID already running.
        """
        self.settle()
        if provider_id in self._live:
            raise ValueError(f"an instance with provider ID {provider_id} is already running")
        it = self.views.index(None)[instance_type]
        price = next((o.price for o in it.offerings if o.zone == zone and o.capacity_type == capacity_type),
                     None)
        if price is None:
            price = min((o.price for o in it.offerings if o.capacity_type == capacity_type), default=0.0)
        offer = instancetype.Offering(zone, capacity_type, price)
        tags = self.identity.tags(nodepool_name, nodeclaim_name,
                                  node_class or (node_class_ref.name if node_class_ref is not None else ""))
        node_labels = dict(it.labels)
        node_labels.update({labels.INSTANCE_TYPE: it.name, labels.ZONE: zone, labels.REGION: self.region,
                            labels.CAPACITY_TYPE: capacity_type, labels.NODEPOOL: nodepool_name})
        iid = provider_id.rstrip("/").rsplit("/", 1)[-1]
        inst = capacity.Instance(
            instance_id=iid, provider_id=provider_id, hostname=hostname or iid, instance_type=it.name,
            zone=zone, capacity_type=capacity_type, price=offer.price,
            launch_time=self.clock.now() if launch_time is None else launch_time,
            image_id=image_id or self.images.image_for(self._lookup(node_class) if node_class else None, node_labels,
                                                 node_class), tags=tags, labels=node_labels,
            capacity=dict(it.capacity), allocatable=dict(it.allocatable), nodeclaim_name=nodeclaim_name,
            node_class=node_class, node_class_ref=node_class_ref)
        self._live[provider_id] = inst
        self.billing.changed()
        self._used_ids.add(iid)
        self.pools.launched(inst.offering)
        return inst

    def ownership_tag(self) -> tuple[str, str]:
        """The tag ``(key, value)`` marking an instance as launched for this cluster."""
        return self.identity.ownership_tag()

    # ------------------------------------------------------------------------------------------
    # Internals

    def _owned(self, inst: capacity.Instance) -> bool:
        """karpy's own tags (:meth:`identity.Identity.owns`): a node group's instance is never karpy's."""
        return self.records.owned(inst)

    def nodeclass_tag_key(self) -> str:
        """The tag naming an instance's NodeClass (AWS ``karpenter.k8s.aws/ec2nodeclass``)."""
        return self.identity.nodeclass_tag_key()

    def karpy_tags(self, nodepool: str, nodeclaim: str, node_class: str = "default") -> dict[str, str]:
        """Every tag karpy puts on an instance it launches (to simulate a leaked one)."""
        return self.identity.tags(nodepool, nodeclaim, node_class, eks=False)

    def _send(self, provider_id: str, kind: str, when: float, detail: str) -> interface.InterruptionMessage:
        return self.queue.send(provider_id, kind, when, detail)

    def _terminate(self, inst: capacity.Instance, when: float) -> None:
        self.billing.changed()
        del self._live[inst.provider_id]
        self.records.forget(inst.provider_id)
        self.pools.released(inst.offering)
        self.reservations.terminated(inst.provider_id)
        self._history.append(dataclasses.replace(inst, state=capacity.TERMINATED, terminated_at=when))

    def _lookup(self, name: str) -> NodeClass | None:
        return self._node_classes(name) if self._node_classes is not None else None

    def _node_class(self, ref: nodeclaim.NodeClassRef | None) -> NodeClass | None:
        """The NodeClass a NodeClaim refers to; NodeClassNotReadyError when missing or not Ready."""
        if ref is None or self._node_classes is None:
            return None
        nc = self._node_classes(ref.name)
        if nc is None:
            raise errors.NodeClassNotReadyError(f"{ref.kind} {ref.name} not found")
        for c in nc.status.conditions:
            if c.type == "Ready" and not c.is_true:
                raise errors.NodeClassNotReadyError(
                    f"{ref.kind} {ref.name} is not ready: {c.reason or c.status}")
        return nc

    def _launch(self, claim: nodeclaim.NodeClaim, chosen: capacity.Candidate, nc: NodeClass | None,
                extra_labels: Mapping[str, str]) -> capacity.Instance:
        nodepool_name = claim.metadata.labels.get(labels.NODEPOOL, "")
        ref = claim.spec.node_class_ref
        tags = self.identity.tags(nodepool_name, claim.name,
                                  nc.name if nc is not None else ref.name if ref is not None else "",
                                  base=nc.tags if nc is not None else None,
                                  eks=isinstance(nc, nodeclass.EC2NodeClass))
        return self._new_instance(chosen.instance_type, chosen.offering, name=claim.name,
                                  claim_name=claim.name, tags=tags, nodepool_name=nodepool_name, nc=nc,
                                  ref=claim.spec.node_class_ref, extra_labels=extra_labels)

    def _new_instance(self, it: instancetype.InstanceType, offer: instancetype.Offering, *, name: str, claim_name: str,
                      tags: dict[str, str], nodepool_name: str, nc: NodeClass | None, ref: nodeclaim.NodeClassRef |
                      None, extra_labels: Mapping[str, str] | None = None) -> capacity.Instance:
        """Start an instance; ``name`` names Azure VMs and KWOK nodes (AWS ids are random)."""
        iid, pid, hostname = self.identity.names(offer.zone, name)
        if pid in self._live:
            raise errors.CreateError(f"an instance named {iid} is already running", reason="AlreadyExists")
        node_labels = dict(it.labels)
        node_labels.setdefault(labels.ARCH, "amd64")
        node_labels.setdefault(labels.OS, "linux")
        node_labels.update({labels.INSTANCE_TYPE: it.name, labels.ZONE: offer.zone,
                            labels.REGION: self.region, labels.CAPACITY_TYPE: offer.capacity_type,
                            **reservations_mod.reserved_labels(offer), **(extra_labels or {})})
        if nodepool_name:
            node_labels[labels.NODEPOOL] = nodepool_name
        inst = capacity.Instance(
            instance_id=iid, provider_id=pid, hostname=hostname, instance_type=it.name, zone=offer.zone,
            capacity_type=offer.capacity_type, price=offer.price, launch_time=self.clock.now(),
            image_id=self.images.image_for(nc, node_labels),
            tags=tags, labels=node_labels, capacity=dict(it.capacity), allocatable=dict(it.allocatable),
            nodeclaim_name=claim_name, node_class=nc.name if nc is not None else "", node_class_ref=ref,
        )
        self._live[pid] = inst
        self.billing.changed()
        self._used_ids.add(iid)
        self.pools.launched(inst.offering)
        self.reservations.launched(pid, offer)
        return inst
