"""Go / Karpenter durations: ``"30s"``, ``"720h"``, ``"1h30m"``, ``"10m0s"``, ``"Never"``.

Karpenter's API writes every duration as a Go ``time.Duration`` string; fields that may be switched
off (``expireAfter``, ``consolidateAfter``) also accept ``"Never"``. karpy holds durations as
``float`` seconds and ``"Never"`` as ``None``.

A caller may rely on:

* :func:`parse_duration` accepts Go's full grammar (``"1.5h"``, ``"300ms"``, ``"2h45m10s"``) plus an
  integer or float number of seconds (the v1alpha5 ``ttlSeconds*`` fields) and returns ``None`` for
  ``"Never"``. It raises :class:`DurationError` (a ``ValueError``) otherwise, and
  :class:`DurationTooLargeError` for anything longer than Go's largest duration (:data:`MAX_SECONDS`,
  about 292 years), whether a huge integer, ``1e400`` or ``99999...h``: never an ``OverflowError``
  or an infinite number.
* :func:`read` reads a manifest field with the stricter pattern Karpenter's CRDs enforce
  (whole numbers of ``s``, ``m`` or ``h``), raising :class:`karpy.api.errors.ValidationError`
  naming object, path, expected and found.
* :func:`format_duration` is the inverse: ``30.0`` -> ``"30s"``, ``5400.0`` -> ``"1h30m"``,
  ``None`` -> ``"Never"``; ``parse_duration(format_duration(x)) == x`` for whole milliseconds.
"""

from __future__ import annotations

import math
import re

from karpy.api import errors, fields

NEVER = "Never"

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_TERM = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_KARPENTER = re.compile(r"^(?:\d+(?:s|m|h))+$")
_BUDGET = re.compile(r"^(?:(?:\d+(?:h|m))|(?:\d+h\d+m))(?:0s)?$")

EXPECTED = "a duration such as 30s, 10m, 1h30m or 720h"
EXPECTED_OR_NEVER = "a duration such as 30s, 10m, 1h30m or 720h, or Never"
EXPECTED_BUDGET = "a duration in whole minutes or hours such as 30m, 8h or 1h30m"


MAX_SECONDS = (2**63 - 1) / 1e9
"""Go's largest ``time.Duration`` (2562047h47m16.854775807s); a longer duration is an error, not a
silently infinite or overflowing number."""
MAX_TEXT = 64
"""The longest duration text read (Go's largest, ``2562047h47m16.854775807s``, has 24 characters): longer
text is an error before the term regex, whose backtracking is cubic in the length."""
_LONG_NUMBER = re.compile(r"[0-9]+(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h)?")
EXPECTED_MAX = "a duration of at most 2562047h47m16s (Go's largest duration)"


class DurationError(ValueError):
    """The text is not a duration. Never retryable."""

    retryable = False


class DurationTooLargeError(DurationError):
    """The text is a duration longer than :data:`MAX_SECONDS`."""


def _bounded(seconds: float, text: object) -> float:
    if not seconds <= MAX_SECONDS:  # also NaN
        shown = errors.describe(text)
        raise DurationTooLargeError(f"expected {EXPECTED_MAX}, found {shown}")
    return seconds


