"""How ``karpy simulate``'s outputs spell times: kubectl's AGE, offsets from the start, durations.

Shared by the table (:mod:`karpy.simulator.output`), the document
(:mod:`karpy.simulator.document`) and the HTML report (:mod:`karpy.simulator.report`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import duration as duration_mod


def duration(seconds: float) -> str:
    """A duration as scenarios write them (``15m``, ``1h30m``)."""
    return duration_mod.format_duration(seconds)


def age(seconds: float) -> str:
    """kubectl's AGE column: ``45s``, ``12m``, ``3m20s`` (under 10 minutes), ``5h``, ``2d3h``."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m, sec = divmod(s, 60)
    if m < 10:
        return f"{m}m{sec}s" if sec else f"{m}m"
    if m < 180:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 8:
        return f"{h}h{m}m" if m else f"{h}h"
    if h < 48:
        return f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d{h}h" if h else f"{d}d"


def offset(seconds: float) -> str:
    """Time since the start of the run, ``+3m05s``."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"+{h}h{m:02d}m{sec:02d}s" if h else f"+{m}m{sec:02d}s"


def created_age(obj: Mapping[str, Any], end: float) -> str:
    """The AGE of ``obj`` at ``end`` (its ``creationTimestamp``), ``?`` when unknown."""
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "?"
    try:
        return age(end - clock_mod.parse_rfc3339(str(created)))
    except ValueError:
        return "?"
