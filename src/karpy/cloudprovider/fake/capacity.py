"""The simulated cloud's launch model: instance records, capacity pools, offering choice.

Used by :mod:`karpy.cloudprovider.fake.provider`; pure (no I/O, no clock reads: callers pass
``now``). What a caller may rely on:

* :class:`Instance` records are frozen; the cloud replaces them when their state changes, so a
  record handed out never changes under the holder.
* :class:`CapacityPools`: every offering ``(instance_type, zone, capacity_type)`` has unlimited
  capacity unless :meth:`CapacityPools.set_capacity` gave it a size (the most instances of that
  offering that may run at once) or :meth:`CapacityPools.mark_insufficient` made it unavailable
  until a time.
* :func:`candidates` returns the offerings a NodeClaim may launch on, cheapest first, ties broken
  by instance type name, then zone, so the choice is deterministic.
* :func:`matches` evaluates node selector requirements the way Karpenter's cloud providers filter
  instance types: a requirement on a label the provider defines (some instance type carries it,
  or it is zone / capacity type / region) must hold for the offering, a missing label counting as
  absent; requirements on labels the provider never defines (NodePool template labels) are left to
  the scheduler and ignored here. Deprecated keys (``failure-domain.beta.kubernetes.io/zone``...)
  are read as their current names; integer bounds (``Gt``/``Lt``/``Gte``/``Lte``) use Go's
  ``strconv.Atoi`` syntax like :mod:`karpy.scheduling.requirements`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpy.api import capacityreservation, labels, meta, nodeclaim, nodeclass, quantity, selectors
from karpy.cloudprovider import errors, instancetype
from karpy.scheduling import requirement

NodeClass = nodeclass.EC2NodeClass | nodeclass.AKSNodeClass

RUNNING = "running"
TERMINATED = "terminated"


@dataclass(frozen=True, slots=True)
class Instance:
    """One simulated VM, running or terminated."""

    instance_id: str
    """``i-0123456789abcdef0`` (AWS), the VM name (Azure) or the node name (KWOK)."""
    provider_id: str
    hostname: str
    """The node name the kubelet registers with (``ip-10-1-2-3.ec2.internal`` on AWS)."""
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    """US dollars per hour."""
    launch_time: float
    image_id: str
    tags: Mapping[str, str]
    labels: Mapping[str, str]
    """Node labels of the instance: instance type labels, zone, region, capacity type, nodepool."""
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    nodeclaim_name: str = ""
    """Name of the NodeClaim it was launched for (``""`` for instances karpy did not launch)."""
    node_class: str = ""
    """Name of the NodeClass it was launched with (``""`` when none)."""
    node_class_ref: nodeclaim.NodeClassRef | None = None
    state: str = RUNNING
    terminated_at: float | None = None
    reclaim_at: float | None = None
    """When a spot interruption notice was sent, the time the instance will be reclaimed."""

    @property
    def offering(self) -> errors.OfferingKey:
        return (self.instance_type, self.zone, self.capacity_type)

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    def cost(self, now: float) -> float:
        """Dollars spent on this instance up to ``now`` (or its termination)."""
        end = self.terminated_at if self.terminated_at is not None else now
        return self.price * max(0.0, end - self.launch_time) / 3600.0


@dataclass
class CapacityPools:
    """Per-offering capacity: unlimited unless limited or marked insufficient."""

    limits: dict[errors.OfferingKey, int] = field(default_factory=dict)
    insufficient_until: dict[errors.OfferingKey, float] = field(default_factory=dict)
    running: dict[errors.OfferingKey, int] = field(default_factory=dict)
    """How many instances of each offering are running now (maintained by the cloud)."""

    def set_capacity(self, key: errors.OfferingKey, count: int | None) -> None:
        """At most ``count`` instances of ``key`` may run at once (``None``: unlimited)."""
        if count is None:
            self.limits.pop(key, None)
            return
        if count < 0:
            raise ValueError(f"capacity of {key} must be >= 0, got {count}")
        self.limits[key] = count

    def mark_insufficient(self, key: errors.OfferingKey, until: float) -> None:
        """``key`` has no capacity before ``until`` (later marks extend, earlier ones do not shorten)."""
        self.insufficient_until[key] = max(until, self.insufficient_until.get(key, until))

    def launched(self, key: errors.OfferingKey) -> None:
        self.running[key] = self.running.get(key, 0) + 1

    def released(self, key: errors.OfferingKey) -> None:
        left = self.running.get(key, 0) - 1
        if left > 0:
            self.running[key] = left
        else:
            self.running.pop(key, None)

    def has_capacity(self, key: errors.OfferingKey, now: float) -> bool:
        until = self.insufficient_until.get(key)
        if until is not None and now < until:
            return False
        limit = self.limits.get(key)
        return limit is None or self.running.get(key, 0) < limit

    def unavailable(self, now: float) -> frozenset[errors.OfferingKey]:
        """Every offering that has no capacity at ``now`` (small: only limited or marked ones)."""
        out = {k for k, until in self.insufficient_until.items() if now < until}
        out.update(k for k, limit in self.limits.items() if self.running.get(k, 0) >= limit)
        return frozenset(out)


def claim_of(inst: Instance) -> nodeclaim.NodeClaim:
    """The NodeClaim view of an instance, as the cloud's ``get``/``list`` (garbage collection) see it."""
    return nodeclaim.NodeClaim(
        metadata=meta.ObjectMeta(name=inst.nodeclaim_name or inst.instance_id, labels=dict(inst.labels),
                                 creation_timestamp=inst.launch_time),
        spec=nodeclaim.NodeClaimSpec(node_class_ref=inst.node_class_ref),
        status=nodeclaim.NodeClaimStatus(provider_id=inst.provider_id, image_id=inst.image_id,
                                         capacity=dict(inst.capacity), allocatable=dict(inst.allocatable)),
    )


