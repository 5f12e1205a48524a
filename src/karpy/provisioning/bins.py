"""Bins: existing nodes, in-flight NodeClaims and new NodeClaims as arrays, during one run.

Every place a pod may go is a bin with a row in ``remaining`` (free capacity per resource
dimension), a requirement-set id, a taint-set id, and for every non-hostname topology key in use
its domain: a value index, ``UNDETERMINED`` (a new NodeClaim that may still be narrowed to one
of ``possible`` values) or ``NONE``. Arrays grow by doubling; Python lists hold what NumPy cannot.
The scheduler asks "how many pods of this shape fit on each bin" in one vectorised expression.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy.api import pod as pod_mod
from karpy.scheduling import hostports
from karpy.scheduling import requirements as reqs_mod

NONE = -2
UNDETERMINED = -1

IntArray = npt.NDArray[np.int64]


class Registry:
    """Interns hashable values to small integer ids (requirement sets, taint sets, domains)."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []

    def id(self, value: Any) -> int:
        i = self.ids.get(value)
        if i is None:
            i = len(self.values)
            self.ids[value] = i
            self.values.append(value)
        return i

    def copy(self) -> Registry:
        """An independent registry with the same ids (adding to it leaves this one alone)."""
        out = Registry()
        out.ids = dict(self.ids)
        out.values = list(self.values)
        return out


