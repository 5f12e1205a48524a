"""What the disruption controller derives from its rows (underutilized and emptiable candidates, whether
consolidation must wait) holds for the latest observation only: an older one is refused, not answered
from rows that no longer describe it."""

from __future__ import annotations

import pytest

from .test_emptiness import World


def test_the_rows_answer_for_the_latest_observation_and_refuse_an_older_one() -> None:
    w = World({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    w.add_node("n1")
    older = w.controller.observe(w.clock.now())
    w.clock.advance(10)
    latest = w.controller.observe(w.clock.now())
    assert [c.name for c in w.controller.observer.emptiable(latest)] == ["n1"]
    assert w.controller.unsettled(latest) is None
    with pytest.raises(ValueError, match="emptiable: the rows hold the latest observation"):
        w.controller.observer.emptiable(older)
    with pytest.raises(ValueError, match="underutilized"):
        w.controller.observer.underutilized(older)
    with pytest.raises(ValueError, match="unsettled"):
        w.controller.unsettled(older)
