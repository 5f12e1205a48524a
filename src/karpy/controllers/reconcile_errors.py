"""What went wrong in reconciles, kept so that nothing fails silently.

The :class:`karpy.controllers.runtime.Manager` records every exception a reconcile raised here.
A caller may rely on:

* :meth:`ReconcileErrors.summary` lists one row per (controller, error type): how many times,
  the first and last key and message, the first virtual time, and whether it is *expected*;
* an error is *expected* when it is one of karpy's typed API or cloud errors that says a retry may
  succeed (a 409 conflict, a 429, a 5xx, a timeout, cloud throttling, insufficient capacity): the
  same faults Karpenter retries without alarm. Anything else (a bug, an ``OverflowError``, an error
  that cannot succeed on retry) is *unexpected*, and :attr:`ReconcileErrors.unexpected` counts it.

``karpy simulate`` prints the summary to stderr, puts it in the JSON/YAML output
(``reconcileErrors``) and exits with status 3 when anything unexpected happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from karpy.cloudprovider import errors as cloud_errors
from karpy.kube import errors as kube_errors


def is_expected(exc: BaseException) -> bool:
    """A typed, retryable API or cloud error (see the module docstring)."""
    return isinstance(exc, kube_errors.KubeError | cloud_errors.CloudProviderError) and \
        getattr(exc, "retryable", False) is True


@dataclass(slots=True)
class Record:
    controller: str
    error: str
    expected: bool
    count: int
    first_time: float
    first_key: str
    first_message: str
    last_key: str
    last_message: str

    def to_dict(self) -> dict[str, Any]:
        return {"controller": self.controller, "error": self.error, "expected": self.expected,
                "count": self.count, "firstTime": round(self.first_time, 3), "firstKey": self.first_key,
                "firstMessage": self.first_message, "lastKey": self.last_key, "lastMessage": self.last_message}


class ReconcileErrors:
    """Every reconcile failure, grouped by controller and error type."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], Record] = {}
        self.unexpected = 0
        self.total = 0

    def record(self, controller: str, key: str, exc: BaseException, now: float) -> None:
        name = type(exc).__name__
        message = str(exc)[:300]
        expected = is_expected(exc)
        self.total += 1
        if not expected:
            self.unexpected += 1
        rec = self._records.get((controller, name))
        if rec is None:
            self._records[(controller, name)] = Record(controller, name, expected, 1, now, key, message, key,
                                                       message)
            return
        rec.count += 1
        rec.expected = rec.expected and expected
        rec.last_key, rec.last_message = key, message

    def summary(self) -> list[dict[str, Any]]:
        """One row per (controller, error type), unexpected first, then by count."""
        rows = sorted(self._records.values(), key=lambda r: (r.expected, -r.count, r.controller, r.error))
        return [r.to_dict() for r in rows]

    def lines(self, start: float = 0.0) -> list[str]:
        """A human summary, one line per row."""
        out = []
        for r in self.summary():
            what = "expected, retried" if r["expected"] else "UNEXPECTED"
            out.append(f"{r['controller']}: {r['error']} x{r['count']} ({what}); first at "
                       f"+{max(0.0, r['firstTime'] - start):.0f}s on {r['firstKey']}: {r['firstMessage']}")
        return out
