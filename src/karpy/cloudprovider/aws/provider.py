"""karpy's AWS cloud provider: EC2 through boto3, with Karpenter's AWS provider behaviour.

:class:`AWSCloudProvider` implements :class:`karpy.cloudprovider.interface.CloudProvider` (and the
``InterruptionQueue`` when an SQS queue is configured). What it does beyond the contract's text:

* **NodeClasses** are read from the cluster (``EC2NodeClass`` by the claim's / pool's
  ``nodeClassRef``) and resolved by :class:`karpy.cloudprovider.aws.nodeclasses.Resolver`; a
  NodeClass whose resolution is not Ready (or whose status says Ready=False) raises
  :class:`errors.NodeClassNotReadyError`.
* **Instance types** come from the live catalog of the region
  (:class:`karpy.cloudprovider.aws.typecatalog.LiveCatalog`), with the NodeClass's kubelet settings,
  root volume size, AMI family (Windows) and ``instanceStorePolicy``, only in the zones of its subnets,
  only types some resolved AMI can run, and offerings in the insufficient-capacity cache marked
  unavailable; ``reserved_enis`` (``RESERVED_ENIS``) lowers their ENI-limited max pods, ``isolated_vpc``
  (``ISOLATED_VPC``) keeps the Pricing API uncalled (:mod:`.pricing`).
* **Launch settings**: the cluster DNS address (:attr:`AWSCloudProvider.cluster_dns`; IPv6 makes an
  IPv6 cluster), ``ipPrefixCount``, ``networkInterfaces``, ``connectionTracking``, ``cpuOptions``
  and the resolved placement group (and a partition group's partition) go into the launch template,
  ``context`` into CreateFleet; launched nodes get the labels of :func:`.instances.launch_labels`.
* **Create**: the claim's compatible offerings cheapest first; spot when allowed and offered, else
  on-demand; at most :data:`MAX_INSTANCE_TYPES` types; per zone the subnet with the most free IPs;
  one launch template per (image, max pods) with the family's user data; one CreateFleet (batched
  with identical ones by :class:`karpy.cloudprovider.aws.fleet.Fleet`); offerings that failed for
  capacity go to the cache and the launch is retried with what remains (up to
  :data:`LAUNCH_ATTEMPTS` CreateFleet calls).
* **Ownership**: instances are tagged ``karpenter.sh/nodepool``, ``karpenter.sh/nodeclaim``,
  ``karpenter.k8s.aws/ec2nodeclass``, ``eks:eks-cluster-name=<cluster>`` and
  ``kubernetes.io/cluster/<cluster>=owned`` (plus the NodeClass's tags); ``get``, ``list``, ``delete``
  and ``is_drifted`` consider only the instances :func:`.instances.owned` says are this cluster's.
* **Launch templates** unused for an hour are cleaned up during :meth:`list` (at most every ten
  minutes).

Thread-safe: concurrent ``create`` calls are expected (the real-time driver launches in a pool).
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy.api import capacityreservation as cr
from karpy.api import labels, nodeclaim, nodeclass, nodepool
from karpy.cloudprovider import errors, instancetype, interface, kubelet_overrides
from karpy.cloudprovider import reservations as reservations_mod
from karpy.cloudprovider.aws import (
    amis,
    fleet,
    instances,
    instancetypes,
    launchtemplates,
    nodeclasses,
    pricing,
    selectors,
    session,
    typecatalog,
    unavailable,
    userdata,
)
from karpy.cloudprovider.aws import reservations as aws_reservations
from karpy.cloudprovider.fake import capacity
from karpy.kube import errors as kube_errors
from karpy.kube import interface as kube_interface

log = logging.getLogger("karpy.cloudprovider.aws")

MAX_INSTANCE_TYPES = 60
LAUNCH_ATTEMPTS = 3
CLEANUP_INTERVAL = 600.0
TAG_NODEPOOL = instances.TAG_NODEPOOL
TAG_NODECLAIM = instances.TAG_NODECLAIM
TAG_NODECLASS = instances.TAG_NODECLASS
TAG_CLUSTER = instances.TAG_CLUSTER
LIVE_STATES = instances.LIVE_STATES
instance_id_of = instances.instance_id_of


class AWSCloudProvider:
    """See the module docstring."""

    name = "aws"

    def __init__(self, sess: session.Session, clock: clock_mod.Clock, cluster: kube_interface.Cluster, *,
                 cluster_name: str, kubernetes_version: str, cluster_endpoint: str = "", ca_bundle: str = "",
                 vm_memory_overhead_percent: float = 0.075, queue: interface.InterruptionQueue | None = None,
                 reserved_capacity: bool = True, cluster_dns: str = "", reserved_enis: int = 0,
                 isolated_vpc: bool = False) -> None:
        self.session = sess
        self.clock = clock
        self.cluster = cluster
        self.cluster_name = cluster_name
        self.region = sess.region
        self.cluster_endpoint = cluster_endpoint
        self.ca_bundle = ca_bundle
        self.kubernetes_version = kubernetes_version
        self.cluster_dns = cluster_dns
        """kube-dns's address; an IPv6 one makes the cluster IPv6 (launch templates, user data)."""
        self.queue = queue
        self.ice = unavailable.UnavailableOfferings(clock)
        self.prices = pricing.Prices(sess, clock, isolated_vpc=isolated_vpc)
        self.catalog = typecatalog.LiveCatalog(sess, clock, self.prices, reserved_enis=reserved_enis,
                                               vm_memory_overhead_percent=vm_memory_overhead_percent)
        self.reservations = aws_reservations.Reservations(sess.ec2, clock, enabled=reserved_capacity)
        self.resolver = nodeclasses.Resolver(sess, clock, cluster_name=cluster_name,
                                             kubernetes_version=kubernetes_version, reservations=self.reservations,
                                             isolated_vpc=isolated_vpc)
        self.templates = launchtemplates.LaunchTemplates(sess.ec2, cluster_name, clock)
        self.fleet = fleet.Fleet(sess.ec2, self.ice)
        self.on_user_data: Callable[[str, int], None] | None = None
        """Told (EC2NodeClass, bytes) of each user data rendered (``karpenter_ec2nodeclasses_userdata_bytes``)."""
        self._lock = threading.Lock()
        self._launch_times: dict[str, float] = {}
        self._parsed: dict[tuple[str, str], nodeclass.EC2NodeClass] = {}
        self._next_cleanup = clock.now() + CLEANUP_INTERVAL

    # ------------------------------------------------------------------------- NodeClasses

    def _node_class(self, name: str) -> nodeclass.EC2NodeClass:
        try:
            obj = self.cluster.get(nodeclass.EC2_KIND, name)
        except kube_errors.NotFound:
            raise errors.NodeClassNotReadyError(f"EC2NodeClass {name} not found") from None
        key = (name, str((obj.get("metadata") or {}).get("resourceVersion") or ""))
        with self._lock:
            nc = self._parsed.get(key)
        if nc is None or not key[1]:
            nc = nodeclass.EC2NodeClass.from_manifest(obj)
            with self._lock:
                if len(self._parsed) > 256:
                    self._parsed.clear()
                self._parsed[key] = nc
        for c in nc.status.conditions:
            if c.type == "Ready" and not c.is_true:
                raise errors.NodeClassNotReadyError(f"EC2NodeClass {name} is not ready: {c.reason or c.status}")
        return nc

    def _resolved(self, nc: nodeclass.EC2NodeClass) -> nodeclasses.Resolved:
        res = self.resolver.resolve(nc)
        if not res.ready:
            raise errors.NodeClassNotReadyError(f"EC2NodeClass {nc.name} is not ready: {res.message}")
        return res

    def report_metrics_to(self, metrics: Any) -> None:
        """Feed Karpenter's AWS metrics of ``metrics`` (:class:`karpy.observability.metrics.Metrics`): the
        CreateFleet batcher's batch sizes and windows, and each EC2NodeClass's user data size."""
        def on_batch(size: int, seconds: float) -> None:
            metrics.batcher_batch_size.labels("create_fleet").observe(size)
            metrics.batcher_batch_time.labels("create_fleet").observe(max(0.0, seconds))

        self.fleet.on_batch = on_batch
        self.on_user_data = lambda name, size: metrics.ec2nodeclass_userdata_bytes.labels(name).set(size)

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        return self.resolver.status(dict(node_class))

    # ---------------------------------------------------------------------- instance types

    def _types(self, nc: nodeclass.EC2NodeClass | None, res: nodeclasses.Resolved | None,
               names: frozenset[str] | None = None) -> builtins.list[instancetype.InstanceType]:
        """The NodeClass's instance types (only ``names`` when given), AMI-compatible, availability applied."""
        kubelet = nc.kubelet.to_dict() if nc is not None and nc.kubelet is not None else None
        zones = {s.zone for s in res.subnets} if res is not None else None
        storage = nodeclass.root_volume_size(nc) if nc is not None else None
        types = self.catalog.instance_types(
            kubelet=kubelet_overrides.kubelet_config(kubelet), zones=zones, ephemeral_storage=storage,
            family=nc.resolved_ami_family if nc is not None else None,
            instance_store_policy=nc.instance_store_policy if nc is not None else None,
            efa_only=instancetypes.efa_only_interfaces(nc.network_interfaces) if nc is not None else None,
            unavailable=self.ice.snapshot(), names=names)
        if res is not None and res.images:
            types = [t for t in types if amis.image_for(res.images, t.labels) is not None]
        if res is not None and res.reservations:
            types = reservations_mod.with_reserved_offerings(types, res.reservations, self.reservations.availability,
                                                             self.clock.now())
        return instances.with_placement_group(types, res.placement_group) if res is not None else types

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        ref = pool.node_class_ref if pool is not None else None
        if ref is None:
            return self._types(None, None)
        nc = self._node_class(ref.name)
        return self._types(nc, self._resolved(nc))

    # ------------------------------------------------------------------------------ create

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        ref = claim.spec.node_class_ref
        if ref is None:
            raise errors.CreateError(f"NodeClaim {claim.name} has no nodeClassRef", reason="NodeClassNotFound")
        nc = self._node_class(ref.name)
        res = self._resolved(nc)
        tried: builtins.list[errors.OfferingKey] = []
        names: frozenset[str] | None = None
        for req in claim.spec.requirements:  # the usual case: the scheduler lists the options
            if req.key == labels.INSTANCE_TYPE and req.operator == "In":
                names = frozenset(req.values) if names is None else names & frozenset(req.values)
        for _ in range(LAUNCH_ATTEMPTS):
            types = self._types(nc, res, names)
            cands = capacity.candidates(types, claim.spec.requirements, claim.spec.resources_requests, self.region,
                                        self.catalog.defined_keys())
            if not cands:
                out_now = self._all_out(types, claim)
                if tried or out_now:
                    raise errors.InsufficientCapacityError(tried or out_now)
                raise errors.CreateError(
                    f"no offering of any instance type is compatible with NodeClaim {claim.name}'s requirements "
                    "and resource requests", reason="NoCompatibleInstanceTypes")
            request, by_type, reserved = self._request(claim, nc, res, cands)
            try:
                launched = self.fleet.launch(request, {TAG_NODECLAIM: claim.name})
            except errors.InsufficientCapacityError as exc:
                tried.extend(exc.offerings)
                if request.capacity_type == labels.CAPACITY_TYPE_RESERVED:  # those reservations are full
                    self.reservations.availability.unavailable(
                        reserved[(t, z)] for t, z, _ in exc.offerings if (t, z) in reserved)
                continue
            if launched.capacity_type == labels.CAPACITY_TYPE_RESERVED:
                rid = reserved.get((launched.instance_type, launched.zone), "")
                self.reservations.availability.launched(rid)
                return self._launched(claim, nc, launched, by_type[launched.instance_type], rid)
            return self._launched(claim, nc, launched, by_type[launched.instance_type])
        raise errors.InsufficientCapacityError(tried)

    def _all_out(self, types: Sequence[instancetype.InstanceType],
                 claim: nodeclaim.NodeClaim) -> builtins.list[errors.OfferingKey]:
        """Offerings compatible with the claim that are only unavailable because of the cache."""
        everything = [t.with_offerings(tuple(dataclasses.replace(o, available=True) for o in t.offerings))
                      for t in types]
        cands = capacity.candidates(everything, claim.spec.requirements, claim.spec.resources_requests, self.region,
                                    self.catalog.defined_keys())
        return [(c.instance_type.name, c.offering.zone, c.offering.capacity_type) for c in cands]

    def _request(self, claim: nodeclaim.NodeClaim, nc: nodeclass.EC2NodeClass, res: nodeclasses.Resolved,
                 cands: Sequence[capacity.Candidate]
                 ) -> tuple[fleet.Request, dict[str, instancetype.InstanceType], dict[tuple[str, str], str]]:
        """The CreateFleet of the preferred capacity type (reserved, spot, on-demand: Karpenter's order), the
        types by name and, for a reserved launch, each (type, zone)'s reservation id."""
        reserved = self._reserved(cands)
        spot = [c for c in cands if c.offering.capacity_type == labels.CAPACITY_TYPE_SPOT]
        chosen = reserved or spot or [c for c in cands if c.offering.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND]
        if not chosen:
            chosen = list(cands)
        capacity_type = chosen[0].offering.capacity_type
        type_order: builtins.list[str] = []
        for c in chosen:  # cheapest first
            if c.instance_type.name not in type_order:
                type_order.append(c.instance_type.name)
        keep = set(type_order[:MAX_INSTANCE_TYPES])
        subnets = selectors.subnet_per_zone(res.subnets)
        by_type = {c.instance_type.name: c.instance_type for c in chosen}
        groups: dict[tuple[str, int, str], builtins.list[fleet.Override]] = {}
        for c in chosen:
            it = c.instance_type
            subnet = subnets.get(c.offering.zone)
            if it.name not in keep or subnet is None:
                continue
            image = amis.image_for(res.images, it.labels)
            if image is None:
                continue
            pods = it.capacity.get("pods", 0) // 1000
            groups.setdefault((image.id, pods, c.offering.reservation_id), []).append(
                fleet.Override(it.name, c.offering.zone, subnet.id, c.offering.price, image.id))
        templates = []
        for (image_id, pods, rid), overrides in sorted(groups.items()):  # a reserved launch: one per reservation
            templates.append((self._template(claim, nc, res, image_id, pods, self.reservations.get(rid)),
                              tuple(overrides)))
        tags = {**dict(nc.tags), TAG_NODEPOOL: claim.metadata.labels.get(labels.NODEPOOL, ""),
                TAG_NODECLASS: nc.name, TAG_CLUSTER: self.cluster_name,
                f"kubernetes.io/cluster/{self.cluster_name}": "owned"}
        target = aws_reservations.fleet_capacity_type(chosen[0].offering.reservation_type) if reserved else ""
        ids = {(c.instance_type.name, c.offering.zone): c.offering.reservation_id for c in reserved}
        return fleet.Request(capacity_type, tuple(templates), tags, target, context=nc.context), by_type, ids

    def _reserved(self, cands: Sequence[capacity.Candidate]) -> builtins.list[capacity.Candidate]:
        """The reserved candidates one CreateFleet can launch: one reservation type (default before
        capacity-block), one reservation per (type, zone), cheapest first."""
        mine = [c for c in cands if c.offering.capacity_type == labels.CAPACITY_TYPE_RESERVED]
        if not mine:
            return []
        kind = aws_reservations.one_partition([c.offering.reservation_type for c in mine])
        out: dict[tuple[str, str], capacity.Candidate] = {}
        for c in mine:
            if c.offering.reservation_type == kind:
                out.setdefault((c.instance_type.name, c.offering.zone), c)
        return list(out.values())

    def _template(self, claim: nodeclaim.NodeClaim, nc: nodeclass.EC2NodeClass, res: nodeclasses.Resolved,
                  image_id: str, pods: int, reservation: cr.Reservation | None = None) -> str:
        family = nc.resolved_ami_family or "AL2023"
        taints = [t.to_dict() for t in (*claim.spec.taints, *claim.spec.startup_taints)]
        node_labels = {k: v for k, v in claim.metadata.labels.items() if not k.startswith("kubernetes.io/")}
        opts = userdata.Options(
            cluster_name=self.cluster_name, cluster_endpoint=self.cluster_endpoint, ca_bundle=self.ca_bundle,
            labels=node_labels, taints=taints, kubelet=nc.kubelet,
            max_pods=nc.kubelet.max_pods if nc.kubelet is not None and nc.kubelet.max_pods else pods,
            custom=nc.user_data, cluster_dns=(self.cluster_dns,) if self.cluster_dns else (),
            instance_store_policy=nc.instance_store_policy)
        tags = {**dict(nc.tags), TAG_NODECLASS: nc.name, TAG_CLUSTER: self.cluster_name,
                TAG_NODEPOOL: claim.metadata.labels.get(labels.NODEPOOL, "")}
        rendered = userdata.render(family, opts)
        if self.on_user_data is not None:
            self.on_user_data(nc.name, len(rendered.encode()))
        config = launchtemplates.Config(
            node_class=nc.name, image_id=image_id, user_data=userdata.encode(rendered),
            instance_profile=res.instance_profile, security_group_ids=tuple(g.id for g in res.security_groups),
            block_device_mappings=nc.block_device_mappings, metadata_options=nc.metadata_options,
            detailed_monitoring=bool(nc.detailed_monitoring),
            associate_public_ip_address=nc.associate_public_ip_address, tags=tags, ami_family=family,
            reservation_fields=aws_reservations.launch_template_fields(reservation, self.reservations.enabled),
            ipv6=":" in self.cluster_dns, placement_group_id=res.placement_group.id if res.placement_group else "",
            placement_group_partition=instances.partition_of(res.placement_group, claim.spec.requirements),
            **launchtemplates.options_of(nc))
        return self.templates.ensure(config)

    def _launched(self, claim: nodeclaim.NodeClaim, nc: nodeclass.EC2NodeClass, inst: fleet.Launched,
                  it: instancetype.InstanceType, reservation_id: str = "") -> nodeclaim.NodeClaim:
        with self._lock:
            self._launch_times[inst.instance_id] = self.clock.now()
        md = claim.metadata
        res = self._resolved(nc)
        partition = instances.partition_of(res.placement_group, claim.spec.requirements)
        if not partition and res.placement_group is not None and \
                res.placement_group.strategy == instances.STRATEGY_PARTITION:  # EC2 chose: ask which
            described = self._describe(inst.instance_id)
            partition = instances.instance_partition(described) if described is not None else 0
        node_labels = {**md.labels, **it.labels, labels.ZONE: inst.zone, labels.REGION: self.region,
                       labels.CAPACITY_TYPE: inst.capacity_type, **instances.launch_labels(res, inst.zone, partition)}
        r = self.reservations.get(reservation_id) if reservation_id else None
        if r is not None:
            node_labels.update(r.labels())
        annotations = {**md.annotations, labels.NODECLASS_HASH_AWS: nc.hash()}
        return dataclasses.replace(
            claim, metadata=dataclasses.replace(md, labels=node_labels, annotations=annotations),
            status=dataclasses.replace(claim.status, provider_id=f"aws:///{inst.zone}/{inst.instance_id}",
                                       image_id=inst.image_id, capacity=dict(it.capacity),
                                       allocatable=dict(it.allocatable)))

    # ------------------------------------------------------------------- get / list / delete

    def owned(self, tags: Mapping[str, str]) -> bool:
        """Did karpy launch this instance for this cluster? (module docstring, Ownership)."""
        return instances.owned(tags, self.cluster_name)

    def _describe(self, instance_id: str) -> dict[str, Any] | None:
        if not instance_id:
            return None
        try:
            response = session.call(self.session.ec2, "describe_instances", InstanceIds=[instance_id])
        except errors.NodeClaimNotFoundError:
            return None
        for r in response.get("Reservations") or ():
            for inst in r.get("Instances") or ():
                return dict(inst)
        return None

    def _live_owned(self, provider_id: str) -> dict[str, Any]:
        inst = self._describe(instance_id_of(provider_id))
        state = (inst.get("State") or {}).get("Name") if inst is not None else None
        if inst is None or state not in LIVE_STATES or not self.owned(instances.tags_of(inst)):
            raise errors.NodeClaimNotFoundError(f"instance {provider_id} not found")
        return inst

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        return self._claim_of(self._live_owned(provider_id))

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        filters = [{"Name": "instance-state-name", "Values": list(LIVE_STATES)},
                   {"Name": "tag-key", "Values": [TAG_NODEPOOL]},
                   {"Name": "tag-key", "Values": [TAG_NODECLASS]},
                   {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cluster_name]}]
        found = []
        for page in session.paginate(self.session.ec2, "describe_instances", Filters=filters):
            for r in page.get("Reservations") or ():
                for inst in r.get("Instances") or ():
                    if self.owned(instances.tags_of(inst)) and (inst.get("State") or {}).get("Name") in LIVE_STATES:
                        found.append(self._claim_of(inst))
        found.sort(key=lambda c: (c.metadata.creation_timestamp or 0.0, c.status.provider_id))
        self._maybe_cleanup()
        return found

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        pid = claim.status.provider_id
        inst = self._describe(instance_id_of(pid))
        if inst is None or (inst.get("State") or {}).get("Name") in ("shutting-down", "terminated"):
            raise errors.NodeClaimNotFoundError(f"instance {pid or '(no provider id)'} of NodeClaim {claim.name} "
                                                "not found")
        if not self.owned(instances.tags_of(inst)):
            raise errors.NotOwnedError(f"instance {pid} does not carry karpy's tags for cluster {self.cluster_name} "
                                       f"({TAG_NODEPOOL}, {TAG_NODECLASS}, {TAG_CLUSTER}); refusing to terminate it")
        session.call(self.session.ec2, "terminate_instances", InstanceIds=[inst["InstanceId"]])
        rid = claim.metadata.labels.get(cr.LABEL_ID) or str(inst.get("CapacityReservationId") or "")
        if rid:  # its slot is free again
            self.reservations.availability.terminated(rid)

    def expiring_reservations(self, reservation_ids: Collection[str]) -> set[str]:
        """Those of ``reservation_ids`` that are expiring capacity blocks (:mod:`.reservations`)."""
        return self.reservations.expiring(reservation_ids) if self.reservations.enabled else set()

    def _claim_of(self, inst: Mapping[str, Any]) -> nodeclaim.NodeClaim:
        iid = str(inst["InstanceId"])
        with self._lock:
            created = self._launch_times.get(iid)
        if created is None:
            launch = inst.get("LaunchTime")
            created = launch.timestamp() if isinstance(launch, datetime.datetime) else None
            now = self.clock.now()
            if created is None or created > now:  # a clock behind the cloud's (the simulator): first seen
                with self._lock:
                    created = self._launch_times.setdefault(iid, now)
        return instances.claim_of(inst, region=self.region, created=created,
                                  reservations_enabled=self.reservations.enabled)

    def _maybe_cleanup(self) -> None:
        now = self.clock.now()
        if now < self._next_cleanup:
            return
        self._next_cleanup = now + CLEANUP_INTERVAL
        try:
            deleted = self.templates.cleanup()
        except errors.CloudProviderError as exc:
            log.warning("cleaning up launch templates failed: %s", exc)
            return
        for name in deleted:
            log.info("deleted launch template %s", name)

    # ------------------------------------------------------------------------------ drift

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        inst = self._live_owned(claim.status.provider_id)
        ref = claim.spec.node_class_ref
        if ref is None:
            return ""
        try:
            nc = self._node_class(ref.name)
        except errors.NodeClassNotReadyError:
            return ""
        have = claim.metadata.annotations.get(labels.NODECLASS_HASH_AWS)
        if have is not None and have != nc.hash():
            return "NodeClassDrift"
        res = self.resolver.resolve(nc)
        if res.images and inst.get("ImageId") not in {i.id for i in res.images}:
            return "AMIDrift"
        if res.subnets and inst.get("SubnetId") and inst.get("SubnetId") not in {s.id for s in res.subnets}:
            return "SubnetDrift"
        groups = {g.get("GroupId") for g in inst.get("SecurityGroups") or ()}
        if res.security_groups and groups and groups != {g.id for g in res.security_groups}:
            return "SecurityGroupDrift"
        group_id = res.placement_group.id if res.placement_group is not None else ""
        if claim.metadata.labels.get(instances.LABEL_PLACEMENT_GROUP, "") != group_id:  # added, removed, recreated
            return "PlacementGroupDrift"
        return ""

    def repair_policies(self) -> builtins.list[interface.RepairPolicy]:
        """Karpenter's AWS repair policies: Ready False/Unknown 30 min; node monitoring agent conditions."""
        out = [interface.RepairPolicy("Ready", "False", 1800.0), interface.RepairPolicy("Ready", "Unknown", 1800.0)]
        for cond in ("AcceleratedHardwareReady", "StorageReady", "NetworkingReady", "KernelReady",
                     "ContainerRuntimeReady"):
            out.append(interface.RepairPolicy(cond, "False", 600.0 if cond == "AcceleratedHardwareReady" else 1800.0))
        return out

    # ---------------------------------------------------------------------- interruption

    def pending_interruptions(self) -> builtins.list[interface.InterruptionMessage]:
        return self.queue.pending_interruptions() if self.queue is not None else []

    def ack(self, message: interface.InterruptionMessage) -> None:
        if self.queue is not None:
            self.queue.ack(message)

    def queue_health(self) -> interface.QueueHealth | None:
        """The interruption queue's :class:`~karpy.cloudprovider.interface.QueueHealth` (``None`` without one)."""
        health = getattr(self.queue, "queue_health", None)
        return health() if callable(health) else None

    def mark_insufficient(self, instance_type: str, zone: str, capacity_type: str, until: float) -> None:
        """Treat an offering as out of capacity until ``until`` (the simulator's insufficientCapacity step)."""
        self.ice.mark(instance_type, zone, capacity_type, "InsufficientCapacity", until=until)

    def interrupt(self, provider_id: str, kind: str) -> None:
        """Send an EventBridge-shaped notice for one instance to the interruption queue (rehearsals, tests)."""
        send = getattr(self.queue, "send", None)
        if not callable(send):
            raise ValueError("no interruption queue is configured (settings.interruptionQueue)")
        send(provider_id, kind)
