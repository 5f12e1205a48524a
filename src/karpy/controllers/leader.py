"""Leader election on a ``coordination.k8s.io/v1`` Lease, as controller-runtime does it for Karpenter.

Two (or more) karpy controller replicas run side by side; only the one holding the Lease reconciles.
The Lease is read and written through the :class:`karpy.kube.interface.Cluster` contract, so the same
code runs on the in-memory cluster with a virtual clock (tests) and against a real API server.

Timings are controller-runtime's defaults, which Karpenter uses: a lease lasts ``lease_duration``
15 s, the leader must renew within ``renew_deadline`` 10 s of its last successful renewal or stop
leading, and every candidate tries (or the leader renews) every ``retry_period`` 2 s. Karpenter's
lease is ``karpenter-leader-election`` in the controller's namespace and is released on shutdown.

What a caller may rely on:

- :meth:`LeaderElector.tick` sends requests only when an attempt is due (:meth:`LeaderElector.next_attempt`);
  call it from the loop thread. A leader renews with one write, an update of the Lease as it last wrote
  it (client-go's fast path: no read); when that fails (another writer: a conflict) and for a candidate,
  an attempt is one read and one write. All requests, retries
  included, end by the renew deadline (:func:`karpy.kube.deadline.within`, client-go's
  ``RenewDeadline`` context): a leader's attempt by its last renewal plus ``renew_deadline``, a
  candidate's within ``renew_deadline``; so an unreachable API server costs one tick at most
  ``renew_deadline``, never the client's retries of its full request timeout. (The adapter sends
  Lease requests through a client of their own: the controllers' rate limit never delays them.)
- :meth:`LeaderElector.is_leader` is true only while the state is ``leading`` and the last successful
  renewal is younger than ``renew_deadline``: it turns false *at once* when the deadline passes, even
  before the next ``tick``, so a driver that checks it before every reconcile stops reconciling at once.
- Expiry is judged as client-go judges it, by *observed* time: a candidate remembers when it last saw
  the Lease record change and takes it over only when no change was seen for the record's
  ``leaseDurationSeconds`` (so clock skew between replicas does not matter).
- ``lost`` and ``released`` are final: a replica that lost the lease exits (Kubernetes restarts it) as
  controller-runtime does; it never reconciles again.
- :meth:`LeaderElector.release` (on SIGTERM) empties ``holderIdentity`` with a 1 s duration, so the
  other replica takes over at its next attempt instead of after 15 s.

The lifecycle is the table :data:`TRANSITIONS`; an event not in the table for the current state is a
bug and raises. :attr:`LeaderElector.history` keeps ``(time, state, event, detail)`` of every move.
"""

from __future__ import annotations

import datetime as _dt
import enum
import logging
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.kube import deadline, interface
from karpy.kube import errors as kube_errors

log = logging.getLogger("karpy.leader")

LEASE_NAME = "karpenter-leader-election"
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


class State(enum.Enum):
    FOLLOWING = "following"
    """Not holding the lease; trying to acquire it every retry period."""
    LEADING = "leading"
    """Holding the lease; renewing it every retry period."""
    LOST = "lost"
    """Was leading and lost the lease (renew deadline passed, or another holder took it). Final."""
    RELEASED = "released"
    """Gave the lease up on shutdown (or stopped before ever leading). Final."""


class Event(enum.Enum):
    ACQUIRED = "acquired"
    RENEWED = "renewed"
    HELD_BY_OTHER = "held-by-other"
    ATTEMPT_FAILED = "attempt-failed"
    RENEW_DEADLINE_PASSED = "renew-deadline-passed"
    RELEASE = "release"


TRANSITIONS: dict[tuple[State, Event], State] = {
    # A free, expired or released lease was written with our identity: start reconciling.
    (State.FOLLOWING, Event.ACQUIRED): State.LEADING,
    # Someone else renewed within the lease duration: keep waiting.
    (State.FOLLOWING, Event.HELD_BY_OTHER): State.FOLLOWING,
    # The API answered with an error or a conflict (another candidate won the race): try again later.
    (State.FOLLOWING, Event.ATTEMPT_FAILED): State.FOLLOWING,
    # Shut down before ever leading: nothing to give back.
    (State.FOLLOWING, Event.RELEASE): State.RELEASED,
    # Our renewal was written: the lease is ours for another lease duration.
    (State.LEADING, Event.RENEWED): State.LEADING,
    # One renewal failed: keep leading and retry, until the renew deadline passes.
    (State.LEADING, Event.ATTEMPT_FAILED): State.LEADING,
    # No successful renewal for renew_deadline: stop at once, before others may take over.
    (State.LEADING, Event.RENEW_DEADLINE_PASSED): State.LOST,
    # The lease names another holder: it was taken over (we must have stalled); stop at once.
    (State.LEADING, Event.HELD_BY_OTHER): State.LOST,
    # Graceful shutdown: hand the lease over.
    (State.LEADING, Event.RELEASE): State.RELEASED,
    # Releasing again after a final state does nothing.
    (State.LOST, Event.RELEASE): State.LOST,
    (State.RELEASED, Event.RELEASE): State.RELEASED,
}


