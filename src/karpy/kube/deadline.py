"""A deadline for every Kubernetes request made inside a block, as a Go ``context.WithTimeout``.

``with deadline.within(10.0): ...`` bounds every request :class:`karpy.kube.client.KubeClient`
sends in the block, retries and back-off included: each attempt's timeout is cut to what is left,
no retry starts after the deadline, and a request that would start after it fails at once with
:class:`karpy.kube.errors.Timeout`. Nested blocks keep the earlier deadline. Leader election
bounds its renewal by its renew deadline this way (client-go's ``RenewDeadline`` context). The
deadline follows the thread (a ``contextvars`` variable); code without a block is unbounded.
Pure: no I/O; time is :func:`karpy.clock.perf_counter`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from karpy import clock as clock_mod

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("karpy_kube_deadline", default=None)


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Requests in the block end within ``seconds`` from now (module docstring)."""
    at = clock_mod.perf_counter() + max(0.0, seconds)
    current = _DEADLINE.get()
    token = _DEADLINE.set(at if current is None else min(current, at))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left before the current deadline (``None``: no deadline; may be negative)."""
    at = _DEADLINE.get()
    return None if at is None else at - clock_mod.perf_counter()
