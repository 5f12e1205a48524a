"""Kubelet overrides that change what an instance type's nodes can hold: ``maxPods``, ``podsPerCore``,
``kubeReserved``, ``systemReserved`` and the eviction thresholds, as an EC2NodeClass / AKSNodeClass
``spec.kubelet`` gives them (:class:`KubeletConfig`, read by :func:`kubelet_config`), and the amount an
eviction signal keeps free (:func:`eviction_amount`).

Every cloud's capacity and overhead formulas take a :class:`KubeletConfig`
(:mod:`karpy.cloudprovider.aws.instancetypes`, :mod:`karpy.cloudprovider.azure.instancetypes`);
:mod:`karpy.cloudprovider.catalog` passes it through by catalog name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import errors, fields, quantity


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """The kubelet settings that change an instance type's pods and overhead (hashable, for caching).

    Reserved amounts are milli-units; eviction signals keep their text (``"10%"`` or ``"500Mi"``).
    """

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: tuple[tuple[str, int], ...] = ()
    system_reserved: tuple[tuple[str, int], ...] = ()
    eviction_hard: tuple[tuple[str, str], ...] = ()
    eviction_soft: tuple[tuple[str, str], ...] = ()


_KUBELET_KEYS = {
    "max_pods": "max_pods", "maxPods": "max_pods",
    "pods_per_core": "pods_per_core", "podsPerCore": "pods_per_core",
    "kube_reserved": "kube_reserved", "kubeReserved": "kube_reserved",
    "system_reserved": "system_reserved", "systemReserved": "system_reserved",
    "eviction_hard": "eviction_hard", "evictionHard": "eviction_hard",
    "eviction_soft": "eviction_soft", "evictionSoft": "eviction_soft",
}


def kubelet_config(kubelet: Mapping[str, Any] | KubeletConfig | None, obj: str = "kubelet") -> KubeletConfig:
    """Read kubelet overrides from snake_case or camelCase keys (``maxPods`` or ``max_pods`` ...).

    ``kube_reserved`` / ``system_reserved`` values may be quantity strings (``"100m"``, ``"1Gi"``) or
    ints, which are milli-units as everywhere in karpy. Eviction values must be a percentage or a
    quantity. Unknown keys (``clusterDNS``, ``imageGCHighThresholdPercent`` ...) are ignored: they do
    not change what a node can hold. Raises :class:`karpy.api.errors.ValidationError`.
    """
    if kubelet is None:
        return KubeletConfig()
    if isinstance(kubelet, KubeletConfig):
        return kubelet
    f = fields.Fields(kubelet, obj)
    values: dict[str, Any] = {}
    for key in kubelet:
        target = _KUBELET_KEYS.get(str(key))
        if target is None or kubelet[key] is None:
            continue
        if target in ("max_pods", "pods_per_core"):
            n = f.int(str(key))
            if n is None or n < 0:
                raise f.fail(str(key), "a non-negative integer", kubelet[key])
            values[target] = n
        elif target in ("kube_reserved", "system_reserved"):
            values[target] = tuple(sorted(_resource_map(f, str(key)).items()))
        else:
            signals = f.str_map(str(key))
            for signal, value in signals.items():
                try:
                    _check_signal(value)
                except quantity.QuantityError:
                    raise errors.ValidationError.single(
                        obj, f"{f.at(str(key))}.{signal}", "a percentage such as '10%' or a quantity", value,
                    ) from None
            values[target] = tuple(sorted(signals.items()))
    return KubeletConfig(**values)


def _resource_map(f: fields.Fields, key: str) -> dict[str, int]:
    raw = f.raw(key, {})
    if not isinstance(raw, Mapping):
        raise f.fail(key, "a mapping of resource quantities", raw)
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            if isinstance(value, int) and not isinstance(value, bool):
                out[str(name)] = value
            else:
                out[str(name)] = quantity.parse_milli(value)
        except quantity.QuantityError:
            raise errors.ValidationError.single(f.obj, f"{f.at(key)}.{name}", "a quantity", value) from None
    return out


def _check_signal(value: str) -> None:
    text = value.strip()
    if text.endswith("%"):
        try:
            float(text[:-1])
        except ValueError:
            raise quantity.QuantityError(value) from None
        return
    quantity.parse_milli(text)


def eviction_amount(capacity_milli: int, value: str) -> int:
    """The milli-units an eviction signal keeps free: a percentage of capacity or a quantity.

    ``100%`` disables the threshold (0), as the kubelet documents. Percentages round up.
    """
    text = value.strip()
    if text.endswith("%"):
        percent = float(text[:-1])
        if percent >= 100:
            return 0
        base_units = math.ceil(capacity_milli / quantity.MILLI / 100 * percent)
        return base_units * quantity.MILLI
    return quantity.parse_milli(text)
