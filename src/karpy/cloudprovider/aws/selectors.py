"""EC2NodeClass selector terms -> EC2 ``Filters``, and the subnets / security groups they select.

A selector list is OR of its terms; within a term every field must match (AND), as in Karpenter:

* ``id`` -> the ``subnet-id`` / ``group-id`` filter;
* ``name`` (security groups) -> ``group-name``;
* ``tags``: ``{key: value}`` -> ``tag:key=value``; the value ``"*"`` -> ``tag-key=key`` (any value);
  other ``*`` in a value are EC2 filter wildcards and work as such.
* The older forms after conversion: a v1alpha5 tag map such as ``{"karpenter.sh/discovery": "x"}``
  is one tags term; a tag map holding ``aws-ids: "subnet-1,subnet-2"`` becomes one ``id`` term per id.

:func:`subnets` returns every matching subnet (id, zone, zone id, free IPv4 addresses) sorted by id;
:func:`security_groups` every matching group (id, name) sorted by id. Neither returns duplicates. An
empty term list selects nothing. Errors are :mod:`karpy.cloudprovider.errors` ones (see
:mod:`karpy.cloudprovider.aws.session`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import nodeclass
from karpy.cloudprovider.aws import session

AWS_IDS = "aws-ids"


@dataclass(frozen=True, slots=True)
class Subnet:
    id: str
    zone: str
    zone_id: str
    available_ips: int
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SecurityGroup:
    id: str
    name: str


def expand(terms: Iterable[nodeclass.SelectorTerm]) -> list[nodeclass.SelectorTerm]:
    """Terms with the older ``aws-ids`` tag form turned into one ``id`` term per id."""
    out: list[nodeclass.SelectorTerm] = []
    for term in terms:
        ids = term.tags.get(AWS_IDS)
        if ids is None:
            out.append(term)
            continue
        out.extend(nodeclass.SelectorTerm(id=i.strip()) for i in ids.split(",") if i.strip())
    return out


def filters(term: nodeclass.SelectorTerm, *, id_filter: str, name_filter: str = "") -> list[dict[str, Any]]:
    """The EC2 ``Filters`` of one term (see the module docstring)."""
    out: list[dict[str, Any]] = []
    if term.id is not None:
        out.append({"Name": id_filter, "Values": [term.id]})
    if term.name is not None and name_filter:
        out.append({"Name": name_filter, "Values": [term.name]})
    for key, value in sorted(term.tags.items()):
        if value == "*":
            out.append({"Name": "tag-key", "Values": [key]})
        else:
            out.append({"Name": f"tag:{key}", "Values": [value]})
    return out


def subnets(ec2: Any, terms: Sequence[nodeclass.SelectorTerm]) -> list[Subnet]:
    """Every subnet some term selects, sorted by id."""
    found: dict[str, Subnet] = {}
    for term in expand(terms):
        fs = filters(term, id_filter="subnet-id")
        if not fs:
            continue
        for page in session.paginate(ec2, "describe_subnets", Filters=fs):
            for s in page.get("Subnets") or ():
                tags = tuple(sorted((str(t["Key"]), str(t.get("Value", ""))) for t in s.get("Tags") or ()))
                found[s["SubnetId"]] = Subnet(
                    id=s["SubnetId"], zone=s.get("AvailabilityZone", ""), zone_id=s.get("AvailabilityZoneId", ""),
                    available_ips=int(s.get("AvailableIpAddressCount") or 0), tags=tags)
    return [found[k] for k in sorted(found)]


def security_groups(ec2: Any, terms: Sequence[nodeclass.SelectorTerm]) -> list[SecurityGroup]:
    """Every security group some term selects, sorted by id."""
    found: dict[str, SecurityGroup] = {}
    for term in expand(terms):
        fs = filters(term, id_filter="group-id", name_filter="group-name")
        if not fs:
            continue
        for page in session.paginate(ec2, "describe_security_groups", Filters=fs):
            for g in page.get("SecurityGroups") or ():
                found[g["GroupId"]] = SecurityGroup(id=g["GroupId"], name=g.get("GroupName", ""))
    return [found[k] for k in sorted(found)]


def subnet_per_zone(candidates: Iterable[Subnet], zones: Iterable[str] | None = None) -> dict[str, Subnet]:
    """One subnet per zone: the one with the most free IPv4 addresses (ties: the lowest id)."""
    wanted = set(zones) if zones is not None else None
    best: dict[str, Subnet] = {}
    for s in candidates:
        if wanted is not None and s.zone not in wanted:
            continue
        cur = best.get(s.zone)
        if cur is None or (s.available_ips, cur.id) > (cur.available_ips, s.id):
            best[s.zone] = s
    return best
