"""``karpy whatif``: what karpy would do to a real cluster's state, before it is installed.

:func:`run` replays a cluster dump (:mod:`karpy.simulator.whatif_state`) into the simulator at time 0:
managed nodes are adopted by the simulated cloud, unmanaged ones stay, running pods keep their nodes,
pending pods are pending. Then the very same controllers as ``karpy simulate`` run for ``for_seconds``
of virtual time (15 minutes by default: enough for a provisioning round and consolidation's 15 s
validation and replacements).

The answer (:class:`Answer`, JSON form ``{"before", "after", "actions", "unschedulable", ...}``):

* ``before`` / ``after``: nodes and $/h, in total and per NodePool (unmanaged nodes under
  ``(unmanaged)``, priced from their instance-type label when the catalog knows the type, else 0 and
  listed in ``unpriced``);
* ``actions``: in time order, every NodeClaim karpy launched (NodePool, instance type, zone, capacity
  type) and every node it disrupted with Karpenter's reason (``Consolidation/Delete``,
  ``Consolidation/Replace``, ``Drift/Replace``, ``Empty/Delete`` ...);
* ``unschedulable``: pods still pending at the end, with karpy's reason.

A caller may rely on: the same dump, NodePools and seed give the same answer; bad input raises only
:class:`karpy.api.errors.ValidationError`; nothing is written anywhere but the returned data (and the
report directory when asked).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from karpy import settings as settings_mod
from karpy.api import labels, nodeclaim
from karpy.cloudprovider import instancetype
from karpy.kube import errors as kube_errors
from karpy.kube import interface
from karpy.simulator import engine, scenario, whatif_state

DEFAULT_FOR = 15 * 60.0
UNMANAGED = engine.UNMANAGED


@dataclass(slots=True)
class Snapshot:
    """Nodes and $/h at one moment."""

    nodes: int = 0
    cost_per_hour: float = 0.0
    by_nodepool: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "costPerHour": round(self.cost_per_hour, 4),
                "byNodePool": {k: {"nodes": int(v["nodes"]), "costPerHour": round(v["costPerHour"], 4)}
                               for k, v in sorted(self.by_nodepool.items())}}


@dataclass(slots=True)
class Answer:
    before: Snapshot
    after: Snapshot
    actions: list[dict[str, Any]]
    unschedulable: list[dict[str, Any]]
    for_seconds: float
    unpriced: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    result: engine.Result | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before.to_dict(), "after": self.after.to_dict(), "actions": self.actions,
                "unschedulable": self.unschedulable, "forSeconds": self.for_seconds,
                "unpriced": self.unpriced, "dropped": dict(sorted(self.dropped.items())),
                "warnings": self.warnings}


def run(inputs: Sequence[tuple[str, str]], *, nodepools: Sequence[tuple[str, str]] = (),
        for_seconds: float = DEFAULT_FOR, seed: int = 0, cluster_name: str = "whatif",
        region: str | None = None) -> Answer:
    """Replay the dump ``inputs`` and run karpy on it; see the module docstring."""
    with whatif_state.gc_paused():
        r = _replay(inputs, nodepools, for_seconds=for_seconds, seed=seed, cluster_name=cluster_name, region=region)
    gc.freeze()  # the replayed cluster is not walked again by each of the run's garbage collections
    try:
        result = r.sim.run()
    finally:
        gc.unfreeze()
    after = _snapshot(result.objects["nodes"], r.sim, r.prices, r.unpriced)
    actions = sorted([*r.launches.actions, *_disruptions(result)],
                     key=lambda a: (a["t"], a["action"], a.get("node") or a.get("nodeclaim") or ""))
    return Answer(before=r.before, after=after, actions=actions, unschedulable=_unschedulable(result),
                  for_seconds=for_seconds, unpriced=sorted(r.unpriced), warnings=r.state.warnings,
                  dropped=r.state.dropped, result=result)


@dataclass(slots=True)
class _Replayed:
    """The simulation at time 0 with the dump's state in it, ready to run."""

    sim: engine.Simulation
    state: whatif_state.State
    launches: _LaunchRecorder
    prices: dict[tuple[str, str, str], float]
    unpriced: set[str]
    before: Snapshot


