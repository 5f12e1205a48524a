"""The consolidation prefilter's placement equals the plain first-fit it replaced."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from karpy.disruption import prefilter


@dataclass
class _Pod:
    requests: dict[str, int]


@dataclass
class _Info:
    pods: list[_Pod]

    def reschedulable_pods(self) -> list[_Pod]:
        return self.pods


@dataclass
class _Cand:
    name: str


@dataclass
class _Snap:
    infos: dict[str, _Info] = field(default_factory=dict)

    def node(self, name: str) -> _Info | None:
        return self.infos.get(name)


def _reference(snap: _Snap, group: list[_Cand], free: prefilter.Room) -> Any:
    """The first-fit over a copy of the whole matrix that ``_unplaceable`` used to run."""
    room = free.matrix.copy()
    for c in group:
        i = free.index.get(c.name)
        if i is not None:
            room[i] = -1
    rest = np.zeros(3, dtype=np.int64)
    pods = [p for c in group if (info := snap.node(c.name)) is not None for p in info.reschedulable_pods()]
    reqs = sorted((np.array([p.requests.get(d, 0) for d in prefilter.DIMS], dtype=np.int64) for p in pods),
                  key=lambda r: (-int(r[0]), -int(r[1])))
    for r in reqs:
        fits = np.flatnonzero((room >= r).all(axis=1))
        if len(fits):
            room[fits[0]] -= r
        else:
            rest += r
    return rest


def _case(rng: random.Random) -> tuple[_Snap, prefilter.Room]:
    n = rng.randint(0, 30)
    names = [f"n{i}" for i in range(n)]
    matrix = np.array([[rng.choice([-1, 0, 1, 2, 4]), rng.choice([0, 1, 3, 8]), rng.randint(0, 4)]
                       for _ in names], dtype=np.int64).reshape(n, 3)
    snap = _Snap()
    for name in [*names, "gone"]:
        snap.infos[name] = _Info([_Pod({"cpu": rng.choice([0, 1, 2, 3]), "memory": rng.choice([0, 1, 2, 4]),
                                        "pods": 1}) for _ in range(rng.randint(0, 5))])
    return snap, prefilter.Room({name: i for i, name in enumerate(names)}, matrix)


def test_what_a_group_leaves_unplaced_equals_a_first_fit_over_the_whole_matrix() -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        snap, free = _case(rng)
        names = list(snap.infos)
        for _ in range(5):  # several groups over one room, as one consolidation pass does
            group = [_Cand(n) for n in rng.sample(names, rng.randint(1, min(6, len(names))))]
            got = prefilter._unplaceable(snap, group, free)  # type: ignore[arg-type]
            want = _reference(snap, group, free)
            assert got.tolist() == want.tolist(), (free.matrix.tolist(), [c.name for c in group])
            checked += int(want.any())
    assert checked > 100  # many of the cases left something unplaced


def test_the_room_is_left_unchanged_by_the_groups_placed_on_it() -> None:
    rng = random.Random(3)
    snap, free = _case(rng)
    while len(free.matrix) < 5:
        snap, free = _case(rng)
    before = free.matrix.copy()
    group = [_Cand(n) for n in list(snap.infos)[:3]]
    prefilter._unplaceable(snap, group, free)  # type: ignore[arg-type]
    assert free.matrix.tolist() == before.tolist()
    assert free.rows() == before.tolist()
