"""The drift method of the disruption loop: which drifted nodes go now, and how they are replaced.

Karpenter v1.14's ``StaticDrift`` then ``Drift`` methods, called by
:class:`karpy.disruption.controller.DisruptionController` once per pass (after emptiness, before
consolidation), also while earlier commands wait for their replacements (their nodes count against
the budgets, see :attr:`karpy.disruption.snapshot.ClusterSnapshot.marked`):

1. drifted candidates of static NodePools (``spec.replicas``) first, each replaced one for one by a
   NodeClaim of the pool's template (:mod:`karpy.disruption.static_drift`);
2. then the other drifted candidates within the ``Drifted`` budgets: the empty ones deleted together,
   else the first (the first to drift) whose pods can be placed, deleted or replaced by the NodeClaims
   the scheduling simulation asks for ("Drift/Delete", "Drift/Replace"), executed at once.

A NodePool with karpy's wave annotations (:mod:`karpy.disruption.waves`) has its allowance cut to the
stricter of its budget and its max surge, and to nothing while its last wave is not done and settled;
its non-empty drifted nodes go in a wave: the first ones (in drift order) whose pods can be placed
together, as one command, no more replacements than max surge (a single node is replaced whatever it
needs). A NodePool held by its wave is not reported as blocked by a budget.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from karpy import settings as settings_mod
from karpy.controllers import state
from karpy.disruption import candidates, consolidation, observation, orchestrator, static_drift, waves
from karpy.disruption import snapshot as snapshot_mod
from karpy.provisioning import static

log = logging.getLogger("karpy.disruption")

Execute = Callable[[consolidation.Command, str], "orchestrator.Entry | None"]
"""Start a command (the orchestrator's ``execute``, with the controller's bookkeeping)."""
MAX_WAVE_REFUSALS = 10
"""Drifted nodes of a pool tried and refused, at most, while one wave is being put together."""


class DriftMethod:
    """See the module docstring."""

    def __init__(self, cluster_state: state.ClusterState, observer: observation.Observer,
                 settings: settings_mod.Settings, wave_tracker: waves.Waves, execute: Execute) -> None:
        self.state = cluster_state
        self.observer = observer
        self.settings = settings
        self.waves = wave_tracker
        self.execute = execute

    def disrupt(self, obs: observation.Observation) -> bool:
        """Start a drift command (or a wave) if a drifted candidate can go; True when one started."""
        self.waves.advance_all(obs.now)
        found = [obs.candidates[name] if name in obs.candidates else self.observer.eventual(obs, name)
                 for name in sorted(obs.drifted) if name in obs.candidates or name in obs.why_not]
        drifted = [c for c in found if c is not None]
        if not drifted:
            return False
        snap = self.observer.snapshot(obs)
        budget = snap.allowed_disruptions(consolidation.REASON_DRIFTED)
        pools = {c.nodepool.name: c.nodepool for c in drifted}
        allowed, _held = self.waves.limit(pools, obs.total, budget, obs.now, obs.pool_objs)
        fixed, drifted = static_drift.split(drifted)
        if fixed:
            cmds, blocked = self._static(snap, fixed, allowed)
            self._blocked(obs, blocked, budget)
            if self._start(cmds, obs):
                return True
        if not drifted:
            return False
        blocked = set()
        if self._dynamic(obs, snap, drifted, allowed, blocked):
            return True
        self._blocked(obs, blocked, budget)
        return False

    def _blocked(self, obs: observation.Observation, blocked: set[str], budget: dict[str, int]) -> None:
        """``DisruptionBlocked`` on the pools whose budget turned a node away (not those only a wave holds)."""
        self.observer.blocked(obs, {name for name in blocked if budget.get(name, 0) <= 0})

    # ------------------------------------------------------------------------------------- static

    def _static(self, snap: snapshot_mod.ClusterSnapshot, fixed: list[candidates.Candidate],
                allowed: dict[str, int]) -> tuple[list[consolidation.Command], set[str]]:
        """Karpenter's StaticDrift (before Drift): replace drifted nodes of static NodePools one for one;
        the commands and the pools blocked."""
        counts: dict[str, static.Counts] = {}
        for name in sorted({c.nodepool.name for c in fixed}):
            claims = [c for c in self.state.nodeclaims() if c.nodepool_name == name]
            counts[name] = static.count(claims, self._held_by_disruption)
        return static_drift.commands(snap, fixed, allowed, counts)

    def _held_by_disruption(self, claim: Any) -> bool:
        node = self.state.node(claim.status.node_name) if claim.status.node_name else None
        return node is not None and static.held_by_disruption(node.taints)

    # ------------------------------------------------------------------------------------ dynamic

    def _dynamic(self, obs: observation.Observation, snap: snapshot_mod.ClusterSnapshot,
                 drifted: list[candidates.Candidate], allowed: dict[str, int], blocked: set[str]) -> bool:
        ordered = candidates.order_drifted(drifted)
        cmd, empty_blocked = consolidation.drifted_empty(snap, ordered, allowed)
        blocked.update(empty_blocked)
        if cmd is not None:
            return self._start([cmd], obs)
        tried: set[str] = set()
        for c in ordered:
            pool = c.nodepool.name
            if allowed.get(pool, 0) <= 0:
                blocked.add(pool)
                continue
            if self.waves.configured(c.nodepool):
                if pool in tried:
                    continue
                tried.add(pool)
                out = self._wave_command(obs, snap, [x for x in ordered if x.nodepool.name == pool], allowed[pool])
            else:
                out = consolidation.evaluate(snap, [c], self.settings, reason=consolidation.REASON_DRIFTED,
                                             held=self._held(obs, [c]))
            if isinstance(out, consolidation.Command):
                return self._start([out], obs)
            log.info("disruption: drifted node %s cannot be disrupted yet: %s", c.name, out.explanation)
        return False

    def _wave_command(self, obs: observation.Observation, snap: snapshot_mod.ClusterSnapshot,
                      group: Sequence[candidates.Candidate], allowed: int
                      ) -> consolidation.Command | consolidation.Refusal:
        """One command for the next wave of a pool: its first drifted nodes (at most ``allowed``) whose
        pods can be placed together with no more than ``allowed`` replacements (one node alone whatever
        it needs)."""
        chosen: list[candidates.Candidate] = []
        best: consolidation.Command | None = None
        refusal: consolidation.Refusal | None = None
        refused = 0
        for c in group:
            if len(chosen) >= allowed or refused >= MAX_WAVE_REFUSALS:
                break
            trial = [*chosen, c]
            out = consolidation.evaluate(snap, trial, self.settings, reason=consolidation.REASON_DRIFTED,
                                         held=self._held(obs, trial))
            if isinstance(out, consolidation.Command) and (len(trial) == 1 or len(out.replacements) <= allowed):
                chosen, best = trial, out
                continue
            refused += 1
            if isinstance(out, consolidation.Refusal) and refusal is None:
                refusal = out
        if best is not None:
            return best
        return refusal or consolidation.Refusal(tuple(c.name for c in group), "no drifted node of the wave fits")

    def _held(self, obs: observation.Observation, cands: Sequence[candidates.Candidate]) -> frozenset[str]:
        """Pods of eventual candidates that no eviction moves now (see :meth:`Observer.held_pods`)."""
        held: frozenset[str] = frozenset()
        for c in cands:
            if c.name not in obs.candidates:
                held |= self.observer.held_pods(c, obs.now)
        return held

    # ------------------------------------------------------------------------------------ starting

    def _start(self, cmds: Sequence[consolidation.Command], obs: observation.Observation) -> bool:
        """Execute ``cmds``; the ones of NodePools with waves make each pool's new wave."""
        by_pool: dict[str, list[orchestrator.Entry]] = {}
        started = False
        for cmd in cmds:
            entry = self.execute(cmd, "")
            if entry is None:
                continue
            started = True
            for name in sorted({c.nodepool.name for c in cmd.candidates}):
                by_pool.setdefault(name, []).append(entry)
        for name, entries in sorted(by_pool.items()):
            pool = obs.pools.get(name)
            if pool is not None and self.waves.configured(pool):
                self.waves.started(name, entries, obs.now)
        return started