def _replay(inputs: Sequence[tuple[str, str]], nodepools: Sequence[tuple[str, str]], *, for_seconds: float,
            seed: int, cluster_name: str, region: str | None) -> _Replayed:
    state = whatif_state.read(inputs, nodepools)
    provider = state.provider
    cloud = scenario.Cloud(provider=provider, region=region or state.region, zones=())
    scn = scenario.Scenario(
        name="whatif", source=", ".join(src for src, _ in inputs), cloud=cloud,
        settings=settings_mod.Settings(cluster_name=cluster_name), cluster_name=cluster_name,
        until=for_seconds, seed=seed, launch_latency=60.0,
        objects=tuple([*state.objects, *state.nodeclaims, *state.nodes]), steps=())
    sim = engine.Simulation(scn, seed=seed, until=for_seconds)
    prices = _prices(sim.cloud.get_instance_types(None))
    sim.wire()  # the NodeClasses exist now: an adopted instance's image is the one its NodeClass resolves to
    unpriced: set[str] = set()
    for m in state.managed:
        try:
            sim.cloud.adopt(m.provider_id, m.instance_type, m.zone, m.capacity_type, nodepool_name=m.nodepool,
                            nodeclaim_name=m.nodeclaim, node_class=m.node_class,
                            node_class_ref=_ref(m), launch_time=sim.clock.now(), hostname=m.node,
                            image_id=m.image_id)
            sim.bridge.adopted(m.provider_id)
        except (KeyError, ValueError) as exc:
            state.warnings.append(f"node {m.node}: not adopted ({exc}); it stays as an unmanaged node")
    launches = _LaunchRecorder(sim, {m.nodeclaim for m in state.managed})
    sim.cluster.watch("NodeClaim", launches.handle)
    _create_pods(sim, state)
    before = _snapshot(sim.cluster.list("Node"), sim, prices, unpriced)
    return _Replayed(sim, state, launches, prices, unpriced, before)


def _ref(m: whatif_state.ManagedNode) -> nodeclaim.NodeClassRef | None:
    if not m.node_class:
        return None
    aws = m.provider_id.startswith("aws")
    return nodeclaim.NodeClassRef(group=labels.AWS_GROUP if aws else labels.AZURE_GROUP,
                                  kind="EC2NodeClass" if aws else "AKSNodeClass", name=m.node_class)


def _create_pods(sim: engine.Simulation, state: whatif_state.State) -> None:
    """Bound and pending pods, their ReplicaSet owner references pointing at the new uids."""
    uids = {(interface.namespace_of(rs) or "default", interface.name_of(rs)): interface.uid_of(rs)
            for rs in sim.cluster.list("ReplicaSet")}
    for p in [*state.bound_pods, *state.pending_pods]:
        ns = interface.namespace_of(p) or "default"
        refs = []
        for r in interface.owner_references(p):
            uid = uids.get((ns, str(r.get("name"))))
            if uid:
                refs.append({**r, "uid": uid, "blockOwnerDeletion": True})
        md = p["metadata"]
        if refs:
            md["ownerReferences"] = refs
        else:
            md.pop("ownerReferences", None)
        try:
            sim.cluster.create(p)
        except kube_errors.KubeError as exc:
            state.warnings.append(f"pod {ns}/{interface.name_of(p)}: not created ({exc.message})")


def _prices(types: Sequence[instancetype.InstanceType]) -> dict[tuple[str, str, str], float]:
    out: dict[tuple[str, str, str], float] = {}
    for it in types:
        for o in it.offerings:
            out[(it.name, o.zone, o.capacity_type)] = o.price
            out.setdefault((it.name, "", o.capacity_type), o.price)
    return out


def _snapshot(nodes: Sequence[Mapping[str, Any]], sim: engine.Simulation,
              prices: Mapping[tuple[str, str, str], float], unpriced: set[str]) -> Snapshot:
    snap = Snapshot()
    live = {i.provider_id: i.price for i in sim.cloud.instances()}
    for n in nodes:
        lb = interface.labels_of(n)
        pool = lb.get(labels.NODEPOOL) or UNMANAGED
        pid = str((n.get("spec") or {}).get("providerID") or "")
        price = live.get(pid)
        if price is None:
            itype = lb.get(labels.INSTANCE_TYPE) or lb.get("beta.kubernetes.io/instance-type") or ""
            ct = lb.get(labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_ON_DEMAND)
            if lb.get("eks.amazonaws.com/capacityType") == "SPOT":
                ct = labels.CAPACITY_TYPE_SPOT
            price = prices.get((itype, lb.get(labels.ZONE, ""), ct), prices.get((itype, "", ct)))
            if price is None:
                unpriced.add(interface.name_of(n))
                price = 0.0
        row = snap.by_nodepool.setdefault(pool, {"nodes": 0.0, "costPerHour": 0.0})
        row["nodes"] += 1
        row["costPerHour"] += price
        snap.nodes += 1
        snap.cost_per_hour += price
    return snap