class LiveInstances(dict[str, Instance]):
    """The running instances by provider ID, and their listing (owned ones in launch order, as
    NodeClaims) kept until an instance is added, replaced or removed: a garbage-collection sweep
    lists every instance every two minutes, and most sweeps see the same ones."""

    def __init__(self) -> None:
        super().__init__()
        self._listing: list[nodeclaim.NodeClaim] | None = None

    def __setitem__(self, key: str, value: Instance) -> None:
        self._listing = None
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._listing = None
        super().__delitem__(key)

    def listing(self, owned: Callable[[Instance], bool],
                claim: Callable[[Instance], nodeclaim.NodeClaim]) -> list[nodeclaim.NodeClaim]:
        """The owned instances' NodeClaims by (launch time, instance ID); ``owned`` and ``claim`` must
        depend on the instance alone."""
        if self._listing is None:
            kept = sorted((i for i in self.values() if owned(i)), key=lambda i: (i.launch_time, i.instance_id))
            self._listing = [claim(i) for i in kept]
        return list(self._listing)


class InstanceRecords:
    """What never changes for one instance record (a record is replaced, never changed): whether it is
    the cluster's own (``owns(tags)``) and its NodeClaim view (:func:`claim_of`), computed once."""

    def __init__(self, owns: Callable[[Mapping[str, str]], bool]) -> None:
        self._owns = owns
        self._owned: dict[str, tuple[Mapping[str, str], bool]] = {}
        self._claims: dict[str, tuple[Instance, nodeclaim.NodeClaim]] = {}

    def owned(self, inst: Instance) -> bool:
        cached = self._owned.get(inst.provider_id)
        if cached is not None and cached[0] is inst.tags:
            return cached[1]
        owned = self._owns(inst.tags)
        self._owned[inst.provider_id] = (inst.tags, owned)
        return owned

    def claim(self, inst: Instance) -> nodeclaim.NodeClaim:
        cached = self._claims.get(inst.provider_id)
        if cached is not None and cached[0] is inst:
            return cached[1]
        claim = claim_of(inst)
        self._claims[inst.provider_id] = (inst, claim)
        return claim

    def forget(self, provider_id: str) -> None:
        """The instance stopped: its NodeClaim view is not needed any more."""
        self._claims.pop(provider_id, None)


def requirement_holds(req: selectors.NodeSelectorRequirement, value: str | None) -> bool:
    """Whether a label with ``value`` (``None``: absent) satisfies ``req``."""
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None or not req.values:
        return False
    have, bound = requirement.parse_int(value), requirement.parse_int(req.values[0])
    if have is None or bound is None:
        return False
    if op == "Gt":
        return have > bound
    if op == "Lt":
        return have < bound
    if op == "Gte":
        return have >= bound
    if op == "Lte":
        return have <= bound
    return False


def matches(reqs: Iterable[selectors.NodeSelectorRequirement], node_labels: Mapping[str, str],
            defined: frozenset[str]) -> bool:
    """Every requirement on a key in ``defined`` holds for ``node_labels``."""
    return all(requirement_holds(req, node_labels.get(req.key)) for req in reqs if req.key in defined)


RESERVATION_KEYS = frozenset({capacityreservation.LABEL_ID, capacityreservation.LABEL_TYPE})
"""Labels of a reserved offering (:mod:`karpy.cloudprovider.reservations`): always the cloud's to check."""
OFFERING_KEYS = frozenset({labels.ZONE, labels.CAPACITY_TYPE, labels.REGION}) | RESERVATION_KEYS