def parse_duration(text: str | int | float | None) -> float | None:
    """Seconds of a Go duration string, or of a number of seconds; ``None`` for ``"Never"``."""
    if text is None or isinstance(text, bool):
        raise DurationError(f"expected {EXPECTED_OR_NEVER}, found {text!r}")
    if isinstance(text, int | float):
        if text < 0:
            raise DurationError(f"expected a non-negative number of seconds, found {text!r}")
        if isinstance(text, int) and text > MAX_SECONDS:  # float() of it may overflow
            return _bounded(float("inf"), text)
        return _bounded(float(text), text)
    value = str(text).strip()
    if value == NEVER:
        return None
    if len(value) > MAX_TEXT:  # the term regex backtracks: a long text must never reach it
        if _LONG_NUMBER.fullmatch(value):
            raise DurationTooLargeError(f"expected {EXPECTED_MAX}, found a number of {len(value)} characters")
        raise DurationError(f"expected {EXPECTED_OR_NEVER} of at most {MAX_TEXT} characters, found {len(value)}")
    if value == "0" or re.fullmatch(r"[0-9]+", value):
        # Go accepts only "0" without a unit; a bare number of seconds is what ttlSeconds* give.
        return _bounded(float(value) if len(value) <= 20 else float("inf"), text)
    sign = 1.0
    body = value
    if body and body[0] in "+-":
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if not body:
        raise DurationError(f"expected {EXPECTED_OR_NEVER}, found {text!r}")
    total = 0.0
    pos = 0
    for m in _GO_TERM.finditer(body):
        if m.start() != pos:
            raise DurationError(f"expected {EXPECTED_OR_NEVER}, found {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)] if len(m.group(1)) <= 40 else float("inf")
        pos = m.end()
    if pos != len(body):
        raise DurationError(f"expected {EXPECTED_OR_NEVER}, found {text!r}")
    if sign < 0 and total > 0:
        raise DurationError(f"expected a non-negative duration, found {text!r}")
    return round(_bounded(total, text), 9)


def is_karpenter_duration(text: str) -> bool:
    """The text matches Karpenter's CRD pattern: whole numbers of ``s``, ``m``, ``h`` (``"1h30m"``)."""
    return bool(_KARPENTER.match(text))


def is_budget_duration(text: str) -> bool:
    """The text matches a budget ``duration``: whole minutes and/or hours, optionally ``0s``."""
    return bool(_BUDGET.match(text))


def format_duration(seconds: float | None) -> str:
    """``"Never"`` for ``None``; otherwise the shortest of ``"1h30m"``, ``"45s"``, ``"1.5s"``."""
    if seconds is None:
        return NEVER
    if seconds < 0:
        raise DurationError(f"a duration cannot be negative: {seconds!r}")
    if not math.isfinite(seconds):
        raise DurationError(f"a duration must be finite: {seconds!r}")
    whole = int(seconds)
    frac = round(seconds - whole, 9)
    if frac >= 1:
        whole += 1
        frac = 0.0
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    out = ""
    if h:
        out += f"{h}h"
    if m:
        out += f"{m}m"
    if frac:
        text = f"{s + frac:.9f}".rstrip("0").rstrip(".")
        out += f"{text}s"
    elif s or not out:
        out += f"{s}s"
    return out


def read(
    f: fields.Fields,
    key: str,
    *,
    default: float | None = None,
    never: bool = True,
    strict: bool = True,
) -> float | None:
    """The duration at ``key`` of ``f`` (``default`` when absent; ``None`` means Never).

    ``never`` allows ``"Never"``; ``strict`` enforces Karpenter's CRD pattern (no fractions, no
    ``ms``). Raises :class:`karpy.api.errors.ValidationError` naming the field.
    """
    raw = f.raw(key)
    if raw is None:
        return default
    expected = EXPECTED_OR_NEVER if never else EXPECTED
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise f.fail(key, expected, raw)
    if isinstance(raw, str):
        text = raw.strip()
        if text == NEVER:
            if not never:
                raise f.fail(key, EXPECTED, raw)
            return None
        if strict and not is_karpenter_duration(text):
            raise f.fail(key, expected, raw)
    elif strict:
        # A bare YAML number in a duration field: Karpenter's API server rejects it (the field is a
        # string), so do we, saying what to write instead.
        raise f.fail(key, expected + f" (write '{raw}s' for {raw} seconds)", raw)
    try:
        return parse_duration(raw)
    except DurationTooLargeError:
        raise f.fail(key, EXPECTED_MAX, raw) from None
    except DurationError:
        raise f.fail(key, expected, raw) from None


def read_seconds(f: fields.Fields, key: str) -> float | None:
    """A v1alpha5 ``ttlSeconds*`` field: a non-negative integer number of seconds (``None`` if absent)."""
    raw = f.raw(key)
    if raw is None:
        return None
    value = f.int(key)
    if value is None or value < 0:
        raise f.fail(key, "a non-negative whole number of seconds", raw)
    if value > MAX_SECONDS:
        raise f.fail(key, f"a whole number of seconds of at most {int(MAX_SECONDS)} (Go's largest duration)", raw)
    return float(value)
