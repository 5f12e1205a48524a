"""The spot prices karpy assumes where its price data has on-demand prices only: a deterministic
fraction of the on-demand price per (instance type, zone), used by the AWS and Azure catalogs.
"""

from __future__ import annotations

import hashlib

SPOT_FRACTION_MIN = 0.3
SPOT_FRACTION_MAX = 0.7


def spot_fraction(instance_type: str, zone: str) -> float:
    """A deterministic stand-in for the spot/on-demand price ratio, in [0.3, 0.7).

    Derived from a SHA-256 of ``"<type>/<zone>"`` so it is stable across runs, processes and
    platforms (unlike ``hash()``), and differs between zones as real spot prices do.
    """
    digest = hashlib.sha256(f"{instance_type}/{zone}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return SPOT_FRACTION_MIN + (SPOT_FRACTION_MAX - SPOT_FRACTION_MIN) * u


def spot_price(instance_type: str, zone: str, on_demand: float) -> float:
    """The spot price karpy assumes: on-demand x :func:`spot_fraction`, rounded to a millionth of a dollar."""
    return round(on_demand * spot_fraction(instance_type, zone), 6)
