"""An independent check that a scheduling plan can really be bound, written without the scheduler.

It reads plain data only - pod manifests (as the API returns them) and nodes as dicts - and the
API's quantity parser; it imports nothing from ``karpy.provisioning`` or ``karpy.scheduling``, so a
bug in the scheduler's own topology code cannot hide itself here.

A plan is ``nodes`` - ``{"name", "labels", "allocatable" (milli-units per resource), "zones"
(the zones the node may still land in: one for a node or a narrowed claim, several for a claim
the cloud may launch in any of them)}`` - and ``placements`` - ``(pod manifest, node name)``.

What :func:`violations` checks, as the kube-scheduler does at bind time, for the worst order it
may bind in (the checked pod binds last) and the worst zone the cloud may pick for an open claim:

* resources: the pods' requests (containers, init containers, overhead) and the pod count fit the
  node's allocatable;
* host ports: no two pods on a node use the same (ip, protocol, port), ``0.0.0.0`` clashing with all;
* required pod anti-affinity: no other pod matching the term's selector shares the pod's domain
  (and the inverse rule: no pod shares a domain with a pod whose anti-affinity it matches);
* required pod affinity: every domain holding pods of a term has a matching pod that does not
  itself depend on the term, except one domain, where the first pod bootstraps the group;
* topology spread (``DoNotSchedule``): ``count(domain) - min(count over eligible domains) <=
  maxSkew`` for every pod carrying the constraint, counting *every* pod matching the selector in
  the pod's namespace (as Kubernetes does) and ``minDomains``.

Returns human-readable violations (empty: the plan holds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from karpy.api import quantity

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
Node = Mapping[str, Any]
Placement = tuple[Mapping[str, Any], str]


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or ())
        have = labels.get(key)
        if op == "In" and have not in values:
            return False
        if op == "NotIn" and have in values:
            return False
        if op == "Exists" and have is None:
            return False
        if op == "DoesNotExist" and have is not None:
            return False
    return True


def _requests(p: Mapping[str, Any]) -> dict[str, int]:
    spec = p.get("spec") or {}

    def read(c: Mapping[str, Any]) -> dict[str, int]:
        res = c.get("resources") or {}
        return {k: quantity.parse_milli(v) for k, v in (res.get("requests") or res.get("limits") or {}).items()}

    total: dict[str, int] = defaultdict(int)
    for c in spec.get("containers") or ():
        for k, v in read(c).items():
            total[k] += v
    for c in spec.get("initContainers") or ():
        for k, v in read(c).items():
            total[k] = max(total[k], v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] += quantity.parse_milli(v)
    total["pods"] = 1000
    return dict(total)


def _ports(p: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    out = []
    for c in (p.get("spec") or {}).get("containers") or ():
        for port in c.get("ports") or ():
            if port.get("hostPort"):
                out.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", int(port["hostPort"])))
    return out


def _domains(node: Node, key: str) -> frozenset[str]:
    """Values ``node`` may have for ``key`` (several for an open claim's zone)."""
    if key == ZONE and node.get("zones"):
        return frozenset(node["zones"])
    value = (node.get("labels") or {}).get(key)
    if key == HOST and value is None:
        value = node["name"]
    return frozenset() if value is None else frozenset({value})


def _terms(p: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    aff = ((p.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(aff.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


def _term_namespaces(p: Mapping[str, Any], term: Mapping[str, Any]) -> frozenset[str]:
    ns = term.get("namespaces")
    return frozenset(ns) if ns else frozenset({p["metadata"].get("namespace", "default")})


class _Plan:
    def __init__(self, nodes: Sequence[Node], placements: Sequence[Placement]) -> None:
        self.nodes = {n["name"]: n for n in nodes}
        self.placements = list(placements)
        self.by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for p, n in placements:
            self.by_node[n].append(p)

    def matching(self, selector: Mapping[str, Any] | None, namespaces: frozenset[str]) -> list[Placement]:
        return [(p, n) for p, n in self.placements
                if p["metadata"].get("namespace", "default") in namespaces
                and _matches(selector, p["metadata"].get("labels") or {})]


def violations(nodes: Sequence[Node], placements: Sequence[Placement], bound: Collection[str] = ()) -> list[str]:
    """Every way the plan breaks a rule of the module docstring (empty: it holds).

    ``bound``: pods (``namespace/name``) already running where the plan has them. They count for
    every rule, but their own topology spreads are not checked again: the kube-scheduler checks a
    pod's spread when it binds, never afterwards (anti-affinity is still checked both ways: a
    new pod may not join a running pod's anti-affinity domain)."""
    plan = _Plan(nodes, placements)
    out: list[str] = []
    out.extend(_resources(plan))
    out.extend(_host_ports(plan))
    out.extend(_anti_affinity(plan))
    out.extend(_affinity(plan))
    out.extend(_spread(plan, frozenset(bound)))
    return out


def _name(p: Mapping[str, Any]) -> str:
    return f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"


def _resources(plan: _Plan) -> Iterable[str]:
    for name, pods in sorted(plan.by_node.items()):
        node = plan.nodes.get(name)
        if node is None:
            yield f"node {name}: pods placed on a node that is not in the plan"
            continue
        used: dict[str, int] = defaultdict(int)
        for p in pods:
            for k, v in _requests(p).items():
                used[k] += v
        for k, v in sorted(used.items()):
            have = int(node["allocatable"].get(k, 0))
            if v > have:
                yield f"node {name}: {k} requested {v} > allocatable {have}"


def _host_ports(plan: _Plan) -> Iterable[str]:
    for name, pods in sorted(plan.by_node.items()):
        seen: dict[tuple[str, int], set[str]] = defaultdict(set)
        for p in pods:
            for ip, proto, port in _ports(p):
                ips = seen[(proto, port)]
                if ip in ips or "0.0.0.0" in ips or (ip == "0.0.0.0" and ips):
                    yield f"node {name}: host port {proto}/{port} used twice ({_name(p)})"
                ips.add(ip)


def _anti_affinity(plan: _Plan) -> Iterable[str]:
    for p, n in plan.placements:
        for term in _terms(p, "podAntiAffinity"):
            key = term["topologyKey"]
            mine = _domains(plan.nodes[n], key)
            for q, m in plan.matching(term.get("labelSelector"), _term_namespaces(p, term)):
                if q is p or not (mine & _domains(plan.nodes[m], key)):
                    continue
                yield f"pod {_name(p)}: anti-affinity on {key} shares a domain with {_name(q)} (nodes {n}, {m})"


def _affinity(plan: _Plan) -> Iterable[str]:
    groups: dict[tuple[str, str, frozenset[str]], list[Placement]] = defaultdict(list)
    terms: dict[tuple[str, str, frozenset[str]], Mapping[str, Any]] = {}
    for p, n in plan.placements:
        for term in _terms(p, "podAffinity"):
            k = (term["topologyKey"], repr(term.get("labelSelector")), _term_namespaces(p, term))
            groups[k].append((p, n))
            terms[k] = term
    for k, carriers in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        key, _, namespaces = k
        term = terms[k]
        carrier_ids = {id(p) for p, _ in carriers}
        anchors = [(q, m) for q, m in plan.matching(term.get("labelSelector"), namespaces) if id(q) not in carrier_ids]
        needs_bootstrap: set[frozenset[str]] = set()
        for p, n in carriers:
            dom = _domains(plan.nodes[n], key)
            if len(dom) != 1:
                yield f"pod {_name(p)}: affinity on {key} but its node {n} may land in any of {sorted(dom)}"
                continue
            if any(_domains(plan.nodes[m], key) == dom for _, m in anchors):
                continue
            if not _matches(term.get("labelSelector"), p["metadata"].get("labels") or {}):
                yield f"pod {_name(p)}: affinity on {key} and no matching pod in {sorted(dom)}"
                continue
            needs_bootstrap.add(dom)
        if len(needs_bootstrap) > 1:
            yield (f"affinity on {key} ({term.get('labelSelector')}): pods in {len(needs_bootstrap)} domains "
                   f"without an anchor; only the first pod of a group may start one")


def _spread(plan: _Plan, bound: frozenset[str]) -> Iterable[str]:
    all_domains: dict[str, set[str]] = defaultdict(set)
    for node in plan.nodes.values():
        for key in (ZONE, HOST):
            all_domains[key] |= _domains(node, key)
    checked: dict[tuple[str, str, str, int, int], dict[str, tuple[int, int]]] = {}
    for p, n in plan.placements:
        ns = p["metadata"].get("namespace", "default")
        if bound and _name(p) in bound:
            continue
        for c in (p.get("spec") or {}).get("topologySpreadConstraints") or ():
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            key, skew = c["topologyKey"], int(c.get("maxSkew", 1))
            min_domains = int(c.get("minDomains") or 1)
            ck = (key, repr(c.get("labelSelector")), ns, skew, min_domains)
            counts = checked.get(ck)
            if counts is None:
                counts = _spread_counts(plan, key, c.get("labelSelector"), ns, all_domains[key])
                checked[ck] = counts
            mine = _domains(plan.nodes[n], key)
            if key != HOST and len(mine) != 1:
                yield f"pod {_name(p)}: spread on {key} but its node {n} may land in any of {sorted(mine)}"
                continue
            eligible = [v for v in counts]
            low = 0 if len(eligible) < min_domains else min(counts[v][0] for v in eligible)
            (d,) = mine
            worst = counts[d][0] + counts[d][1]
            if worst - low > skew:
                yield (f"pod {_name(p)}: spread on {key} (maxSkew {skew}) puts {worst} matching pods in {d}, "
                       f"minimum {low}")


def _spread_counts(plan: _Plan, key: str, selector: Mapping[str, Any] | None, namespace: str,
                   domains: set[str]) -> dict[str, tuple[int, int]]:
    """Domain -> (pods surely there, pods on open claims that may land there)."""
    counts = {d: [0, 0] for d in domains}
    for _, n in plan.matching(selector, frozenset({namespace})):
        dom = _domains(plan.nodes[n], key)
        if len(dom) == 1:
            counts[next(iter(dom))][0] += 1
        else:
            for d in dom:
                counts[d][1] += 1
    return {d: (v[0], v[1]) for d, v in counts.items()}
