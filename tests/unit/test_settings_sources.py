"""Operator settings from flags, environment and a settings file, with Karpenter's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy import settings, settings_sources
from karpy.api import errors


def test_the_defaults_are_karpenters_when_nothing_is_given() -> None:
    s = settings_sources.load({}, {}, None)
    assert (s.metrics_port, s.health_probe_port, s.kube_client_qps, s.kube_client_burst) == (8080, 8081, 200, 300)
    assert (s.batch_idle_duration, s.batch_max_duration, s.log_level) == (1.0, 10.0, "info")


def test_flags_win_over_environment_which_wins_over_the_file(tmp_path: Path) -> None:
    f = tmp_path / "settings.yaml"
    f.write_text("clusterName: from-file\nbatchIdleDuration: 3s\nmetricsPort: 9000\nregistrationTTL: 5m\n")
    env = {"CLUSTER_NAME": "from-env", "BATCH_IDLE_DURATION": "2s", "UNRELATED": "x"}
    s = settings_sources.load({"clusterName": "from-flag", "metricsPort": None}, env, f)
    assert s.cluster_name == "from-flag"
    assert s.batch_idle_duration == 2.0
    assert s.metrics_port == 9000
    assert s.registration_ttl == 300.0  # karpy's own settings come from the file


def test_every_karpenter_environment_variable_is_read(tmp_path: Path) -> None:
    env = {
        "CLUSTER_NAME": "prod", "CLUSTER_ENDPOINT": "https://api.example:443", "INTERRUPTION_QUEUE": "prod-q",
        "BATCH_IDLE_DURATION": "500ms", "BATCH_MAX_DURATION": "5s", "FEATURE_GATES": "NodeRepair=true",
        "VM_MEMORY_OVERHEAD_PERCENT": "0.1", "RESERVED_ENIS": "1", "ISOLATED_VPC": "true", "LOG_LEVEL": "debug",
        "METRICS_PORT": "9090", "HEALTH_PROBE_PORT": "9091", "KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "60",
    }
    assert set(env) <= set(settings_sources.ENVIRONMENT.values())  # all 34: test_karpenter_settings_parity
    s = settings_sources.load({}, env)
    assert (s.cluster_name, s.cluster_endpoint, s.interruption_queue) == ("prod", "https://api.example:443", "prod-q")
    assert (s.batch_idle_duration, s.batch_max_duration) == (0.5, 5.0)
    assert s.feature_gate("NodeRepair") and not s.feature_gate("SpotToSpotConsolidation")
    assert (s.vm_memory_overhead_percent, s.reserved_enis, s.isolated_vpc, s.log_level) == (0.1, 1, True, "debug")
    assert (s.metrics_port, s.health_probe_port, s.kube_client_qps, s.kube_client_burst) == (9090, 9091, 50, 60)


def test_a_helm_style_settings_wrapper_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "values.yaml"
    f.write_text("settings:\n  clusterName: wrapped\n  interruptionQueue: q\n")
    s = settings_sources.load({}, {}, f)
    assert (s.cluster_name, s.interruption_queue) == ("wrapped", "q")


def test_a_bad_value_names_the_setting_as_the_user_wrote_it(tmp_path: Path) -> None:
    f = tmp_path / "settings.yaml"
    f.write_text("metricsPort: 70000\n")
    with pytest.raises(errors.ValidationError) as info:
        settings_sources.load({"kubeClientQPS": "lots"}, {"BATCH_IDLE_DURATION": "soon"}, f)
    paths = {e.path for e in info.value.errors}
    assert paths == {"--kube-client-qps", "BATCH_IDLE_DURATION"}
    with pytest.raises(errors.ValidationError) as info:
        settings_sources.load({}, {}, f)
    (only,) = info.value.errors
    assert only.path == "settings.yaml: metricsPort" and "port number" in only.expected


def test_an_unreadable_or_malformed_file_is_a_validation_error(tmp_path: Path) -> None:
    with pytest.raises(errors.ValidationError, match="readable settings file"):
        settings_sources.load({}, {}, tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(errors.ValidationError, match="a mapping of settings"):
        settings_sources.load({}, {}, bad)


def test_spot_to_spot_consolidation_and_its_feature_gate_are_one_setting() -> None:
    by_gate = settings_sources.load({}, {"FEATURE_GATES": "SpotToSpotConsolidation=true"})
    assert by_gate.spot_to_spot_consolidation and by_gate.feature_gate("SpotToSpotConsolidation")
    by_field = settings.Settings(spot_to_spot_consolidation=True)
    assert by_field.feature_gate("SpotToSpotConsolidation")
    assert settings.Settings.from_mapping(by_field.to_mapping()) == by_field
    off = settings.Settings()
    assert not off.spot_to_spot_consolidation and not off.feature_gate("SpotToSpotConsolidation")


def test_flag_names_are_karpenters() -> None:
    assert settings_sources.flag_name("vmMemoryOverheadPercent") == "--vm-memory-overhead-percent"
    assert settings_sources.flag_name("kubeClientQPS") == "--kube-client-qps"
    assert settings_sources.option_name("reservedENIs") == "reserved_enis"


def test_a_scenarios_settings_may_use_karpenters_environment_names_too() -> None:
    s = settings.Settings.from_mapping({"CLUSTER_NAME": "sim", "RESERVED_ENIS": "2", "KUBE_CLIENT_QPS": 3,
                                        "batchIdleDuration": "2s"})
    assert (s.cluster_name, s.reserved_enis, s.kube_client_qps, s.batch_idle_duration) == ("sim", 2, 3, 2.0)
    assert all(settings.env_name(k) == v for k, v in settings_sources.ENVIRONMENT.items())
    with pytest.raises(errors.ValidationError) as info:
        settings.Settings.from_mapping({"METRICS_PORT": "http"})
    assert [e.path for e in info.value.errors] == ["METRICS_PORT"]
