"""The simulation's garbage-collector policy is scoped to the block that asks for it."""

from __future__ import annotations

import gc

import pytest

from karpy.simulator import gcpolicy


def test_the_thresholds_apply_inside_the_block_and_the_previous_ones_come_back_after() -> None:
    before = gc.get_threshold()
    with gcpolicy.tuned():
        assert gc.get_threshold() == gcpolicy.THRESHOLDS
        assert gc.isenabled()
    assert gc.get_threshold() == before


def test_the_previous_thresholds_come_back_when_the_block_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), gcpolicy.tuned((1234, 5, 6)):
        assert gc.get_threshold() == (1234, 5, 6)
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
