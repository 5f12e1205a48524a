"""Every disruption pass of these tests is checked against a fresh walk over the cluster (the
incremental reading must give the same answers, and a pass that does not fails the test even though
the controller runtime only logs a failed reconcile; drift is compared in test_incremental_reading,
as asking the cloud again would change the drift-check counts some tests assert)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from karpy.disruption import controller as disruption

from . import test_incremental_reading


@pytest.fixture(autouse=True)
def _every_pass_checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    original = disruption.DisruptionController.observe
    failures: list[AssertionError] = []

    def checked(self: disruption.DisruptionController, now: float) -> Any:
        obs = original(self, now)
        try:
            test_incremental_reading.plain_check(self, obs, drift=False)
        except AssertionError as exc:  # the controller runtime would only log it and retry the pass
            failures.append(exc)
            raise
        return obs

    monkeypatch.setattr(disruption.DisruptionController, "observe", checked)
    yield
    assert not failures, f"{len(failures)} disruption pass(es) read differently from a fresh walk: {failures[0]!r}"
