"""The test world's EC2 capacity reservations: moto has no DescribeCapacityReservations and ignores a
launch template's reservation target, so these botocore hooks on karpy's EC2 client play EC2's part.

* ``DescribeCapacityReservations`` is answered from :attr:`CapacityReservations.table` with EC2's filter
  semantics (``CapacityReservationIds``, ``state``, ``owner-id``, ``tag:<key>``, ``tag-key``,
  ``instance-match-criteria``); every request's parameters are recorded in :attr:`describes`.
* ``CreateFleet``: an override whose launch template targets a reservation (``CapacityReservationTarget``)
  is dropped, with a ``ReservationCapacityExceeded`` error as EC2 returns it, when the reservation has no
  instance left; a launched instance takes one (``AvailableInstanceCount`` - 1) and gives it back when it
  is terminated. moto launches nothing for ``DefaultTargetCapacityType=capacity-block``: the request is
  recorded as sent (:attr:`fleets`), then passed to moto as ``on-demand``.
"""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import botocore.awsrequest

from . import moto_world


def _ok() -> Any:
    return botocore.awsrequest.AWSResponse("http://127.0.0.1/", 200, {}, None)


def reservation(rid: str, instance_type: str, zone: str, count: int, *, kind: str = "default",
                match: str = "targeted", owner: str = "123456789012", tags: Mapping[str, str] | None = None,
                end: datetime.datetime | None = None, state: str = "active") -> dict[str, Any]:
    """A DescribeCapacityReservations entry as EC2 returns it."""
    out: dict[str, Any] = {
        "CapacityReservationId": rid, "OwnerId": owner, "InstanceType": instance_type, "AvailabilityZone": zone,
        "InstancePlatform": "Linux/UNIX", "Tenancy": "default", "TotalInstanceCount": count,
        "AvailableInstanceCount": count, "InstanceMatchCriteria": match, "State": state,
        "ReservationType": kind, "Tags": [{"Key": k, "Value": v} for k, v in sorted((tags or {}).items())],
        "EndDateType": "limited" if end is not None else "unlimited"}
    if end is not None:
        out["EndDate"] = end
    return out


def _matches(r: Mapping[str, Any], f: Mapping[str, Any]) -> bool:
    name, values = str(f["Name"]), set(f["Values"])
    tags = {t["Key"]: t["Value"] for t in r.get("Tags") or ()}
    if name == "state":
        return r["State"] in values
    if name == "owner-id":
        return r["OwnerId"] in values
    if name == "instance-match-criteria":
        return r["InstanceMatchCriteria"] in values
    if name == "tag-key":
        return bool(values & set(tags))
    if name.startswith("tag:"):
        return tags.get(name[4:]) in values
    raise AssertionError(f"filter {name} is not one Karpenter sends")


class CapacityReservations:
    """See the module docstring; ``attach(ec2_client)`` after the other CreateFleet hooks."""

    def __init__(self, url: str, table: Sequence[dict[str, Any]]) -> None:
        self.table = {r["CapacityReservationId"]: dict(r) for r in table}
        self.lookup = moto_world.client("ec2", url)
        self.describes: list[dict[str, Any]] = []
        self.fleets: list[dict[str, Any]] = []
        self.holders: dict[str, str] = {}
        """Instance id -> the reservation it runs in."""
        self._local = threading.local()
        self._lock = threading.Lock()

    def attach(self, ec2: Any) -> None:
        ec2.meta.events.register("provide-client-params.ec2.DescribeCapacityReservations", self._describe_params)
        ec2.meta.events.register("before-call.ec2.DescribeCapacityReservations", self._describe)
        ec2.meta.events.register("provide-client-params.ec2.CreateFleet", self._fleet_params)
        ec2.meta.events.register("before-call.ec2.CreateFleet", self._fleet_before)
        ec2.meta.events.register("after-call.ec2.CreateFleet", self._fleet_after)
        ec2.meta.events.register("provide-client-params.ec2.TerminateInstances", self._terminate)

    def available(self, rid: str) -> int:
        with self._lock:
            return int(self.table[rid]["AvailableInstanceCount"])

    # -- DescribeCapacityReservations

    def _describe_params(self, params: dict[str, Any], **_: Any) -> None:
        self.describes.append(json.loads(json.dumps(params)))
        self._local.describe = dict(params)

    def _describe(self, **_: Any) -> Any:
        params = self._local.describe
        with self._lock:
            found = [dict(r) for r in self.table.values()]
        ids = params.get("CapacityReservationIds")
        if ids:
            found = [r for r in found if r["CapacityReservationId"] in ids]
        found = [r for r in found if all(_matches(r, f) for f in params.get("Filters") or ())]
        return (_ok(), {"CapacityReservations": sorted(found, key=lambda r: r["CapacityReservationId"])})

    # -- CreateFleet

    def _target(self, spec: Mapping[str, Any]) -> str:
        name = spec.get("LaunchTemplateName")
        data = self.lookup.describe_launch_template_versions(LaunchTemplateName=name, Versions=["$Latest"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        return str(target.get("CapacityReservationId") or "")

    def _fleet_params(self, params: dict[str, Any], **_: Any) -> None:
        self.fleets.append(json.loads(json.dumps(params)))
        errors: list[dict[str, Any]] = []
        targets: dict[str, str] = {}
        kept_configs = []
        for config in params["LaunchTemplateConfigs"]:
            rid = self._target(config["LaunchTemplateSpecification"])
            targets[config["LaunchTemplateSpecification"]["LaunchTemplateName"]] = rid
            if rid and self.available(rid) <= 0:
                errors.extend({"LaunchTemplateAndOverrides": {
                    "LaunchTemplateSpecification": config["LaunchTemplateSpecification"], "Overrides": dict(o)},
                    "Lifecycle": "on-demand", "ErrorCode": "ReservationCapacityExceeded",
                    "ErrorMessage": f"Insufficient capacity in capacity reservation {rid}."}
                    for o in config.get("Overrides") or ())
                continue
            kept_configs.append(config)
        params["LaunchTemplateConfigs"] = kept_configs
        spec = params["TargetCapacitySpecification"]
        if spec.get("DefaultTargetCapacityType") == "capacity-block":
            spec["DefaultTargetCapacityType"] = "on-demand"
        self._local.errors, self._local.targets = errors, targets
        self._local.nothing_left = not kept_configs

    def _fleet_before(self, **_: Any) -> Any:
        if getattr(self._local, "nothing_left", False):  # every override was in a full reservation
            errors, self._local.errors, self._local.nothing_left = list(self._local.errors), [], False
            return (_ok(), {"FleetId": "fleet-none", "Instances": [], "Errors": errors})
        return None

    def _fleet_after(self, parsed: dict[str, Any], **_: Any) -> None:
        errors = list(getattr(self._local, "errors", []))
        if errors:
            parsed.setdefault("Errors", []).extend(errors)
            self._local.errors = []
        for inst in parsed.get("Instances") or ():
            name = ((inst.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}).get(
                "LaunchTemplateName", "")
            rid = self._local.targets.get(name, "")
            if not rid:
                continue
            with self._lock:
                for iid in inst.get("InstanceIds") or ():
                    self.table[rid]["AvailableInstanceCount"] -= 1
                    self.holders[iid] = rid

    def _terminate(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            for iid in params.get("InstanceIds") or ():
                rid = self.holders.pop(iid, None)
                if rid is not None:
                    self.table[rid]["AvailableInstanceCount"] += 1
