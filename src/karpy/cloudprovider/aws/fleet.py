"""CreateFleet launches: overrides, identical requests batched, ``Errors[]`` into the capacity cache.

A :class:`Request` is one ``CreateFleet Type=instant`` for one capacity type: launch template
configs (one per launch template) each with its overrides (one per instance type x zone, the zone's
subnet, a priority), plus the tags every instance gets. What a caller may rely on:

* Spot requests use ``price-capacity-optimized``, on-demand ones ``lowest-price``; overrides are
  listed cheapest first with ascending ``Priority``; instance, volume and fleet tag specifications
  carry the request's tags.
* :meth:`Fleet.launch` is thread-safe and batches identical requests: while a CreateFleet for a
  request is in flight, identical requests (same templates, overrides, capacity type and common
  tags) queue, and the next call launches them all at once with ``TotalTargetCapacity = n``. A
  batch of one carries the caller's own tags (``karpenter.sh/nodeclaim``, ``Name``) in the request;
  in a larger batch each caller tags its own instance right after (``CreateTags``).
* ``Errors[]`` entries with a capacity code mark ``(type, zone, capacity type)`` in the
  :class:`karpy.cloudprovider.aws.unavailable.UnavailableOfferings` cache. A caller that got no
  instance sees :class:`errors.InsufficientCapacityError` naming the failed offerings, or
  :class:`errors.CreateError` for other error codes; the provider then retries with what remains.
* Instances are reported with their type, zone (from the override's subnet), capacity type (from
  ``Lifecycle``) and image.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import session, unavailable


@dataclass(frozen=True, slots=True)
class Override:
    instance_type: str
    zone: str
    subnet_id: str
    price: float
    image_id: str = ""


@dataclass(frozen=True)
class Request:
    capacity_type: str
    templates: tuple[tuple[str, tuple[Override, ...]], ...]
    """(launch template name, its overrides cheapest first)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    target_capacity_type: str = ""
    """``DefaultTargetCapacityType`` when not the capacity type's own (a reserved launch: ``on-demand`` or
    ``capacity-block``, :func:`karpy.cloudprovider.aws.reservations.fleet_capacity_type`)."""
    context: str | None = None
    """The EC2NodeClass's ``context`` (CreateFleet ``Context``)."""

    def key(self) -> str:
        return json.dumps([self.capacity_type, [[n, [[o.instance_type, o.subnet_id, o.price] for o in ovs]]
                                                for n, ovs in self.templates], sorted(self.tags.items()),
                           self.context])

    def overrides(self) -> list[Override]:
        return [o for _, ovs in self.templates for o in ovs]


@dataclass(frozen=True, slots=True)
class Launched:
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    image_id: str
    subnet_id: str


