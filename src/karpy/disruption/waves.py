"""Drift rolled out in waves, by karpy's NodePool annotations, beside Karpenter's disruption budgets.

Karpenter starts one drift command (one node, unless empty) per pass of its disruption loop, without
waiting for the earlier ones' replacements, until the ``Drifted`` budget is used up: its only pace is the
budget (kubernetes-sigs/karpenter#1775 asks for more control). A NodePool with ``karpy.io/drift-max-surge``
and/or ``karpy.io/drift-wave-settle`` (:mod:`karpy.disruption.wave_config`; ``docs/drift-waves.md``)
drifts in *waves* instead:

* a wave is one pass's drift of one NodePool: up to ``min(max surge, the Drifted budget's allowance)``
  drifted nodes (the stricter wins), replaced together (:mod:`karpy.disruption.drift_method`);
* it is *done* when every replacement NodeClaim is Initialized with its Node Ready, every node it
  replaces is drained (no pod but DaemonSet pods left, or gone), and no pod of a controller whose pods
  it displaced is pending; or when its command failed (the orchestrator abandoned it); or, for the
  pods, :data:`POD_WAIT` after its replacements were Ready (logged);
* the pool's next wave starts no earlier than ``done + settle``.

A value karpy cannot read is reported once per value (a Warning event :data:`INVALID_REASON` on the
NodePool and a warning log line naming object, field, expected and found) and that field keeps its
default. Without either annotation nothing changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import nodepool as nodepool_mod
from karpy.controllers import state as state_mod
from karpy.disruption import candidates as candidates_mod
from karpy.disruption import orchestrator as orchestrator_mod
from karpy.disruption import wave_config
from karpy.kube import events

log = logging.getLogger("karpy.disruption.waves")

INVALID_REASON = "InvalidDriftWave"
"""The reason of the Warning event on a NodePool whose wave annotation karpy cannot read."""
POD_WAIT = 1800.0
"""Seconds a wave waits, at most, for the pods it displaced to be scheduled again (a pod that can never
be scheduled must not stop drift for good); its replacements must be Ready whatever the time."""
HISTORY = 256
"""Waves kept in :attr:`Waves.history` (the newest)."""


@dataclass
class Wave:
    """One NodePool's wave: the commands started together and what is known of their progress."""

    pool: str
    started: float
    entries: list[orchestrator_mod.Entry]
    owners: frozenset[str]
    """UIDs of the controllers whose pods the wave displaces."""
    ready_at: float | None = None
    done_at: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def replacements(self) -> list[str]:
        return [name for e in self.entries for name in e.replacements]

    @property
    def candidates(self) -> list[candidates_mod.Candidate]:
        return [c for e in self.entries for c in e.command.candidates]