class Bins:
    """Capacity and identity of every bin in one scheduling run."""

    def __init__(self, dims: Sequence[str], keys: Sequence[str], capacity: int = 64) -> None:
        self.dims = list(dims)
        self.keys = list(keys)
        self.n = 0
        cap = max(64, capacity)
        k = len(dims)
        self.remaining: IntArray = np.zeros((cap, k), dtype=np.int64)
        self.used: IntArray = np.zeros((cap, k), dtype=np.int64)
        self.reqset: IntArray = np.zeros(cap, dtype=np.int64)
        self.taintset: IntArray = np.zeros(cap, dtype=np.int64)
        self.schedulable = np.zeros(cap, dtype=np.bool_)
        self.dom: dict[str, IntArray] = {key: np.full(cap, NONE, dtype=np.int64) for key in keys}
        self.possible: dict[str, IntArray] = {key: np.full(cap, -1, dtype=np.int64) for key in keys}
        self.reqsets = Registry()
        self.taintsets = Registry()
        self.domains: dict[str, Registry] = {key: Registry() for key in keys}
        self.possible_sets: dict[str, Registry] = {key: Registry() for key in keys}
        self.names: list[str] = []
        self.template: list[int] = []  # template index for new claims, -1 for existing
        self.target: list[int] = []  # target instance type index for new claims
        self.pods: list[list[pod_mod.Pod]] = []
        self.ports: list[hostports.HostPortUsage | None] = []
        self.is_node: list[bool] = []

    def _grow(self) -> None:
        cap = len(self.reqset)
        if self.n < cap:
            return
        new = cap * 2

        def grow(a: Any, fill: Any) -> Any:
            shape = (new - cap, *a.shape[1:])
            return np.concatenate([a, np.full(shape, fill, dtype=a.dtype)])

        self.remaining = grow(self.remaining, 0)
        self.used = grow(self.used, 0)
        self.reqset = grow(self.reqset, 0)
        self.taintset = grow(self.taintset, 0)
        self.schedulable = grow(self.schedulable, False)
        for key in self.keys:
            self.dom[key] = grow(self.dom[key], NONE)
            self.possible[key] = grow(self.possible[key], -1)

    def add(self, name: str, remaining: IntArray, used: IntArray, reqs: reqs_mod.Requirements,
            taints: tuple[Any, ...], *, is_node: bool, schedulable: bool = True,
            template: int = -1, target: int = -1, pods: list[pod_mod.Pod] | None = None,
            domains: dict[str, str | frozenset[str] | None] | None = None) -> int:
        """Add a bin; ``domains[key]`` is a value, a set of possible values, or None."""
        self._grow()
        b = self.n
        self.n += 1
        self.remaining[b] = remaining
        self.used[b] = used
        self.reqset[b] = self.reqsets.id((reqs, is_node))
        self.taintset[b] = self.taintsets.id(taints)
        self.schedulable[b] = schedulable
        self.names.append(name)
        self.template.append(template)
        self.target.append(target)
        self.pods.append(list(pods or ()))
        self.ports.append(None)
        self.is_node.append(is_node)
        for key, value in (domains or {}).items():
            if key in self.dom:
                self.set_domain(b, key, value)
        return b

    def add_nodes(self, names: list[str], remaining: IntArray, used: IntArray, reqset: IntArray,
                  taintset: IntArray, schedulable: npt.NDArray[np.bool_], pods: list[list[pod_mod.Pod]],
                  dom: dict[str, IntArray]) -> None:
        """Add existing nodes as bins at once (an empty Bins only; registries already hold the ids).

        ``dom[key]`` is each node's domain id in ``self.domains[key]`` (-1: no such label)."""
        n = len(names)
        assert self.n == 0 and len(self.reqset) >= n
        self.n = n
        self.remaining[:n] = remaining
        self.used[:n] = used
        self.reqset[:n] = reqset
        self.taintset[:n] = taintset
        self.schedulable[:n] = schedulable
        for key in self.keys:
            ids = dom[key]
            self.dom[key][:n] = np.where(ids >= 0, ids, NONE)
        self.names = names
        self.template = [-1] * n
        self.target = [-1] * n
        self.pods = pods
        self.ports = [None] * n
        self.is_node = [True] * n

    def set_domain(self, b: int, key: str, value: str | frozenset[str] | None) -> None:
        if value is None:
            self.dom[key][b] = NONE
        elif isinstance(value, str):
            self.dom[key][b] = self.domains[key].id(value)
            self.possible[key][b] = -1
        elif len(value) == 1:
            self.set_domain(b, key, next(iter(value)))
        else:
            self.dom[key][b] = UNDETERMINED
            self.possible[key][b] = self.possible_sets[key].id(value)

    def domain_of(self, b: int, key: str) -> str | None:
        i = int(self.dom[key][b])
        return str(self.domains[key].values[i]) if i >= 0 else None

    def requirements(self, b: int) -> reqs_mod.Requirements:
        reqs: reqs_mod.Requirements = self.reqsets.values[int(self.reqset[b])][0]
        return reqs

    def set_requirements(self, b: int, reqs: reqs_mod.Requirements) -> None:
        self.reqset[b] = self.reqsets.id((reqs, self.is_node[b]))

    def fit_counts(self, req: IntArray, lo: int = 0, hi: int | None = None) -> IntArray:
        """How many pods requesting ``req`` each bin (of ``lo:hi``) can still take (0 for full bins)."""
        hi = self.n if hi is None else hi
        nz = np.flatnonzero(req > 0)
        if len(nz) == 0:
            return np.full(hi - lo, 1 << 40, dtype=np.int64)
        rem = self.remaining[lo:hi, nz]
        need = req[nz]
        room = np.flatnonzero((rem >= need).all(axis=1))  # bins that take at least one pod
        if len(room) * 4 > len(rem):  # most do: one division over them all
            fit: IntArray = np.maximum((rem // need).min(axis=1), 0)
            return fit
        # most bins are full (a busy cluster): divide only where a pod fits, the rest take none
        fit = np.zeros(len(rem), dtype=np.int64)
        if len(room):
            fit[room] = (rem[room] // need).min(axis=1)
        return fit

    def domain_mask(self, key: str, allowed: set[str], lo: int = 0, hi: int | None = None
                    ) -> npt.NDArray[np.bool_]:
        """Bins (of ``lo:hi``) whose domain for ``key`` is in ``allowed`` or could still be narrowed into it."""
        hi = self.n if hi is None else hi
        reg = self.domains[key]
        dom = self.dom[key][lo:hi]
        table = np.zeros(len(reg.values) + 2, dtype=np.bool_)  # index = domain id + 2
        for v in allowed:
            i = reg.ids.get(v)
            if i is not None:
                table[i + 2] = True
        mask = table[dom + 2]
        sets = self.possible_sets[key]
        if sets.values:
            ok = np.fromiter((bool(s & allowed) for s in sets.values), dtype=np.bool_, count=len(sets.values))
            if ok.any():
                undetermined = dom == UNDETERMINED
                mask |= undetermined & ok[np.maximum(self.possible[key][lo:hi], 0)]
        return mask

    def possible_values(self, b: int, key: str) -> frozenset[str]:
        i = int(self.dom[key][b])
        if i >= 0:
            return frozenset({self.domains[key].values[i]})
        if i == UNDETERMINED:
            s: frozenset[str] = self.possible_sets[key].values[int(self.possible[key][b])]
            return s
        return frozenset()
