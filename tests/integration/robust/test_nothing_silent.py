"""Nothing fails silently: a reconcile error during ``karpy simulate`` is summarised on stderr, in
the JSON output, and (when it is not a retryable API/cloud error) gives exit status 3."""

from __future__ import annotations

import io
import json
import pathlib

import pytest

from karpy.controllers import provisioner, reconcile_errors, runtime
from karpy.kube import errors as kube_errors
from karpy.simulator import output

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "spot-interruption.yaml"


def test_an_overflow_in_a_controller_is_reported_and_exits_3(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: pathlib.Path) -> None:
    def broken(self: provisioner.Provisioner, key: str) -> float | None:
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(provisioner.Provisioner, "reconcile", broken)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("until: 15m", "until: 2m"))
    out, err = io.StringIO(), io.StringIO()
    status = output.run_command(str(scenario), output="json", stdout=out, stderr=err)
    assert status == output.EXIT_RECONCILE_ERRORS == 3
    rows = json.loads(out.getvalue())["reconcileErrors"]
    assert rows[0]["error"] == "OverflowError" and rows[0]["expected"] is False and rows[0]["count"] >= 1
    assert "OverflowError" in err.getvalue() and "UNEXPECTED" in err.getvalue()


def test_a_clean_run_exits_0_with_no_reconcile_errors(tmp_path: pathlib.Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("until: 15m", "until: 2m"))
    out, err = io.StringIO(), io.StringIO()
    assert output.run_command(str(scenario), output="json", stdout=out, stderr=err) == 0
    assert json.loads(out.getvalue())["reconcileErrors"] == []


def test_retryable_api_errors_are_expected_and_bugs_are_not() -> None:
    record = reconcile_errors.ReconcileErrors()
    record.record("c", "k1", kube_errors.Conflict("stale"), 1.0)
    record.record("c", "k2", KeyError("x"), 2.0)
    record.record("c", "k3", KeyError("y"), 3.0)
    assert record.unexpected == 2 and record.total == 3
    first = record.summary()[0]
    assert (first["error"], first["count"], first["firstKey"], first["lastKey"]) == ("KeyError", 2, "k2", "k3")
    assert record.summary()[1]["expected"] is True


def test_the_manager_records_what_a_reconcile_raised() -> None:
    from karpy import clock
    from karpy.kube import memory

    clk = clock.VirtualClock(0.0)
    manager = runtime.Manager(memory.InMemoryCluster(clk), clk)

    def boom(key: str) -> float | None:
        raise ZeroDivisionError("boom")

    manager.register(runtime.Controller("boom", boom))
    manager.enqueue("boom", "a")
    manager.run_due()
    assert manager.failures.unexpected == 1
    assert manager.failures.summary()[0]["firstKey"] == "a"
