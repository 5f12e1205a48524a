"""karpy's operator settings: what Karpenter takes as flags / environment variables.

:class:`Settings` is a frozen dataclass with karpy's defaults (Karpenter's where Karpenter has
the setting): ``batch_idle_duration`` 1 s and ``batch_max_duration`` 10 s (the provisioner's
batching window), ``registration_ttl`` 15 min and ``launch_ttl`` 5 min (NodeClaim liveness),
``ice_cache_ttl`` 3 min (how long an offering that ran out of capacity is treated as unavailable),
``spot_to_spot_consolidation`` off with ``spot_to_spot_min_flexibility`` 15 (Karpenter's rule: a spot
node is only replaced by spot when at least 15 cheaper spot types remain), ``consolidation_min_saving``
0.01 (a fraction: no disruption for a saving under 1 % of the disrupted nodes' price) and
``consolidation_validation_delay`` 15 s. Durations are float seconds.

:meth:`Settings.from_mapping` reads a settings mapping with camelCase keys, as a scenario file or
a Helm-values-like document gives it (``clusterName``, ``batchIdleDuration: 1s``...). Durations
are Go duration strings (``"1s"``, ``"500ms"``, ``"15m"``) or numbers of seconds. Unknown keys
and bad values raise :class:`karpy.api.errors.ValidationError` naming the field, what was
expected and what was found; every problem is reported at once.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import duration, errors

OBJECT = "Settings"


@dataclass(frozen=True, slots=True)
class Settings:
    """Operator-wide settings; see the module docstring for the defaults."""

    cluster_name: str = "karpy"
    batch_idle_duration: float = 1.0
    batch_max_duration: float = 10.0
    registration_ttl: float = 900.0
    launch_ttl: float = 300.0
    ice_cache_ttl: float = 180.0
    spot_to_spot_consolidation: bool = False
    spot_to_spot_min_flexibility: int = 15
    consolidation_min_saving: float = 0.01
    consolidation_validation_delay: float = 15.0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> Settings:
        """Settings from camelCase keys; absent keys keep their defaults."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise errors.ValidationError.single(OBJECT, "(root)", "a mapping of settings", data)
        problems: list[errors.FieldError] = []
        values: dict[str, Any] = {}
        for key, raw in data.items():
            spec = _FIELDS.get(str(key))
            if spec is None:
                close = difflib.get_close_matches(str(key), list(_FIELDS), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                problems.append(errors.FieldError(
                    OBJECT, str(key), "one of " + ", ".join(sorted(_FIELDS)) + hint, raw))
                continue
            attr, kind = spec
            try:
                values[attr] = _convert(kind, raw)
            except ValueError as exc:
                problems.append(errors.FieldError(OBJECT, str(key), str(exc), raw))
        if not problems:
            merged = dataclasses.replace(cls(), **values)
            problems.extend(_check(merged))
        if problems:
            raise errors.ValidationError(problems)
        return dataclasses.replace(cls(), **values)

    def to_mapping(self) -> dict[str, Any]:
        """The camelCase form (durations as Go strings); ``from_mapping(to_mapping())`` round-trips."""
        out: dict[str, Any] = {}
        for key, (attr, kind) in _FIELDS.items():
            value = getattr(self, attr)
            out[key] = duration.format_duration(value) if kind == _DURATION else value
        return out


_DURATION = "duration"
_STRING = "string"
_BOOL = "bool"
_FLOAT = "float"
_INT = "int"

_FIELDS: dict[str, tuple[str, str]] = {
    "clusterName": ("cluster_name", _STRING),
    "batchIdleDuration": ("batch_idle_duration", _DURATION),
    "batchMaxDuration": ("batch_max_duration", _DURATION),
    "registrationTTL": ("registration_ttl", _DURATION),
    "launchTTL": ("launch_ttl", _DURATION),
    "iceCacheTTL": ("ice_cache_ttl", _DURATION),
    "spotToSpotConsolidation": ("spot_to_spot_consolidation", _BOOL),
    "spotToSpotMinFlexibility": ("spot_to_spot_min_flexibility", _INT),
    "consolidationMinSaving": ("consolidation_min_saving", _FLOAT),
    "consolidationValidationDelay": ("consolidation_validation_delay", _DURATION),
}


def _convert(kind: str, raw: Any) -> Any:
    """The typed value of one setting; ``ValueError`` says what was expected."""
    if kind == _DURATION:
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise ValueError("a duration such as 1s, 500ms or 15m")
        try:
            value = duration.parse_duration(raw)
        except duration.DurationError:
            raise ValueError("a duration such as 1s, 500ms or 15m") from None
        if value is None:
            raise ValueError("a duration such as 1s, 500ms or 15m (Never is not allowed here)")
        return value
    if kind == _STRING:
        if not isinstance(raw, str) or not raw.strip():
            raise ValueError("a non-empty string")
        return raw.strip()
    if kind == _BOOL:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise ValueError("true or false")
    if kind == _INT:
        if isinstance(raw, bool) or not (isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit())):
            raise ValueError("a non-negative integer")
        return int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ValueError("a number")
    try:
        number = float(raw)
    except ValueError:
        raise ValueError("a number") from None
    if number < 0:
        raise ValueError("a non-negative number")
    return number


def _check(s: Settings) -> list[errors.FieldError]:
    """Rules across fields (after every value parsed)."""
    out: list[errors.FieldError] = []
    if s.batch_idle_duration <= 0:
        out.append(errors.FieldError(OBJECT, "batchIdleDuration", "a duration above 0s",
                                     duration.format_duration(s.batch_idle_duration)))
    if s.batch_max_duration < s.batch_idle_duration:
        out.append(errors.FieldError(
            OBJECT, "batchMaxDuration",
            f"a duration of at least batchIdleDuration ({duration.format_duration(s.batch_idle_duration)})",
            duration.format_duration(s.batch_max_duration)))
    for key in ("registrationTTL", "launchTTL"):
        attr = _FIELDS[key][0]
        if getattr(s, attr) <= 0:
            out.append(errors.FieldError(OBJECT, key, "a duration above 0s",
                                         duration.format_duration(getattr(s, attr))))
    return out
