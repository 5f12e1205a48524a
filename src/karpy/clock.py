"""The one place karpy reads time.

Controllers, the scheduling core and the simulator receive a :class:`Clock`; nothing else in the
package calls ``time.time()``, ``time.monotonic()`` or ``datetime.now()``. A test or the simulator
passes a :class:`VirtualClock` and moves it; a real deployment passes :class:`WallClock`.
Times are floats: seconds since the Unix epoch.
"""

from __future__ import annotations

import datetime as _dt
import time as _time
from typing import Protocol


class Clock(Protocol):
    """What a caller may rely on: ``now()`` never goes backwards."""

    def now(self) -> float: ...


class WallClock:
    """Real time, for running in a real cluster."""

    def now(self) -> float:
        return _time.time()

    def perf(self) -> float:
        """A monotonic high-resolution counter for measuring durations (metrics, benchmarks)."""
        return _time.perf_counter()


DEFAULT_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: virtual runs start here unless told otherwise


class VirtualClock:
    """Time that moves only when told to."""

    def __init__(self, start: float = DEFAULT_EPOCH) -> None:
        self._now = start
        self.start = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go back: advance({seconds})")
        self._now += seconds

    def set(self, when: float) -> None:
        if when < self._now:
            raise ValueError(f"a clock cannot go back: set({when}) < now {self._now}")
        self._now = when

    def elapsed(self) -> float:
        return self._now - self.start


def perf_counter() -> float:
    """Monotonic wall-clock counter, only for measuring how long code ran (never for decisions)."""
    return _time.perf_counter()


def rfc3339(ts: float) -> str:
    """Kubernetes' timestamp format, e.g. ``2026-01-01T00:00:05Z``."""
    last = _last_rfc3339[0]  # one tuple, read once: safe across threads
    if last[0] == ts:  # writes come in bursts at one (virtual) time: format each time once
        return last[1]
    text = _dt.datetime.fromtimestamp(ts, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _last_rfc3339[0] = (ts, text)
    return text


_last_rfc3339: list[tuple[float, str]] = [(float("nan"), "")]
"""The last time :func:`rfc3339` formatted, and its text (NaN equals nothing)."""


def parse_rfc3339(text: str) -> float:
    """Inverse of :func:`rfc3339`; accepts fractional seconds and offsets."""
    value = text.strip().replace("Z", "+00:00")
    return _dt.datetime.fromisoformat(value).timestamp()