def defined_keys(types: Iterable[instancetype.InstanceType]) -> frozenset[str]:
    """Label keys the provider defines: any instance type's labels plus zone, capacity type, region."""
    keys: set[str] = set(OFFERING_KEYS)
    for it in types:
        keys.update(it.labels)
    return frozenset(keys)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One offering a NodeClaim could launch on."""

    instance_type: instancetype.InstanceType
    offering: instancetype.Offering

    @property
    def key(self) -> errors.OfferingKey:
        return (self.instance_type.name, self.offering.zone, self.offering.capacity_type)

    def sort_key(self) -> tuple[float, str, str, str]:
        return (self.offering.price, self.instance_type.name, self.offering.zone,
                self.offering.capacity_type)


def _labels_hold(o: instancetype.Offering, reqs: Sequence[selectors.NodeSelectorRequirement]) -> bool:
    """Some value ``o`` may take for each label it decides (:attr:`instancetype.Offering.labels`) satisfies every
    requirement on that key."""
    for key, values in o.labels:
        on_key = [r for r in reqs if r.key == key]
        if on_key and not any(all(requirement_holds(r, v) for r in on_key) for v in values):
            return False
    return True


def candidates(types: Sequence[instancetype.InstanceType],
               reqs: Sequence[selectors.NodeSelectorRequirement],
               requests: Mapping[str, int], region: str,
               defined: frozenset[str]) -> list[Candidate]:
    """Offerings compatible with ``reqs`` whose type's allocatable holds ``requests``, cheapest first.

    Offerings the catalog itself lists as unavailable are left out; capacity pools are not looked
    at here (the caller decides, so it can name the offerings that were out of capacity).
    """
    reqs = [dataclasses.replace(r, key=labels.NORMALIZED_LABELS[r.key]) if r.key in labels.NORMALIZED_LABELS
            else r for r in reqs]
    type_reqs = [r for r in reqs if r.key not in OFFERING_KEYS]
    offering_reqs = [r for r in reqs if r.key in OFFERING_KEYS]
    out: list[Candidate] = []
    if any(r.key in RESERVATION_KEYS for r in offering_reqs):  # an offering without them lacks the labels
        defined = defined | RESERVATION_KEYS
    allowed: dict[tuple[object, ...], bool] = {}
    named: set[str] | None = None  # an instance-type In list: only those types need looking at
    for r in type_reqs:
        if r.key == labels.INSTANCE_TYPE and r.operator == "In" and r.key in defined:
            named = set(r.values) if named is None else named & set(r.values)
    if named is not None:  # the name filter below is exactly those requirements: not checked twice
        type_reqs = [r for r in type_reqs if not (r.key == labels.INSTANCE_TYPE and r.operator == "In")]
    for it in types:
        if named is not None and it.labels.get(labels.INSTANCE_TYPE) not in named:
            continue
        if not quantity.fits(requests, it.allocatable):
            continue
        if not matches(type_reqs, it.labels, defined):
            continue
        for o in it.offerings:
            if not o.available:
                continue
            key = (o.zone, o.capacity_type, o.reservation_id, o.reservation_type, o.labels)
            ok = allowed.get(key)
            if ok is None:  # the same few (zone, capacity type) pairs recur across types
                where = {labels.ZONE: o.zone, labels.CAPACITY_TYPE: o.capacity_type, labels.REGION: region}
                if o.reservation_id:
                    where.update({capacityreservation.LABEL_ID: o.reservation_id,
                                  capacityreservation.LABEL_TYPE: o.reservation_type})
                ok = allowed[key] = matches(offering_reqs, where, defined) and _labels_hold(o, reqs)
            if ok:
                out.append(Candidate(it, o))
    out.sort(key=Candidate.sort_key)
    return out


CAPACITY_TYPE_PREFERENCE = (labels.CAPACITY_TYPE_RESERVED, labels.CAPACITY_TYPE_SPOT,
                            labels.CAPACITY_TYPE_ON_DEMAND)
"""Karpenter launches reserved capacity first, then spot, then on-demand, when a NodeClaim allows several."""


def choose(cands: Sequence[Candidate], pools: CapacityPools, now: float
           ) -> tuple[Candidate | None, list[errors.OfferingKey]]:
    """The offering to launch and the offerings that were tried and had no capacity.

    The capacity type is the most preferred one (:data:`CAPACITY_TYPE_PREFERENCE`) with any offering
    that has capacity; within it, the cheapest offering with capacity (on-demand: lowest price;
    spot: price-capacity-optimised, which the simulation takes as lowest price among offerings with
    capacity). The failed list names the cheaper offerings of that capacity type that were out, or
    every candidate when nothing has capacity.
    """
    order = {ct: i for i, ct in enumerate(CAPACITY_TYPE_PREFERENCE)}
    present = {c.offering.capacity_type for c in cands}
    for ct in sorted(present, key=lambda t: (order.get(t, len(order)), t)):
        failed: list[errors.OfferingKey] = []
        for c in cands:  # in order: the first of this type with capacity wins (usually the first)
            if c.offering.capacity_type != ct:
                continue
            if pools.has_capacity(c.key, now):
                return c, failed
            failed.append(c.key)
    return None, [c.key for c in cands]
