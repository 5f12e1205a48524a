"""`karpy controller`: settings, provider availability, probes, metrics, logs and graceful shutdown."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from karpy import clock, controller_run, settings
from karpy.cloudprovider import errors as cp_errors

from . import controller_process as cp


@pytest.mark.e2e
def test_the_controller_serves_probes_and_karpenter_metrics_and_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    c = cp.Controller(["--cloud-provider", "kwok", "--in-memory-cluster", "--lease-duration", "3s",
                       "--renew-deadline", "2s", "--retry-period", "500ms"], tmp_path / "controller.log",
                      env={"CLUSTER_NAME": "e2e", "LOG_LEVEL": "info"})
    try:
        assert c.wait_for("/readyz").strip() == "ok"
        assert c.get("/healthz") == (200, "ok\n")
        leading = 'leader_election_master_status{name="karpenter-leader-election"} 1.0'
        deadline = time.monotonic() + 10
        status, metrics = c.get("/metrics")
        while leading not in metrics and time.monotonic() < deadline:
            time.sleep(0.1)
            status, metrics = c.get("/metrics")
        assert status == 200
        assert "karpenter_nodeclaims_created_total" in metrics
        assert "karpenter_cluster_state_node_count 0.0" in metrics
        assert leading in metrics
        assert c.get("/nope")[0] == 404
    finally:
        code = c.terminate()
    assert code == 0, c.log()[-3000:]
    lines = [json.loads(x) for x in c.log().splitlines() if x.startswith("{")]
    started = next(x for x in lines if x["message"] == "karpy controller starting")
    assert started["clusterName"] == "e2e" and started["cloudProvider"] == "kwok"
    assert {"level", "time", "logger", "message"} <= set(started)
    assert any("leading" in x["message"] for x in lines)
    assert lines[-1]["message"] == "karpy controller stopped"


@pytest.mark.e2e
def test_a_bad_setting_exits_2_naming_it() -> None:
    proc = subprocess.run([sys.executable, "-m", "karpy.cli", "controller", "--cloud-provider", "kwok",
                           "--in-memory-cluster", "--batch-idle-duration", "soon"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"KUBE_CLIENT_QPS": "lots", "PATH": ""})
    assert proc.returncode == 2
    assert "--batch-idle-duration" in proc.stderr and "KUBE_CLIENT_QPS" in proc.stderr


def test_a_provider_whose_module_is_absent_is_reported_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "karpy.cloudprovider.azure.factory", None)  # import raises ImportError
    with pytest.raises(controller_run.Unavailable, match="cloud provider azure is not available") as info:
        controller_run.build_cloud("azure", settings.Settings(), clock.WallClock(), object(), {})
    assert info.value.exit_code == controller_run.EXIT_PROVIDER_UNAVAILABLE


def test_a_provider_whose_factory_refuses_is_reported_unavailable_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("karpy.cloudprovider.aws.factory")

    def build(*_args: object, **_kwargs: object) -> object:
        raise cp_errors.CloudProviderError("no AWS credentials found (set AWS_REGION and a role)")

    fake.build = build  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "karpy.cloudprovider.aws.factory", fake)
    with pytest.raises(controller_run.Unavailable, match="aws is not available: no AWS credentials found"):
        controller_run.build_cloud("aws", settings.Settings(), clock.WallClock(), object(), {})


def test_the_kwok_factory_is_found_through_the_same_contract() -> None:
    from karpy.kube import memory

    cloud = controller_run.build_cloud("kwok", settings.Settings(cluster_name="c"), clock.WallClock(),
                                       memory.InMemoryCluster(clock.WallClock()), {})
    assert cloud.name == "kwok"


def test_region_reaches_the_provider_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from click.testing import CliRunner

    from karpy import cli

    root = logging.getLogger("karpy")
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # the command installs its own handler
    monkeypatch.setattr(root, "level", root.level)
    seen: dict[str, object] = {}
    fake = types.ModuleType("karpy.cloudprovider.aws.factory")

    def build(*_args: object, **options: object) -> object:
        seen.update(options)
        raise cp_errors.CloudProviderError("stop here")

    fake.build = build  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "karpy.cloudprovider.aws.factory", fake)
    result = CliRunner().invoke(cli.main, ["controller", "--cloud-provider", "aws", "--in-memory-cluster",
                                           "--region", "eu-west-1", "--log-format", "console"])
    assert result.exit_code == controller_run.EXIT_PROVIDER_UNAVAILABLE
    assert seen == {"region": "eu-west-1"}