class _LaunchRecorder:
    """Records every NodeClaim the first time it carries a provider ID (launched), except adopted ones."""

    def __init__(self, sim: engine.Simulation, adopted: set[str]) -> None:
        self.sim = sim
        self.seen = set(adopted)
        self.actions: list[dict[str, Any]] = []

    def handle(self, event: str, obj: dict[str, Any]) -> None:
        name = interface.name_of(obj)
        if event == interface.DELETED or name in self.seen or not (obj.get("status") or {}).get("providerID"):
            return
        self.seen.add(name)
        lb = interface.labels_of(obj)
        self.actions.append({
            "t": round(self.sim.clock.now() - self.sim.start, 3), "action": "launch", "nodeclaim": name,
            "nodepool": lb.get(labels.NODEPOOL, ""), "instanceType": lb.get(labels.INSTANCE_TYPE, ""),
            "zone": lb.get(labels.ZONE, ""), "capacityType": lb.get(labels.CAPACITY_TYPE, "")})


def _disruptions(result: engine.Result) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ev in result.events:
        involved = ev["involvedObject"]
        if ev["reason"] == "DisruptionTerminating" and involved.get("kind") == "Node":
            why = ev["message"].removeprefix("Disrupting Node: ")
            out.append({"t": ev["t"], "action": "disrupt", "node": involved.get("name"), "reason": why,
                        "message": ev["message"]})
    return out


def _unschedulable(result: engine.Result) -> list[dict[str, Any]]:
    last: dict[tuple[str, str], str] = {}
    for ev in result.events:
        inv = ev["involvedObject"]
        if inv.get("kind") == "Pod" and ev["reason"] == "FailedScheduling":
            key = (str(inv.get("namespace") or "default"), str(inv.get("name")))
            if ev["source"] == "karpenter" or key not in last:
                last[key] = ev["message"]
    out = []
    for p in result.objects["pods"]:
        if (p.get("status") or {}).get("phase", "Pending") != "Pending" or (p.get("spec") or {}).get("nodeName"):
            continue
        key = (interface.namespace_of(p) or "default", interface.name_of(p))
        out.append({"namespace": key[0], "name": key[1], "reason": last.get(key, "")})
    return sorted(out, key=lambda r: (r["namespace"], r["name"]))


def render_json(answer: Answer) -> str:
    return json.dumps(answer.to_dict(), indent=2, sort_keys=False) + "\n"


def write_json(answer: Answer, file: IO[str], *, chunk: int = 1 << 16) -> None:
    """:func:`render_json`'s very text, written to ``file`` in pieces of about ``chunk`` characters as it
    is encoded: an answer with tens of thousands of pending pods is never one string in memory."""
    pieces: list[str] = []
    size = 0
    for piece in json.JSONEncoder(indent=2).iterencode(answer.to_dict()):
        pieces.append(piece)
        size += len(piece)
        if size >= chunk:
            file.write("".join(pieces))
            pieces.clear()
            size = 0
    pieces.append("\n")
    file.write("".join(pieces))


def render_table(answer: Answer, file: IO[str], *, width: int | None = None) -> None:
    """Before/after per NodePool, the actions and the pods left pending, as rich tables."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=file, width=width or 160, no_color=True, highlight=False)
    cost = Table(title=f"Cost per NodePool (after {answer.for_seconds / 60:g} simulated minutes)")
    for col in ("NODEPOOL", "NODES BEFORE", "$/H BEFORE", "NODES AFTER", "$/H AFTER"):
        cost.add_column(col)
    pools = sorted(set(answer.before.by_nodepool) | set(answer.after.by_nodepool))
    for pool in [*pools, "TOTAL"]:
        b = answer.before.by_nodepool.get(pool, {"nodes": 0, "costPerHour": 0.0})
        a = answer.after.by_nodepool.get(pool, {"nodes": 0, "costPerHour": 0.0})
        if pool == "TOTAL":
            b = {"nodes": answer.before.nodes, "costPerHour": answer.before.cost_per_hour}
            a = {"nodes": answer.after.nodes, "costPerHour": answer.after.cost_per_hour}
        cost.add_row(escape(pool), str(int(b["nodes"])), f"{b['costPerHour']:.4f}", str(int(a["nodes"])),
                     f"{a['costPerHour']:.4f}")
    console.print(cost)
    acts = Table(title="Actions")
    for col in ("AT", "ACTION", "OBJECT", "DETAIL"):
        acts.add_column(col)
    for act in answer.actions:
        if act["action"] == "launch":
            detail = f"{act['nodepool']}: {act['instanceType']} {act['capacityType']} in {act['zone']}"
            acts.add_row(f"{act['t']:.0f}s", "launch", escape(str(act["nodeclaim"])), escape(detail))
        else:
            acts.add_row(f"{act['t']:.0f}s", "disrupt", escape(str(act["node"])), escape(str(act["reason"])))
    console.print(acts)
    if answer.unschedulable:
        pend = Table(title="Pods that stay pending")
        for col in ("NAMESPACE", "NAME", "REASON"):
            pend.add_column(col)
        for r in answer.unschedulable:
            pend.add_row(escape(r["namespace"]), escape(r["name"]), escape(r["reason"]))
        console.print(pend)
    for w in answer.warnings:
        console.print(escape(f"warning: {w}"))
