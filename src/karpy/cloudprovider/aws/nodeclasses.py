"""EC2NodeClass resolution: what a NodeClass selects in the account, and the status it should have.

:class:`Resolver` turns an :class:`karpy.api.nodeclass.EC2NodeClass` into a :class:`Resolved`:
subnets (id, zone, zone id, free IPs), security groups, images (newest per architecture/variant,
with requirements) and the instance profile, plus readiness with Karpenter's condition types and
reasons (``SubnetsReady``/``SubnetsNotFound``, ``SecurityGroupsReady``/``SecurityGroupsNotFound``,
``AMIsReady``/``AMINotFound``, ``InstanceProfileReady``/``InstanceProfileNotFound``, and with a
``placementGroupSelector`` ``PlacementGroupReady``/``PlacementGroupNotFound``: the group by ``name``
or ``id`` through ``DescribePlacementGroups``, available ones only, reported in
``status.placementGroups``). Results are
cached per NodeClass name and content for :data:`CACHE_SECONDS` of the clock (thread-safe);
:meth:`Resolver.status` renders the whole ``status`` object :meth:`CloudProvider.resolve_node_class`
returns.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.api import capacityreservation as cr
from karpy.api import errors as api_errors
from karpy.api import nodeclass
from karpy.cloudprovider import errors, interface
from karpy.cloudprovider.aws import amis, instanceprofile, selectors, session
from karpy.cloudprovider.aws import reservations as aws_reservations

CACHE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class PlacementGroup:
    id: str
    name: str
    strategy: str
    """``cluster``, ``partition`` or ``spread``."""
    partition_count: int = 0
    """A ``partition`` group's ``PartitionCount`` (``0``: unknown or another strategy)."""


def placement_group(ec2: Any, selector: Mapping[str, str]) -> PlacementGroup | None:
    """The available placement group ``selector`` (``name`` or ``id``) names, if any."""
    kwargs = {"GroupIds": [selector["id"]]} if selector.get("id") else {"GroupNames": [selector["name"]]}
    try:
        groups = session.call(ec2, "describe_placement_groups", **kwargs).get("PlacementGroups") or ()
    except session.AWSError as exc:
        if exc.retryable:
            raise
        return None
    for g in groups:
        if g.get("State", "available") == "available":
            return PlacementGroup(str(g.get("GroupId") or ""), str(g.get("GroupName") or ""),
                                  str(g.get("Strategy") or ""), int(g.get("PartitionCount") or 0))
    return None


@dataclass(frozen=True)
class Resolved:
    subnets: tuple[selectors.Subnet, ...]
    security_groups: tuple[selectors.SecurityGroup, ...]
    images: tuple[amis.Image, ...]
    instance_profile: str
    conditions: tuple[dict[str, Any], ...]
    """Karpenter's sub-conditions, then ``Ready``."""
    reservations: tuple[cr.Reservation, ...] = ()
    """The capacity reservations ``capacityReservationSelectorTerms`` select (:mod:`.reservations`)."""
    resolved_at: float = 0.0
    placement_group: PlacementGroup | None = None

    @property
    def ready(self) -> bool:
        return all(c["status"] == "True" for c in self.conditions)

    @property
    def message(self) -> str:
        return "; ".join(c["message"] for c in self.conditions if c["status"] != "True" and c["message"])

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.subnets:
            out["subnets"] = [{"id": s.id, "zone": s.zone, "zoneID": s.zone_id} for s in self.subnets]
        if self.security_groups:
            out["securityGroups"] = [{"id": g.id, "name": g.name} for g in self.security_groups]
        if self.images:
            out["amis"] = [i.to_status() for i in self.images]
        if self.instance_profile:
            out["instanceProfile"] = self.instance_profile
        if self.reservations:
            out["capacityReservations"] = [r.status(self.resolved_at) for r in self.reservations]
        if self.placement_group is not None:
            out["placementGroups"] = [{"id": self.placement_group.id, "name": self.placement_group.name,
                                       "strategy": self.placement_group.strategy}]
        out["conditions"] = [dict(c) for c in self.conditions]
        return out


def _condition(type_: str, ok: bool, reason_bad: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": "True" if ok else "False", "reason": type_ if ok else reason_bad,
            "message": "" if ok else message}


