"""The real-time driver: karpy's controller Manager on the wall clock, fed by watch events.

``karpy simulate`` moves a virtual clock to the Manager's next due time; a real deployment uses
:class:`Driver` instead, with the *same* Manager and controllers. One loop thread does everything that
touches controller state:

1. pump the cluster's queued watch events (an adapter that has ``pump(timeout) -> int`` delivers its
   watch handlers only on the thread that pumps; the in-memory cluster delivers them at write time);
2. hand finished cloud calls back (:meth:`karpy.controllers.cloudcalls.Pool.drain`): their outcomes
   are applied by the controllers' next reconcile, on this thread;
3. tick leader election (:mod:`karpy.controllers.leader`) when an attempt is due;
4. while leading and once the caches have their first lists (``synced``, as controller-runtime waits
   for its caches before starting controllers), run the reconciles that are due, one at a time,
   checking leadership before each one (losing the lease stops reconciling at once) and pumping
   again every :attr:`Driver.batch` reconciles;
5. sleep until the next due item, the next leader-election attempt, a cloud-call completion or
   :meth:`Driver.wake` (at most :attr:`Driver.poll` seconds when events must be pumped).

Cloud calls never block the loop: the Manager's ``calls`` is a :class:`~karpy.controllers.cloudcalls.Pool`.

:meth:`Driver.run` returns why it stopped: ``"stopped"`` after :meth:`Driver.stop` (SIGTERM), once
in-flight cloud calls finished (at most ``shutdown_grace`` seconds), their results were written and
the lease was released; ``"lost-leadership"`` when the lease was lost (the process should exit
non-zero so that Kubernetes restarts it, as controller-runtime does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from karpy import clock as clock_mod
from karpy.controllers import cloudcalls, leader, runtime

log = logging.getLogger("karpy.controllers.realtime")

STOPPED = "stopped"
LOST_LEADERSHIP = "lost-leadership"


class EventPump(Protocol):
    """A cluster whose watch handlers run on the thread that pumps (the Kubernetes adapter)."""

    def pump(self, timeout: float) -> int:
        """Deliver queued watch events on this thread; wait at most ``timeout`` for the first one."""
        ...


@dataclass
class Status:
    """What the health endpoints report."""

    running: bool
    synced: bool
    leader: bool
    state: str
    last_loop: float


class Driver:
    """See the module docstring."""

    def __init__(self, manager: runtime.Manager, clock: clock_mod.Clock, *,
                 pool: cloudcalls.Pool | None = None, elector: leader.LeaderElector | None = None,
                 pump: EventPump | None = None, synced: Callable[[], bool] | None = None,
                 poll: float = 0.05, idle: float = 1.0, batch: int = 50, shutdown_grace: float = 25.0,
                 renew_in_background: bool = False) -> None:
        self.manager = manager
        self.clock = clock
        self.pool = pool
        self.elector = elector
        self.pump = pump
        self._synced = synced
        self.poll = poll
        self.idle = idle
        self.batch = batch
        self.shutdown_grace = shutdown_grace
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._running = False
        self.last_loop = 0.0
        self.loops = 0
        self.reconciles = 0
        self.renew_in_background = renew_in_background
        """Renew the Lease on a thread of its own during :meth:`run` (Karpenter's elector is a goroutine of its
        own): a reconcile that takes longer than the renew deadline (a drain, a consolidation pass on a busy
        machine) must not cost the Lease. Only with a cluster that accepts calls from any thread (the adapter);
        :meth:`step` alone ticks the elector inline (tests, the in-memory cluster)."""
        self._elector_lock = threading.Lock()
        self._renewer: threading.Thread | None = None

    # ----------------------------------------------------------------------------- control

    def wake(self) -> None:
        """Wake the loop (thread-safe): new events or a finished cloud call."""
        self._wake.set()

    def stop(self) -> None:
        """Ask the loop to shut down gracefully (thread-safe; called from the SIGTERM handler)."""
        self._stopping.set()
        self._wake.set()

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def status(self) -> Status:
        synced = True if self._synced is None else bool(self._synced())
        state = "leading" if self.elector is None else self.elector.state.value
        return Status(running=self._running, synced=synced, leader=self.is_leader(), state=state,
                      last_loop=self.last_loop)

    # -------------------------------------------------------------------------------- loop

    def step(self) -> float:
        """One pass of the loop; returns how long to sleep before the next one."""
        self.last_loop = self.clock.now()
        self.loops += 1
        self._pump()
        if self.elector is not None:
            if self._renewer is None:
                self._tick_elector()
            if self.elector.final:
                return 0.0
        if self.is_leader() and (self._synced is None or self._synced()):
            ran = 0
            while not self._stopping.is_set() and self.is_leader():
                due = self.manager.next_due()
                if due is None or due > self.clock.now():
                    break
                self.reconciles += self.manager.run_due(limit=1)
                ran += 1
                if ran % self.batch == 0:
                    self._pump()
                if self.elector is not None and self._renewer is None:
                    nxt = self.elector.next_attempt()
                    if nxt is not None and nxt <= self.clock.now():
                        self._tick_elector()
        return self._sleep_for()

    def _tick_elector(self) -> None:
        if self.elector is not None:
            with self._elector_lock:
                self.elector.tick()

    def _renew_loop(self) -> None:
        """The Lease's own thread: tick the elector when an attempt is due, wake the loop after each."""
        elector = self.elector
        while elector is not None and not self._stopping.is_set() and not elector.final:
            nxt = elector.next_attempt()
            now = self.clock.now()
            if nxt is not None and nxt > now:
                self._stopping.wait(min(1.0, nxt - now))
                continue
            try:
                self._tick_elector()
            except Exception as exc:  # the loop thread decides on the state; never die silently
                log.warning("leader election: renewal failed: %s", exc, extra={"controller": "manager"})
                self._stopping.wait(0.5)
            self._wake.set()

    def _stop_renewer(self) -> None:
        if self._renewer is not None:
            self._renewer.join(5.0)

    def _pump(self) -> None:
        if self.pump is not None:
            self.pump.pump(0.0)
        if self.pool is not None:
            self.pool.drain(self.manager.enqueue)

    def _sleep_for(self) -> float:
        now = self.clock.now()
        wait = self.idle
        if self.is_leader():
            due = self.manager.next_due()
            if due is not None:
                wait = min(wait, due - now)
        if self.elector is not None and self._renewer is None:
            nxt = self.elector.next_attempt()
            if nxt is not None:
                wait = min(wait, nxt - now)
        if self.pump is not None:
            wait = min(wait, self.poll)
        return max(0.0, wait)

    def run(self) -> str:
        """Loop until stopped or the lease is lost; see the module docstring for the return value."""
        self._running = True
        log.info("starting controllers", extra={"controller": "manager"})
        if self.elector is not None and self.renew_in_background:
            self._renewer = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
            self._renewer.start()
        try:
            while not self._stopping.is_set():
                wait = self.step()
                if self.elector is not None and self.elector.state is leader.State.LOST:
                    log.error("leader election lost", extra={"controller": "manager"})
                    self._stopping.set()
                    self._stop_renewer()
                    return LOST_LEADERSHIP
                if wait > 0:
                    self._wake.wait(wait)
                self._wake.clear()
            self._shutdown()
            return STOPPED
        finally:
            self._running = False

    def _shutdown(self) -> None:
        """Finish in-flight cloud calls and write their results, then release the lease."""
        log.info("shutting down: waiting for in-flight cloud calls", extra={"controller": "manager"})
        if self.pool is not None:
            if not self.pool.close(self.shutdown_grace):
                log.warning("shutting down: cloud calls still in flight after %.0fs", self.shutdown_grace)
            finished: list[tuple[str, str]] = []
            self.pool.drain(lambda controller, key: finished.append((controller, key)))
            # Apply what the finished calls returned (their status writes), and start nothing new.
            for controller, key in finished:
                if not self.is_leader():
                    break
                try:
                    self.manager.controllers[controller].reconcile(key)
                except Exception as exc:
                    log.warning("shutting down: %s %s: %s", controller, key, exc, extra={"controller": controller})
        if self.elector is not None:
            self._stop_renewer()
            with self._elector_lock:
                self.elector.release()