class Waves:
    """The waves of every NodePool that asks for them (see the module docstring)."""

    def __init__(self, cluster_state: state_mod.ClusterState, recorder: events.EventRecorder) -> None:
        self.state = cluster_state
        self.recorder = recorder
        self.current: dict[str, Wave] = {}
        """The last wave of each NodePool (kept after it is done, until its settle time has passed)."""
        self.history: list[Wave] = []
        self._reported: set[tuple[str, str, str]] = set()

    # ---------------------------------------------------------------------------------- settings

    def config(self, pool: nodepool_mod.NodePool, raw: Mapping[str, Any] | None = None) -> wave_config.Config | None:
        """``pool``'s wave settings; a value that cannot be read is reported once (event on ``raw``, the
        NodePool object, and a warning log line) and its default kept."""
        cfg, problems = wave_config.parse(pool.name, pool.metadata.annotations)
        for p in problems:
            key = (pool.name, p.path, str(p.found))
            if key in self._reported:
                continue
            self._reported.add(key)
            message = f"{p}; {wave_config.default_kept(p)}"
            log.warning("disruption: %s", message)
            if raw is not None:
                self.recorder.warning(raw, INVALID_REASON, message)
        return cfg

    # --------------------------------------------------------------------------------- the gate

    def limit(self, pools: Mapping[str, nodepool_mod.NodePool], totals: Mapping[str, int],
              allowed: Mapping[str, int], now: float, raws: Mapping[str, Mapping[str, Any]] | None = None
              ) -> tuple[dict[str, int], set[str]]:
        """The ``Drifted`` allowance per NodePool with the waves applied (the stricter of budget and max
        surge; 0 while the pool's last wave is not done or still settling), and the pools a wave holds."""
        out = dict(allowed)
        held: set[str] = set()
        for name, pool in pools.items():
            cfg = self.config(pool, (raws or {}).get(name))
            if cfg is None:
                continue
            if not self.open(name, cfg, now):
                out[name] = 0
                held.add(name)
                continue
            out[name] = min(out.get(name, 0), cfg.surge(totals.get(name, 0)))
        return out, held

    def open(self, pool: str, cfg: wave_config.Config, now: float) -> bool:
        """The pool's last wave is done and settled (or there was none)."""
        wave = self.current.get(pool)
        if wave is None:
            return True
        self.advance(wave, now)
        return wave.done_at is not None and now + 1e-9 >= wave.done_at + cfg.settle

    def configured(self, pool: nodepool_mod.NodePool) -> bool:
        """The pool asks for waves (a readable annotation)."""
        return wave_config.parse(pool.name, pool.metadata.annotations)[0] is not None

    def started(self, pool: str, entries: Sequence[orchestrator_mod.Entry], now: float) -> Wave | None:
        """Record the wave ``entries`` (the commands just started for ``pool``) make; None when none started."""
        if not entries:
            return None
        owners = frozenset(ref.uid for e in entries for c in e.command.candidates for p in c.pods
                           if candidates_mod.is_reschedulable(p)
                           and (ref := p.metadata.controller) is not None and ref.uid)
        wave = Wave(pool, now, list(entries), owners)
        self.current[pool] = wave
        self.history.append(wave)
        del self.history[:-HISTORY]
        log.info("disruption: drift wave of NodePool %s started: %d node(s) (%s), %d replacement(s)", pool,
                 len(wave.candidates), ", ".join(c.name for c in wave.candidates), len(wave.replacements))
        return wave

    def next_deadline(self, pools: Mapping[str, nodepool_mod.NodePool], now: float) -> float | None:
        """When a settling wave lets its pool's next wave start, or a wave's wait for its pods runs out (for the
        controller's quiet passes), after ``now``."""
        ends = []
        for name, wave in self.current.items():
            pool = pools.get(name)
            cfg = self.config(pool) if pool is not None else None
            if wave.done_at is not None and cfg is not None:
                ends.append(wave.done_at + cfg.settle)
            elif wave.done_at is None and wave.ready_at is not None:
                ends.append(wave.ready_at + POD_WAIT)  # its pods' wait runs out
        ends = [t for t in ends if t > now]
        return min(ends) if ends else None

    # ---------------------------------------------------------------------------------- progress

    def advance_all(self, now: float) -> None:
        """Move every NodePool's last wave on (each disruption pass, drifted nodes or not)."""
        for wave in self.current.values():
            self.advance(wave, now)

    def advance(self, wave: Wave, now: float) -> None:
        """Move ``wave`` on: Ready when its replacements are, done when its pods are placed again too."""
        if wave.done_at is not None:
            return
        failed = [e.outcome for e in wave.entries if e.outcome not in ("", "executed")]
        if failed:
            wave.done_at = now
            wave.notes.append(f"failed: {failed[0]}")
            log.info("disruption: drift wave of NodePool %s failed (%s); it is over", wave.pool, failed[0])
            return
        if wave.ready_at is None:
            if any(not e.candidates_deleted for e in wave.entries) or not self._replacements_ready(wave):
                return
            wave.ready_at = now
        if not self._drained(wave) or self._displaced_pending(wave):
            if now - wave.ready_at < POD_WAIT:
                return
            wave.notes.append(f"pods not scheduled within {POD_WAIT:.0f}s")
            log.warning("disruption: drift wave of NodePool %s: its pods were not all scheduled again within "
                        "%.0fs of its replacements being Ready; the wave counts as done", wave.pool, POD_WAIT)
        wave.done_at = now
        log.info("disruption: drift wave of NodePool %s is done (%d node(s) replaced)", wave.pool,
                 len(wave.candidates))

    def _replacements_ready(self, wave: Wave) -> bool:
        for name in wave.replacements:
            claim = self.state.nodeclaim(name)
            if claim is None or not claim.is_true("Initialized") or not claim.status.node_name:
                return False
            node = self.state.node(claim.status.node_name)
            if node is None or not node.ready:
                return False
        return True

    def _drained(self, wave: Wave) -> bool:
        for c in wave.candidates:
            if self.state.node(c.name) is None:
                continue
            if any(not (p.is_daemonset_pod or p.is_terminal) for p in self.state.pods_on(c.name)):
                return False
        return True

    def _displaced_pending(self, wave: Wave) -> bool:
        if not wave.owners or not self.state.pending_pod_count():
            return False
        for p in self.state.pending_pods():
            ref = p.metadata.controller
            if ref is not None and ref.uid in wave.owners:
                return True
        return False
