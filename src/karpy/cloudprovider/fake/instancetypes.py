"""The benchmark catalog: the instance types Karpenter's scheduling benchmark schedules onto.

Karpenter's fake cloud provider builds ``total`` types with incrementing sizes for its scheduling
benchmark; :func:`benchmark` builds the same shapes so karpy's scheduler can be measured on the
same problem. Type ``i`` (0-based) is named ``fake-it-<i>`` and has ``i+1`` vCPU, ``2*(i+1)`` GiB
of memory and ``10*(i+1)`` pods. Every type has five offerings, in Karpenter's order: spot in the
first two zones, then on-demand in all three. Spot and on-demand cost the same, as in Karpenter's
fake provider: ``0.1`` per vCPU plus ``0.1`` per 10^9 bytes of memory (so 2 GiB costs 0.2147...).
The overhead is the fake provider's fixed kube-reserved ``100m`` cpu and ``10Mi`` memory.

Labels: ``node.kubernetes.io/instance-type``, ``kubernetes.io/arch=amd64``, ``kubernetes.io/os=linux``
plus the fake provider's ``integer`` (the vCPU count) and ``size`` (``large`` when the type has more
than 4 vCPU and more than 8Gi memory, else ``small``). Karpenter's fake types allow any of
linux/windows/darwin; a karpy label is single-valued, so ``linux`` is used.

The result is cached per arguments and the list returned is a fresh copy; the
:class:`~karpy.cloudprovider.instancetype.InstanceType` objects are shared and must not be mutated.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from karpy.api import labels, quantity
from karpy.cloudprovider import instancetype

DEFAULT_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
DEFAULT_COUNT = 400
LABEL_SIZE = "size"
LABEL_INTEGER = "integer"
CPU_PRICE = 0.1
"""Dollars per hour per vCPU."""
MEMORY_PRICE = 0.1
"""Dollars per hour per 10^9 bytes of memory (Karpenter divides bytes by 1e9, not 2^30)."""
OVERHEAD = instancetype.Overhead(
    kube_reserved={"cpu": 100, "memory": 10 * 2**20 * quantity.MILLI},
)


def price(vcpus: int, memory_bytes: int) -> float:
    """The fake provider's hourly price for a shape."""
    return CPU_PRICE * vcpus + MEMORY_PRICE * memory_bytes / 1e9


def benchmark(n: int = DEFAULT_COUNT,
              zones: Sequence[str] = DEFAULT_ZONES) -> list[instancetype.InstanceType]:
    """``n`` benchmark instance types, sorted by name, offered in ``zones`` (three expected).

    Spot is offered in the first two zones, on-demand in all of them.
    """
    return list(_benchmark(n, tuple(zones)))


@functools.lru_cache(maxsize=16)
def _benchmark(n: int, zones: tuple[str, ...]) -> tuple[instancetype.InstanceType, ...]:
    types = [_fake_type(i, zones) for i in range(n)]
    return tuple(sorted(types, key=lambda t: t.name))


def _fake_type(i: int, zones: tuple[str, ...]) -> instancetype.InstanceType:
    vcpus = i + 1
    memory_bytes = 2 * (i + 1) * 2**30
    pods = 10 * (i + 1)
    cost = price(vcpus, memory_bytes)
    offerings = tuple(
        [instancetype.Offering(z, labels.CAPACITY_TYPE_SPOT, cost) for z in zones[:2]]
        + [instancetype.Offering(z, labels.CAPACITY_TYPE_ON_DEMAND, cost) for z in zones]
    )
    name = f"fake-it-{i}"
    large = vcpus > 4 and memory_bytes > 8 * 2**30
    return instancetype.InstanceType(
        name=name,
        labels={
            labels.INSTANCE_TYPE: name,
            labels.ARCH: "amd64",
            labels.OS: "linux",
            LABEL_INTEGER: str(vcpus),
            LABEL_SIZE: "large" if large else "small",
        },
        capacity={
            "cpu": vcpus * quantity.MILLI,
            "memory": memory_bytes * quantity.MILLI,
            "pods": pods * quantity.MILLI,
        },
        overhead=OVERHEAD,
        offerings=offerings,
    )
