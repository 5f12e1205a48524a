"""An invariant checker for chaos runs that does not use karpy's controllers.

It reads the world directly, as an auditor would: the in-memory cluster's objects (Pods, Nodes,
NodeClaims, Deployments, PodDisruptionBudgets, Events) and the simulated cloud's instances and their
tags, with its own small readings of selectors, PDB arithmetic and annotations (nothing from
``karpy.controllers``, ``karpy.disruption`` or ``karpy.provisioning``). A caller may rely on:

* :meth:`Checker.attach` watches Events so each eviction and each voluntary disruption is checked at
  the moment it happens; :meth:`Checker.sample` checks the periodic invariants (call it often, e.g.
  from the engine's progress callback); :meth:`Checker.finish` checks the final state;
* :attr:`Checker.violations` lists every violation found, each a short sentence with its time:
  - an instance of karpy's (all of karpy's tags) running without a NodeClaim for longer than
    ``gc_window`` seconds;
  - a NodeClaim without a running instance for longer than ``launch_window`` seconds;
  - two running instances for one NodeClaim (a double launch);
  - an eviction after which a PodDisruptionBudget's selected healthy pods are fewer than it demands
    (the expected count is the replicas of the pods' controllers, as the disruption controller reads it);
    the eviction of a pod that was Pending, Succeeded or Failed is not one (the Eviction API ignores
    budgets for those, as Kubernetes' ``canIgnorePDB`` does: e.g. the pods of a reclaimed spot instance);
  - a voluntary disruption (Karpenter's ``DisruptionTerminating`` for drift, emptiness or
    consolidation) of a node running a ``karpenter.sh/do-not-disrupt: "true"`` pod;
  - at the end, a Deployment without ``spec.replicas`` Running pods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
NODECLAIM_TAGS = ("karpenter.sh/nodeclaim", "karpenter.sh_nodeclaim")
NODEPOOL_TAGS = ("karpenter.sh/nodepool", "karpenter.sh_nodepool")


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    md = obj.get("metadata")
    return md if isinstance(md, Mapping) else {}


def _matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists, DoesNotExist), read independently."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or ():
        key, op, values = e.get("key"), e.get("operator"), list(e.get("values") or ())
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _healthy(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and not _md(pod).get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def _amount(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = float(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)


@dataclass
class Checker:
    cluster: Any
    """The in-memory cluster (``objects(kind)``, ``watch``)."""
    cloud: Any
    """The simulated cloud (``instances()``)."""
    clock: Any
    gc_window: float = 600.0
    launch_window: float = 900.0
    violations: list[str] = field(default_factory=list)
    samples: int = 0
    _orphan_since: dict[str, float] = field(default_factory=dict)
    _claimless_since: dict[str, float] = field(default_factory=dict)
    _seen_events: set[tuple[str, str]] = field(default_factory=set)
    _pod_labels: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    _pod_phase: dict[tuple[str, str], str] = field(default_factory=dict)
    """Each pod's phase as last seen (for a deleted pod: when it was deleted)."""
    _start: float = 0.0

    def attach(self) -> Checker:
        self._start = self.clock.now()
        self.cluster.watch("Pod", self._on_pod)
        self.cluster.watch("Event", self._on_event)
        return self

    def _on_pod(self, event: str, obj: dict[str, Any]) -> None:
        key = (str(_md(obj).get("namespace") or "default"), str(_md(obj).get("name")))
        self._pod_labels[key] = dict(_md(obj).get("labels") or {})
        self._pod_phase[key] = str((obj.get("status") or {}).get("phase") or "Pending")

    def _t(self) -> str:
        return f"+{self.clock.now() - self._start:.0f}s"

    # ---------------------------------------------------------------------------- events

    def _on_event(self, event: str, obj: dict[str, Any]) -> None:
        if event == "DELETED":
            return
        key = (str(_md(obj).get("namespace")), str(_md(obj).get("name")))
        if key in self._seen_events:
            return
        self._seen_events.add(key)
        reason = obj.get("reason")
        ref = obj.get("involvedObject") or {}
        if reason == "Evicted" and ref.get("kind") == "Pod":
            self._check_eviction(str(ref.get("namespace") or "default"), str(ref.get("name")))
        elif reason == "DisruptionTerminating" and ref.get("kind") == "Node":
            self._check_voluntary(str(ref.get("name")), str(obj.get("message") or ""))

    def _check_eviction(self, namespace: str, name: str) -> None:
        pods = [p for p in self.cluster.objects("Pod") if _md(p).get("namespace") == namespace]
        labels = self._pod_labels.get((namespace, name))
        if labels is None or self._pod_phase.get((namespace, name)) in ("Pending", "Succeeded", "Failed"):
            return
        for pdb in self.cluster.objects("PodDisruptionBudget"):
            if _md(pdb).get("namespace") != namespace:
                continue
            spec = pdb.get("spec") or {}
            if not _matches(spec.get("selector"), labels):
                continue
            selected = [p for p in pods if _matches(spec.get("selector"), _md(p).get("labels") or {})
                        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            healthy = sum(1 for p in selected if _healthy(p) and _md(p).get("name") != name)
            expected = self._expected(namespace, selected)
            if spec.get("minAvailable") is not None:
                need = _amount(spec["minAvailable"], expected, round_up=True)
            elif spec.get("maxUnavailable") is not None:
                need = expected - _amount(spec["maxUnavailable"], expected, round_up=False)
            else:
                continue
            if healthy < need:
                self.violations.append(f"{self._t()}: evicting {namespace}/{name} left {healthy} healthy pods under "
                                       f"PDB {_md(pdb).get('name')}, which demands {need}")

    def _expected(self, namespace: str, selected: list[dict[str, Any]]) -> int:
        """The disruption controller's expected count: the replicas of the pods' controllers, a Deployment's
        for its ReplicaSets' pods (terminating pods and their replacements would otherwise count twice);
        the live pods when a pod has none."""
        owners: set[tuple[str, str]] = set()
        for p in selected:
            ref = next((r for r in _md(p).get("ownerReferences") or () if r.get("controller")), None)
            if ref is None:
                return sum(1 for q in selected if not _md(q).get("deletionTimestamp"))
            owners.add((str(ref.get("kind")), str(ref.get("name"))))
        total = 0
        for kind, name in owners:
            owner = next((o for o in self.cluster.objects(kind) if _md(o).get("name") == name
                          and _md(o).get("namespace") == namespace), None)
            if owner is None:
                return sum(1 for q in selected if not _md(q).get("deletionTimestamp"))
            deploy_ref = next((r for r in _md(owner).get("ownerReferences") or ()
                               if r.get("controller") and r.get("kind") == "Deployment"), None)
            if kind == "ReplicaSet" and deploy_ref is not None:  # kube-controller-manager: the Deployment's
                deploy = next((o for o in self.cluster.objects("Deployment") if _md(o).get("name") ==
                               deploy_ref.get("name") and _md(o).get("namespace") == namespace), None)
                owner = deploy if deploy is not None else owner  # scale, not a just-scaled ReplicaSet's
            total += int((owner.get("spec") or {}).get("replicas", 1))
        return total

    def _check_voluntary(self, node: str, message: str) -> None:
        if not any(m in message for m in ("Drift", "Empty", "Underutilized", "Consolidation")):
            return
        for p in self.cluster.objects("Pod"):
            if (p.get("spec") or {}).get("nodeName") != node:
                continue
            if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            if (_md(p).get("annotations") or {}).get(DO_NOT_DISRUPT) == "true":
                self.violations.append(f"{self._t()}: node {node} was disrupted voluntarily ({message[:60]}) while "
                                       f"running do-not-disrupt pod {_md(p).get('namespace')}/{_md(p).get('name')}")

    # --------------------------------------------------------------------------- periodic

    def _karpys(self) -> list[Any]:
        out = []
        for inst in self.cloud.instances():
            if not getattr(inst, "running", False):
                continue
            tags = inst.tags
            if any(t in tags for t in NODEPOOL_TAGS) and any(t in tags for t in NODECLAIM_TAGS):
                out.append(inst)
        return out

    def sample(self) -> None:
        self.samples += 1
        now = self.clock.now()
        claims = {str(_md(c).get("name")): c for c in self.cluster.objects("NodeClaim")}
        by_pid = {str((c.get("status") or {}).get("providerID") or ""): c for c in claims.values()}
        instances = self._karpys()
        running = {i.provider_id for i in instances}
        per_claim: dict[str, list[str]] = {}
        for inst in instances:
            name = next((inst.tags[t] for t in NODECLAIM_TAGS if t in inst.tags), "")
            per_claim.setdefault(name, []).append(inst.provider_id)
            if inst.provider_id in by_pid:
                self._orphan_since.pop(inst.provider_id, None)
                continue
            since = self._orphan_since.setdefault(inst.provider_id, now)
            if now - since > self.gc_window:
                self.violations.append(f"{self._t()}: instance {inst.provider_id} has run without a NodeClaim for "
                                       f"{now - since:.0f}s")
                self._orphan_since[inst.provider_id] = now  # report again only after another window
        for name, pids in per_claim.items():
            if name and len(pids) > 1:
                self.violations.append(f"{self._t()}: NodeClaim {name} has {len(pids)} running instances "
                                       f"({', '.join(sorted(pids))})")
        for name, c in claims.items():
            pid = str((c.get("status") or {}).get("providerID") or "")
            if pid and pid in running:
                self._claimless_since.pop(name, None)
                continue
            since = self._claimless_since.setdefault(name, now)
            if now - since > self.launch_window:
                self.violations.append(f"{self._t()}: NodeClaim {name} has had no running instance for "
                                       f"{now - since:.0f}s")
                self._claimless_since[name] = now
        for gone in [n for n in self._claimless_since if n not in claims]:
            del self._claimless_since[gone]
        for gone in [p for p in self._orphan_since if p not in running]:
            del self._orphan_since[gone]

    def finish(self) -> None:
        """Every Deployment at its replicas, all Running."""
        self.sample()
        pods = list(self.cluster.objects("Pod"))
        for d in self.cluster.objects("Deployment"):
            ns = _md(d).get("namespace") or "default"
            spec = d.get("spec") or {}
            want = int(spec.get("replicas", 1))
            have = sum(1 for p in pods if (_md(p).get("namespace") or "default") == ns
                       and _matches(spec.get("selector"), _md(p).get("labels") or {}) and _healthy(p))
            if have != want:
                self.violations.append(f"{self._t()}: Deployment {ns}/{_md(d).get('name')} has {have} Running pods of "
                                       f"{want}")
