"""controller-runtime's reconcile metrics (``Metrics.reconciled``), whose labelled children are looked up once."""

from __future__ import annotations

from karpy.observability import metrics


def test_each_controller_and_result_counts_its_own_reconciles() -> None:
    m = metrics.Metrics()
    m.reconciled("provisioner", "success", 0.5)
    m.reconciled("provisioner", "success", 0.25)
    m.reconciled("provisioner", "requeue_after", 0.1)
    m.reconciled("disruption", "success", 2.0)
    m.reconciled("disruption", "error", 0.0)

    def total(controller: str, result: str) -> float:
        return m.value("controller_runtime_reconcile_total", controller=controller, result=result)

    assert (total("provisioner", "success"), total("provisioner", "requeue_after"), total("provisioner", "error")) == \
        (2.0, 1.0, 0.0)
    assert (total("disruption", "success"), total("disruption", "error")) == (1.0, 1.0)
    assert m.value("controller_runtime_reconcile_time_seconds_count", controller="provisioner") == 3.0
    assert m.value("controller_runtime_reconcile_time_seconds_sum", controller="provisioner") == 0.85
    assert m.value("controller_runtime_reconcile_time_seconds_count", controller="disruption") == 2.0


def test_a_negative_duration_is_observed_as_zero() -> None:
    m = metrics.Metrics()
    m.reconciled("gc", "success", -1.0)
    assert m.value("controller_runtime_reconcile_time_seconds_sum", controller="gc") == 0.0
    assert m.value("controller_runtime_reconcile_time_seconds_count", controller="gc") == 1.0