def params(req: Request, count: int, extra_tags: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The CreateFleet parameters of ``count`` instances of ``req``."""
    tags = [{"Key": k, "Value": v} for k, v in sorted({**dict(req.tags), **dict(extra_tags or {})}.items())]
    configs = []
    ordered = sorted(req.overrides(), key=lambda o: (o.price, o.instance_type, o.zone))
    rank = {(o.instance_type, o.subnet_id): i for i, o in enumerate(ordered)}
    for name, ovs in req.templates:
        items = []
        for o in sorted(ovs, key=lambda o: rank[(o.instance_type, o.subnet_id)]):
            item: dict[str, Any] = {"InstanceType": o.instance_type, "SubnetId": o.subnet_id,
                                    "Priority": float(rank[(o.instance_type, o.subnet_id)])}
            if o.image_id:
                item["ImageId"] = o.image_id
            items.append(item)
        configs.append({"LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                        "Overrides": items})
    spot = req.capacity_type == labels.CAPACITY_TYPE_SPOT
    target = req.target_capacity_type or ("spot" if spot else "on-demand")
    p: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": configs,
        "TargetCapacitySpecification": {"TotalTargetCapacity": count,
                                        "DefaultTargetCapacityType": target},
        "TagSpecifications": [{"ResourceType": rt, "Tags": tags} for rt in ("instance", "volume", "fleet")],
    }
    if spot:
        p["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    elif target != "capacity-block":  # a capacity block takes no on-demand options
        p["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    if req.context:
        p["Context"] = req.context
    return p


@dataclass
class _Waiter:
    extra_tags: Mapping[str, str]
    event: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=clock_mod.perf_counter)
    lead: bool = False
    result: Launched | None = None
    error: errors.CloudProviderError | None = None


class Fleet:
    """See the module docstring."""

    def __init__(self, ec2: Any, ice: unavailable.UnavailableOfferings) -> None:
        self.ec2 = ec2
        self.ice = ice
        self._lock = threading.Lock()
        self._queues: dict[str, list[_Waiter]] = {}
        self._inflight: set[str] = set()
        self.calls = 0
        """CreateFleet calls made (a batch is one call)."""
        self.on_batch: Callable[[int, float], None] | None = None
        """Told (requests in the batch, seconds its first request waited) before each CreateFleet."""

    def launch(self, req: Request, extra_tags: Mapping[str, str]) -> Launched:
        key = req.key()
        me = _Waiter(extra_tags)
        with self._lock:
            self._queues.setdefault(key, []).append(me)
            if key not in self._inflight:
                self._inflight.add(key)
                me.lead = True
        while True:
            if not me.lead:
                me.event.wait()
            if me.lead:
                me.lead = False
                self._lead(key, req)
            if me.result is not None:
                return me.result
            if me.error is not None:
                raise me.error
            me.event.clear()

    def _lead(self, key: str, req: Request) -> None:
        with self._lock:
            batch = self._queues.pop(key, [])
        if self.on_batch is not None and batch:
            self.on_batch(len(batch), clock_mod.perf_counter() - batch[0].queued_at)
        try:
            self._run(req, batch)
        finally:
            with self._lock:
                queued = self._queues.get(key)
                if queued:
                    queued[0].lead = True
                    queued[0].event.set()
                else:
                    self._inflight.discard(key)

    def _run(self, req: Request, batch: Sequence[_Waiter]) -> None:
        single = batch[0].extra_tags if len(batch) == 1 else None
        try:
            with self._lock:
                self.calls += 1
            response = session.call(self.ec2, "create_fleet", **params(req, len(batch), single))
        except errors.CloudProviderError as exc:
            for w in batch:
                w.error = exc
                w.event.set()
            return
        subnets = {o.subnet_id: o for o in req.overrides()}
        launched: list[Launched] = []
        for inst in response.get("Instances") or ():
            spec = inst.get("LaunchTemplateAndOverrides") or {}
            ov = spec.get("Overrides") or {}
            subnet = str(ov.get("SubnetId") or "")
            known = subnets.get(subnet)
            lifecycle = str(inst.get("Lifecycle") or req.capacity_type)
            ct = labels.CAPACITY_TYPE_SPOT if lifecycle == "spot" else labels.CAPACITY_TYPE_RESERVED \
                if req.capacity_type == labels.CAPACITY_TYPE_RESERVED else labels.CAPACITY_TYPE_ON_DEMAND
            for iid in inst.get("InstanceIds") or ():
                launched.append(Launched(
                    instance_id=str(iid), instance_type=str(inst.get("InstanceType") or ov.get("InstanceType") or ""),
                    zone=str(ov.get("AvailabilityZone") or (known.zone if known else "")), capacity_type=ct,
                    image_id=str(ov.get("ImageId") or (known.image_id if known else "")), subnet_id=subnet))
        failed: list[errors.OfferingKey] = []
        other: list[str] = []
        for e in response.get("Errors") or ():
            ov = (e.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            code = str(e.get("ErrorCode") or "")
            known = subnets.get(str(ov.get("SubnetId") or ""))
            zone = str(ov.get("AvailabilityZone") or (known.zone if known else ""))
            it = str(ov.get("InstanceType") or "")
            ct = req.capacity_type
            if session.is_capacity_code(code):
                if it and zone:
                    self.ice.mark(it, zone, ct, code)
                    failed.append((it, zone, ct))
            else:
                other.append(f"{code}: {e.get('ErrorMessage') or ''}")
        for i, w in enumerate(batch):
            if i < len(launched):
                w.result = launched[i]
                if single is None and w.extra_tags:
                    try:
                        session.call(self.ec2, "create_tags", Resources=[launched[i].instance_id],
                                     Tags=[{"Key": k, "Value": v} for k, v in sorted(w.extra_tags.items())])
                    except errors.CloudProviderError as exc:
                        w.result = None
                        w.error = exc
            elif failed or not other:
                w.error = errors.InsufficientCapacityError(failed or [(o.instance_type, o.zone, req.capacity_type)
                                                                     for o in req.overrides()])
            else:
                w.error = errors.CreateError("CreateFleet launched no instance: " + "; ".join(other)[:500],
                                             reason="LaunchFailed", retryable=True)
            w.event.set()
