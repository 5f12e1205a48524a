"""The executor seam for cloud calls: inline in the simulator, a bounded thread pool in a real cluster.

A controller that calls the cloud (``create`` in the NodeClaim lifecycle, ``delete`` in termination)
does it through :meth:`CloudCalls.call` with an operation id (e.g. ``create/<nodeclaim uid>``) and the
controller key to reconcile again when the call completes::

    outcome = calls.call("create/" + uid, lambda: cloud.create(claim), (NAME, claim.name))
    if outcome is None:
        return None          # in flight: the completion requeues (NAME, claim.name)
    launched = outcome.result()   # the value, or the call's exception re-raised

What a caller may rely on, for every implementation:

- ``call`` returns the :class:`Outcome` of a finished call of that id exactly once (the outcome is
  handed over and forgotten), ``None`` while the call is in flight; a second ``call`` with an id in
  flight does not start the function again.
- ``fn`` runs at most once per ``call`` that started it; it must not touch the controllers' state (it
  may be on another thread). It may write to the cluster (a launch records itself on its NodeClaim:
  :mod:`karpy.controllers.launch_record`), so under :class:`Pool` the cluster must call its watch
  handlers only on the loop thread that pumps (the Kubernetes adapter, :mod:`karpy.kube.deferred`).
  Its result is applied by the caller, on the thread that called ``call``.
- :meth:`CloudCalls.pending` says whether an id is in flight or finished and not yet handed over.

:class:`Inline` runs ``fn`` at once on the caller's thread (deterministic: ``karpy simulate`` and the
integration tests use it). :class:`Pool` runs it on a bounded ``ThreadPoolExecutor`` (100 workers by
default, so 100 NodeClaims launch in parallel, as Karpenter does); finished calls wait in a
thread-safe queue until the driver's loop thread calls :meth:`Pool.drain`, which keeps each outcome
for its caller and enqueues the caller's key; what the caller does with it happens on the loop thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

log = logging.getLogger("karpy.controllers.cloudcalls")

T = TypeVar("T")

Requeue = tuple[str, str]
"""``(controller name, key)`` to enqueue when a call completes."""

DEFAULT_WORKERS = 100


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """A finished call: its value, or the exception it raised."""

    value: T | None = None
    error: BaseException | None = None

    def result(self) -> T:
        """The value; re-raises the call's exception."""
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def run(fn: Callable[[], T]) -> Outcome[T]:
    """Call ``fn`` and capture what it returned or raised."""
    try:
        return Outcome(value=fn())
    except Exception as exc:
        return Outcome(error=exc)


class CloudCalls(Protocol):
    """See the module docstring."""

    def call(self, op: str, fn: Callable[[], T], requeue: Requeue) -> Outcome[T] | None: ...

    def pending(self, op: str) -> bool: ...


class Inline:
    """Run every call at once, on the caller's thread."""

    def __init__(self) -> None:
        self.calls = 0

    def call(self, op: str, fn: Callable[[], T], requeue: Requeue) -> Outcome[T] | None:
        self.calls += 1
        return run(fn)

    def pending(self, op: str) -> bool:
        return False


class Pool:
    """Run calls on at most ``workers`` threads; completions wait for :meth:`drain` on the loop thread."""

    def __init__(self, workers: int = DEFAULT_WORKERS, wake: Callable[[], None] | None = None) -> None:
        if workers < 1:
            raise ValueError(f"a pool needs at least one worker, not {workers}")
        self.workers = workers
        self._executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="karpy-cloud")
        self._wake = wake
        self._in_flight: set[str] = set()
        self._done: dict[str, Outcome[Any]] = {}
        self._completed: queue.SimpleQueue[tuple[str, Outcome[Any], Requeue]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self.calls = 0
        self.max_in_flight = 0

    def call(self, op: str, fn: Callable[[], T], requeue: Requeue) -> Outcome[T] | None:
        done = self._done.pop(op, None)
        if done is not None:
            return cast(Outcome[T], done)
        with self._lock:
            if op in self._in_flight:
                return None
            if self._closed:  # shutting down: start nothing new (the next leader will)
                return None
            self._in_flight.add(op)
            self.calls += 1
            self.max_in_flight = max(self.max_in_flight, len(self._in_flight))
        self._executor.submit(self._work, op, fn, requeue)
        return None

    def _work(self, op: str, fn: Callable[[], Any], requeue: Requeue) -> None:
        outcome = run(fn)
        self._completed.put((op, outcome, requeue))
        if self._wake is not None:
            try:
                self._wake()
            except Exception:  # waking is best effort; the loop also polls
                log.exception("cloud calls: wake callback failed")

    def pending(self, op: str) -> bool:
        with self._lock:
            return op in self._in_flight or op in self._done

    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)

    def drain(self, enqueue: Callable[[str, str], None]) -> int:
        """On the loop thread: keep finished outcomes for their callers and enqueue their keys."""
        drained = 0
        while True:
            try:
                op, outcome, (controller, key) = self._completed.get_nowait()
            except queue.Empty:
                return drained
            with self._lock:
                self._in_flight.discard(op)
                self._done[op] = outcome
            enqueue(controller, key)
            drained += 1

    def close(self, timeout: float) -> bool:
        """Start no new call and wait up to ``timeout`` seconds for those in flight; True when none is left."""
        with self._lock:
            self._closed = True
        waiter = threading.Thread(target=self._executor.shutdown, kwargs={"wait": True}, daemon=True)
        waiter.start()
        waiter.join(timeout)
        finished = not waiter.is_alive()
        if not finished:
            self._executor.shutdown(wait=False, cancel_futures=True)
        return finished