class Resolver:
    def __init__(self, sess: session.Session, clock: clock_mod.Clock, *, cluster_name: str,
                 kubernetes_version: str, reservations: aws_reservations.Reservations | None = None,
                 isolated_vpc: bool = False) -> None:
        self.session = sess
        self.isolated_vpc = isolated_vpc
        """``ISOLATED_VPC``: IAM (no VPC endpoint) is not asked whether ``spec.instanceProfile`` exists."""
        self.reservations = reservations
        self.clock = clock
        self.cluster_name = cluster_name
        self.kubernetes_version = kubernetes_version
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[float, Resolved]] = {}

    def resolve(self, nc: nodeclass.EC2NodeClass, *, fresh: bool = False) -> Resolved:
        key = (nc.name, nodeclass.stable_hash(nc.spec_dict()))
        now = self.clock.now()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and not fresh and now - hit[0] < CACHE_SECONDS:
            return hit[1]
        resolved = self._resolve(nc)
        with self._lock:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = (now, resolved)
        return resolved

    def _resolve(self, nc: nodeclass.EC2NodeClass) -> Resolved:
        ec2 = self.session.ec2
        subnets = tuple(selectors.subnets(ec2, nc.subnet_selector_terms))
        groups = tuple(selectors.security_groups(ec2, nc.security_group_selector_terms))
        ami_problem = ""
        try:
            images = tuple(amis.resolve(ec2, self.session.ssm, nc, self.kubernetes_version))
        except errors.CloudProviderError as exc:
            if exc.retryable:
                raise
            images, ami_problem = (), exc.message
        profile, profile_problem = "", ""
        try:
            profile = instanceprofile.ensure(
                self.session.iam, cluster=self.cluster_name, region=self.session.region, node_class=nc.name,
                role=nc.role, instance_profile=nc.instance_profile, tags=nc.tags, verify=not self.isolated_vpc)
        except session.AWSError as exc:
            if exc.retryable:
                raise
            profile_problem = exc.message
        conditions = [
            _condition("SubnetsReady", bool(subnets), "SubnetsNotFound",
                       "subnetSelectorTerms matched no subnet"),
            _condition("SecurityGroupsReady", bool(groups), "SecurityGroupsNotFound",
                       "securityGroupSelectorTerms matched no security group"),
            _condition("AMIsReady", bool(images), "AMINotFound",
                       ami_problem or "amiSelectorTerms matched no available image"),
            _condition("InstanceProfileReady", bool(profile), "InstanceProfileNotFound",
                       profile_problem or "no instance profile"),
        ]
        found: list[cr.Reservation] = []
        if self.reservations is not None and self.reservations.enabled and nc.capacity_reservation_selector_terms:
            problem = ""
            try:
                found = self.reservations.list(nc.capacity_reservation_selector_terms)
            except session.AWSError as exc:
                if exc.retryable:
                    raise
                problem = exc.message
            conditions.insert(0, _condition("CapacityReservationsReady", not problem,
                                            "CapacityReservationsNotFound", problem))
        group = None
        if nc.placement_group_selector:
            group = placement_group(ec2, nc.placement_group_selector)
            conditions.append(_condition("PlacementGroupReady", group is not None, "PlacementGroupNotFound",
                                         f"placementGroupSelector {dict(nc.placement_group_selector)} matched no "
                                         "available placement group"))
        failing = [c for c in conditions if c["status"] != "True"]
        if failing:
            ready = interface.ready_condition(False, failing[0]["reason"],
                                              "; ".join(c["message"] for c in failing))
        else:
            ready = interface.ready_condition(True, "Ready")
        return Resolved(subnets, groups, images, profile, (*conditions, ready), tuple(found), self.clock.now(),
                        group)

    def status(self, node_class: dict[str, Any]) -> dict[str, Any]:
        kind = str(node_class.get("kind") or "")
        if kind != nodeclass.EC2_KIND:
            return {"conditions": [interface.ready_condition(
                False, "UnsupportedNodeClass", f"the aws provider does not serve {kind or 'this kind'}")]}
        try:
            nc = nodeclass.EC2NodeClass.from_manifest(node_class)
        except api_errors.ValidationError as exc:  # reported on the object, never raised
            return {"conditions": [interface.ready_condition(False, "ValidationFailed", str(exc)[:500])]}
        return self.resolve(nc, fresh=True).status()