class IllegalTransitionError(RuntimeError):
    """An event the table has no edge for in the current state (a bug in the elector)."""


@dataclass(frozen=True, slots=True)
class Config:
    namespace: str
    identity: str
    name: str = LEASE_NAME
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease duration, found "
                             f"{self.retry_period:g}s / {self.renew_deadline:g}s / {self.lease_duration:g}s")


def micro_time(ts: float) -> str:
    """A Kubernetes ``MicroTime``: ``2026-01-01T00:00:05.123456Z``."""
    return _dt.datetime.fromtimestamp(ts, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One replica's view of the Lease; see the module docstring."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock, config: Config) -> None:
        self.cluster = cluster
        self.clock = clock
        self.config = config
        self.state = State.FOLLOWING
        self.history: list[tuple[float, State, Event, str]] = []
        self._next_attempt = clock.now()
        self._last_renew: float | None = None
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._written: dict[str, Any] | None = None
        """The Lease as this replica last wrote it (the server's answer): a leader renews it without a read."""

    # ------------------------------------------------------------------------------ queries

    def is_leader(self) -> bool:
        if self.state is not State.LEADING or self._last_renew is None:
            return False
        return self.clock.now() < self._last_renew + self.config.renew_deadline

    def next_attempt(self) -> float | None:
        """When :meth:`tick` next has work (None once final)."""
        if self.state in (State.LOST, State.RELEASED):
            return None
        if self.state is State.LEADING and self._last_renew is not None:
            return min(self._next_attempt, self._last_renew + self.config.renew_deadline)
        return self._next_attempt

    @property
    def final(self) -> bool:
        return self.state in (State.LOST, State.RELEASED)

    # ---------------------------------------------------------------------------- lifecycle

    def _move(self, event: Event, detail: str = "") -> State:
        target = TRANSITIONS.get((self.state, event))
        if target is None:
            raise IllegalTransitionError(f"leader election: no transition from {self.state.value} on {event.value}")
        if target is not self.state or event in (Event.ACQUIRED, Event.RELEASE):
            level = logging.WARNING if target is State.LOST else logging.INFO
            log.log(level, "leader election: %s -> %s (%s)%s", self.state.value, target.value, event.value,
                    f": {detail}" if detail else "",
                    extra={"lease": f"{self.config.namespace}/{self.config.name}", "identity": self.config.identity})
        self.history.append((self.clock.now(), target, event, detail))
        self.state = target
        return target

    def tick(self) -> State:
        """Acquire or renew when an attempt is due; notice a passed renew deadline."""
        if self.final:
            return self.state
        now = self.clock.now()
        if self.state is State.LEADING and self._last_renew is not None and \
                now >= self._last_renew + self.config.renew_deadline:
            return self._move(Event.RENEW_DEADLINE_PASSED,
                              f"no successful renewal since {clock_mod.rfc3339(self._last_renew)}")
        if now < self._next_attempt:
            return self.state
        self._next_attempt = now + self.config.retry_period
        budget = self.config.renew_deadline
        if self.state is State.LEADING and self._last_renew is not None:
            budget = self._last_renew + self.config.renew_deadline - now
        with deadline.within(budget):
            event, detail = self._try_acquire_or_renew(now)
        if (event is Event.RENEWED and self._last_renew is not None
                and self.clock.now() >= self._last_renew + self.config.renew_deadline):
            return self._move(Event.RENEW_DEADLINE_PASSED, "the renewal ended after the renew deadline")
        if event is Event.RENEWED or event is Event.ACQUIRED:
            self._last_renew = now
        return self._move(event, detail)

    def _renew_written(self, now: float) -> bool:
        """client-go's fast path: a leader updates the Lease it last wrote (its resourceVersion as the
        precondition); False when there is none or the update failed (then the caller reads it)."""
        last = self._written
        if self.state is not State.LEADING or last is None:
            return False
        spec = last.get("spec") or {}
        if spec.get("holderIdentity") != self.config.identity:
            return False
        try:
            acquired = clock_mod.parse_rfc3339(str(spec.get("acquireTime")))
        except ValueError:
            acquired = now
        body = self._lease(now, acquired, int(spec.get("leaseTransitions") or 0))
        body["metadata"]["resourceVersion"] = (last.get("metadata") or {}).get("resourceVersion")
        try:
            self._written = self.cluster.update(body)
        except Exception as exc:  # Conflict: someone else wrote it; read it and decide again
            log.debug("leader election: renewing the lease as last written failed (%s); reading it", exc)
            self._written = None
            return False
        return True

    def _try_acquire_or_renew(self, now: float) -> tuple[Event, str]:
        c = self.config
        mine = Event.RENEWED if self.state is State.LEADING else Event.ACQUIRED
        if self._renew_written(now):
            return Event.RENEWED, ""
        try:
            lease = self.cluster.get("Lease", c.name, c.namespace)
        except kube_errors.NotFound:
            try:
                self._written = self.cluster.create(self._lease(now, now, 0))
            except Exception as exc:  # AlreadyExists (lost the race) or an API error
                return Event.ATTEMPT_FAILED, f"creating lease: {type(exc).__name__}: {exc}"
            return mine, "created the lease"
        except Exception as exc:
            return Event.ATTEMPT_FAILED, f"reading lease: {type(exc).__name__}: {exc}"
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, spec.get("renewTime"), spec.get("acquireTime"), spec.get("leaseDurationSeconds"),
                  spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or c.lease_duration)
        if holder and holder != c.identity and now < self._observed_at + duration:
            return Event.HELD_BY_OTHER, f"held by {holder}"
        transitions = int(spec.get("leaseTransitions") or 0)
        acquired = now
        if holder == c.identity and spec.get("acquireTime"):
            with_acquire = str(spec["acquireTime"])
            try:
                acquired = clock_mod.parse_rfc3339(with_acquire)
            except ValueError:
                acquired = now
        elif holder != c.identity:
            transitions += 1
        if self.state is State.LEADING and holder != c.identity:
            return Event.HELD_BY_OTHER, f"taken over by {holder or 'nobody'}"
        body = self._lease(now, acquired, transitions)
        body["metadata"]["resourceVersion"] = lease["metadata"].get("resourceVersion")
        try:
            self._written = self.cluster.update(body)
        except Exception as exc:  # Conflict: another candidate wrote first
            return Event.ATTEMPT_FAILED, f"updating lease: {type(exc).__name__}: {exc}"
        return mine, "" if mine is Event.RENEWED else f"previous holder {holder or 'none'}"

    def _lease(self, now: float, acquired: float, transitions: int, *, holder: str | None = None,
               duration: float | None = None) -> dict[str, Any]:
        c = self.config
        return {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": c.name, "namespace": c.namespace},
            "spec": {
                "holderIdentity": c.identity if holder is None else holder,
                "leaseDurationSeconds": max(1, round(c.lease_duration if duration is None else duration)),
                "acquireTime": micro_time(acquired),
                "renewTime": micro_time(now),
                "leaseTransitions": transitions,
            },
        }

    def release(self) -> State:
        """Give the lease up (graceful shutdown): empty holder, 1 s duration. Safe to call in any state."""
        if self.state is not State.LEADING:
            return self._move(Event.RELEASE, "not leading")
        c = self.config
        now = self.clock.now()
        detail = "released"
        try:
            with deadline.within(c.renew_deadline):
                lease = self.cluster.get("Lease", c.name, c.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") == c.identity:
                body = self._lease(now, now, int(spec.get("leaseTransitions") or 0), holder="", duration=1)
                body["metadata"]["resourceVersion"] = lease["metadata"].get("resourceVersion")
                with deadline.within(c.renew_deadline):
                    self.cluster.update(body)
            else:
                detail = f"already held by {spec.get('holderIdentity') or 'nobody'}"
        except Exception as exc:  # the lease then simply expires
            detail = f"could not release: {type(exc).__name__}: {exc}"
        return self._move(Event.RELEASE, detail)
