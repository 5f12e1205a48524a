"""Kubernetes resource quantities ("1500m", "2Gi", "7934284Ki", "1e3", "0.5").

karpy holds every resource amount as an ``int`` number of **milli-units**: ``"1"`` cpu is ``1000``,
``"2Gi"`` memory is ``2 * 2**30 * 1000``, ``"110"`` pods is ``110_000``. One unit for all resources
keeps arithmetic exact and lets the scheduling core put them in one integer array. Values that are
finer than a milli-unit are rounded up, as the API server does for requests.

The grammar is the API machinery's: a signed decimal number, then a binary suffix (Ki Mi Gi Ti Pi
Ei), a decimal suffix (n u m "" k M G T P E) or a decimal exponent (e3, E-2). The ``kubernetes``
client ships a parser too, but importing it pulls in the whole HTTP client, which the pure core
must not load; this module is the small, exact equivalent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from karpy.api import errors, fields, parse_cache

ResourceList = dict[str, int]
"""Resource name -> amount in milli-units."""

MILLI = 1000

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


MAX_MILLI = 2**63 - 1
"""The largest amount karpy reads, in milli-units (the API machinery's int64 milli-value): about
9.2e15 cores or 8 PiB. Larger amounts, negative ones and ``inf``/``nan`` are :class:`QuantityError`."""
_MAX_EXPONENT = 40


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity. Never retryable."""

    retryable = False


def parse_decimal(value: str | int | float) -> Decimal:
    """The exact value of a quantity in base units (cores, bytes, pods)."""
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity such as '500m' or '2Gi', found {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"expected a finite quantity, found {value!r}")
        return Decimal(repr(value))
    text = str(value).strip()
    if len(text) > 100:
        raise QuantityError(f"expected a quantity of at most 100 characters, found {value!r}")
    match = _PATTERN.match(text)
    if match is None:
        raise QuantityError(f"expected a quantity such as '500m' or '2Gi', found {value!r}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only valid decimals
        raise QuantityError(f"expected a quantity such as '500m' or '2Gi', found {value!r}") from exc
    suffix = match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if exponent > _MAX_EXPONENT and number != 0:  # bounded time: 1e300000 is not worth building
        raise QuantityError(f"expected a quantity of at most {MAX_MILLI // MILLI}, found {value!r}")
    exponent = max(-_MAX_EXPONENT, min(exponent, _MAX_EXPONENT))
    return number * (Decimal(10) ** exponent)


_MILLI_CACHE: dict[str, int] = {}
""":func:`parse_milli` of quantity texts already read: a cluster repeats few distinct texts
(``"4"``, ``"16Gi"``, ``"110"``), and the Decimal arithmetic is the cost of reading them."""
MILLI_CACHE_SIZE = 16384


def parse_milli(value: str | int | float) -> int:
    """A quantity in milli-units, rounded up (``"1500m"`` -> ``1500``, ``"1Ki"`` -> ``1024000``).

    Raises :class:`QuantityError` for a negative amount or one above :data:`MAX_MILLI`."""
    text = type(value) is str
    if text:
        hit = _MILLI_CACHE.get(value)  # type: ignore[arg-type]
        if hit is not None:
            return hit
    number = parse_decimal(value)
    if number < 0:
        raise QuantityError(f"expected a non-negative quantity, found {value!r}")
    if number > MAX_MILLI // MILLI:
        raise QuantityError(f"expected a quantity of at most {MAX_MILLI // MILLI}, found {value!r}")
    milli = int((number * MILLI).to_integral_value(rounding=ROUND_CEILING))
    if text:  # only texts that parsed are remembered: a bad one raises every time
        parse_cache.remember(_MILLI_CACHE, MILLI_CACHE_SIZE, value, milli)  # type: ignore[arg-type]
    return milli


def parse_list(values: Mapping[str, str | int | float] | None) -> ResourceList:
    """A ``resources.requests``-style mapping in milli-units. Raises :class:`QuantityError`."""
    if not values:
        return {}
    out: ResourceList = {}
    for name, v in values.items():
        try:
            out[str(name)] = parse_milli(v)
        except QuantityError as exc:
            raise QuantityError(f"{name}: {exc}") from None
    return out


def format_quantity(name: str, milli: int) -> str:
    """Render milli-units as a node would report them: cpu in cores or ``m``, memory in ``Ki``.

    ``format_quantity("cpu", 1930)`` -> ``"1930m"``; ``("memory", 7244108 * 1024 * 1000)`` ->
    ``"7244108Ki"``; other resources as plain integers when whole.
    """
    if name == "cpu":
        if milli % MILLI == 0:
            return str(milli // MILLI)
        return f"{milli}m"
    if milli % MILLI != 0:
        return f"{milli}m"
    base = milli // MILLI
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        if base % 2**30 == 0 and base:
            return f"{base // 2**30}Gi"
        if base % 2**20 == 0 and base:
            return f"{base // 2**20}Mi"
        if base % 1024 == 0 and base:
            return f"{base // 1024}Ki"
    return str(base)


def format_list(values: Mapping[str, int]) -> dict[str, str]:
    return {k: format_quantity(k, v) for k, v in sorted(values.items())}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """Every requested amount is at most what is available (absent means zero)."""
    return all(v <= available.get(k, 0) for k, v in requests.items() if v > 0)


def maximum(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        if v > out.get(k, 0):
            out[k] = v
    return out


def read_list(f: fields.Fields, key: str) -> ResourceList:
    """The resource list at ``key`` of ``f`` (e.g. ``requests``) in milli-units; ``{}`` when absent.

    A bad amount raises :class:`karpy.api.errors.ValidationError` naming the object and the full
    path, e.g. ``spec.containers[0].resources.requests.cpu``.
    """
    values = f.data.get(key)
    if not values:
        return {}
    if not isinstance(values, Mapping):
        raise f.fail(key, "a mapping of resource names to quantities", values)
    out: ResourceList = {}
    for name, v in values.items():
        try:
            out[str(name)] = parse_milli(v)
        except (QuantityError, TypeError):
            raise errors.ValidationError.single(
                f.obj, f"{f.at(key)}.{name}", "a non-negative quantity such as '500m' or '2Gi' (at most "
                f"{MAX_MILLI // MILLI})", v
            ) from None
    return out
