"""The KWOK catalog: the generic instance types of Karpenter's KWOK cloud provider.

Karpenter's KWOK provider ships a generated list of cloud-neutral shapes; :func:`kwok` builds the
same list. For every vCPU count in :data:`CPUS` and memory factor 2, 4 or 8 GiB per vCPU, for linux
and windows, for amd64 and arm64 there is one type named ``<family>-<cpu>x-<arch>-<os>``: family
``c`` (2 GiB/vCPU), ``s`` (4) or ``m`` (8), e.g. ``c-4x-amd64-linux``. That is 12 x 3 x 2 x 2 = 144
types.

* capacity: cpu, memory, ``pods = min(16 * vCPU, 1024)``, ``ephemeral-storage = 20Gi``;
* overhead: kube-reserved ``100m`` cpu and ``10Mi`` memory (the provider's fixed overhead);
* labels: instance-type, arch, os and the ``karpenter.kwok.sh/`` labels ``instance-family``
  (``c``/``s``/``m``), ``instance-size`` (the vCPU count: the name is not AWS-shaped, so the
  provider falls back to the cpu quantity), ``instance-cpu`` (``"4"``) and ``instance-memory``
  (the memory quantity as Kubernetes prints it, ``"8Gi"``);
* offerings: for each of the four zones ``test-zone-a`` .. ``test-zone-d``, spot then on-demand;
  on-demand costs ``0.025`` per vCPU plus ``0.001`` per 10^9 bytes of memory, spot 0.7 of that.

The result is cached per zone tuple; the returned list is a fresh copy of shared, immutable types.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from karpy.api import labels, quantity
from karpy.cloudprovider import instancetype

GROUP = "karpenter.kwok.sh"
LABEL_INSTANCE_FAMILY = GROUP + "/instance-family"
LABEL_INSTANCE_SIZE = GROUP + "/instance-size"
LABEL_INSTANCE_CPU = GROUP + "/instance-cpu"
LABEL_INSTANCE_MEMORY = GROUP + "/instance-memory"
KWOK_LABELS = frozenset({
    LABEL_INSTANCE_FAMILY, LABEL_INSTANCE_SIZE, LABEL_INSTANCE_CPU, LABEL_INSTANCE_MEMORY,
})

ZONES = ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")
CPUS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
MEMORY_FACTORS = {2: "c", 4: "s", 8: "m"}
VOLUME_LIMITS = {"*": 32}
"""karpy's default attach limit of a KWOK node, for any CSI driver (KWOK nodes attach nothing; the
limit makes volume-heavy scenarios behave like a cloud's)."""
"""GiB of memory per vCPU -> family letter (cpu-optimised, standard, memory-optimised)."""
OPERATING_SYSTEMS = ("linux", "windows")
ARCHITECTURES = ("amd64", "arm64")
MAX_PODS = 1024
PODS_PER_CPU = 16
EPHEMERAL_STORAGE = 20 * 2**30 * quantity.MILLI
CPU_PRICE = 0.025
MEMORY_PRICE = 0.001
"""Per 10^9 bytes of memory, as Karpenter's generator divides bytes by 1e9."""
SPOT_FRACTION = 0.7
OVERHEAD = instancetype.Overhead(kube_reserved={"cpu": 100, "memory": 10 * 2**20 * quantity.MILLI})


def type_name(cpu: int, memory_factor: int, arch: str, os: str) -> str:
    """``c-4x-amd64-linux``; an unknown memory factor gives family ``e`` (exotic), as Karpenter."""
    return f"{MEMORY_FACTORS.get(memory_factor, 'e')}-{cpu}x-{arch}-{os}"


def price(cpu: int, memory_bytes: int) -> float:
    """The on-demand hourly price of a KWOK shape."""
    return CPU_PRICE * cpu + MEMORY_PRICE * memory_bytes / 1e9


def kwok(zones: Sequence[str] = ZONES) -> list[instancetype.InstanceType]:
    """Karpenter's KWOK instance types offered in ``zones``, sorted by name."""
    return list(_kwok(tuple(zones)))


@functools.lru_cache(maxsize=8)
def _kwok(zones: tuple[str, ...]) -> tuple[instancetype.InstanceType, ...]:
    types = [
        _kwok_type(cpu, factor, arch, os, zones)
        for cpu in CPUS
        for factor in MEMORY_FACTORS
        for os in OPERATING_SYSTEMS
        for arch in ARCHITECTURES
    ]
    return tuple(sorted(types, key=lambda t: t.name))


def _kwok_type(cpu: int, factor: int, arch: str, os: str,
               zones: tuple[str, ...]) -> instancetype.InstanceType:
    name = type_name(cpu, factor, arch, os)
    memory_gib = cpu * factor
    memory_bytes = memory_gib * 2**30
    on_demand = price(cpu, memory_bytes)
    offerings: list[instancetype.Offering] = []
    for zone in zones:
        offerings.append(instancetype.Offering(zone, labels.CAPACITY_TYPE_SPOT, on_demand * SPOT_FRACTION))
        offerings.append(instancetype.Offering(zone, labels.CAPACITY_TYPE_ON_DEMAND, on_demand))
    return instancetype.InstanceType(
        name=name,
        labels={
            labels.INSTANCE_TYPE: name,
            labels.ARCH: arch,
            labels.OS: os,
            LABEL_INSTANCE_FAMILY: MEMORY_FACTORS[factor],
            LABEL_INSTANCE_SIZE: str(cpu),
            LABEL_INSTANCE_CPU: str(cpu),
            LABEL_INSTANCE_MEMORY: f"{memory_gib}Gi",
        },
        capacity={
            "cpu": cpu * quantity.MILLI,
            "memory": memory_bytes * quantity.MILLI,
            "pods": min(PODS_PER_CPU * cpu, MAX_PODS) * quantity.MILLI,
            "ephemeral-storage": EPHEMERAL_STORAGE,
        },
        overhead=OVERHEAD,
        offerings=tuple(offerings),
        volume_limits=VOLUME_LIMITS,
    )
