"""Settings from a file, the environment and flags against hostile input: one bounded reader (alias
bombs, deep nesting, huge numbers, many keys), a range for every number, and a clear error naming the
setting for each problem, never a traceback."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from karpy import controller_run, settings, settings_sources
from karpy.api import errors


def _file_error(tmp_path: Path, text: str) -> errors.ValidationError:
    f = tmp_path / "settings.yaml"
    f.write_text(text)
    with pytest.raises(errors.ValidationError) as info:
        settings_sources.load({}, {}, f)
    return info.value


def test_an_alias_bomb_in_the_settings_file_is_refused_quickly(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    start = time.perf_counter()
    err = _file_error(tmp_path, "\n".join(lines) + "\nclusterName: *a9\n")
    assert time.perf_counter() - start < 5
    assert "once anchors are expanded" in str(err)


def test_deep_nesting_in_the_settings_file_is_a_validation_error(tmp_path: Path) -> None:
    err = _file_error(tmp_path, "commitments: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nesting" in str(err)


def test_a_5000_digit_number_is_an_error_naming_where_it_is(tmp_path: Path) -> None:
    assert "integer too large" in str(_file_error(tmp_path, "metricsPort: " + "9" * 5000 + "\n"))
    with pytest.raises(errors.ValidationError) as info:
        settings_sources.load({}, {"METRICS_PORT": "9" * 5000})
    assert info.value.errors[0].path == "METRICS_PORT"


def test_many_unknown_keys_are_refused_at_once(tmp_path: Path) -> None:
    start = time.perf_counter()
    err = _file_error(tmp_path, "".join(f"k{i}: 1\n" for i in range(50_000)))
    assert "at most 1000 settings" in str(err)
    with pytest.raises(errors.ValidationError, match="at most 1000 settings"):  # a scenario's spec.settings
        settings.Settings.from_mapping({f"k{i}": 1 for i in range(200_000)})
    assert "a settings file of at most" in str(_file_error(tmp_path, "".join(f"k{i}: 1\n" for i in range(200_000))))
    assert time.perf_counter() - start < 10
    err = _file_error(tmp_path, "".join(f"k{i}: 1\n" for i in range(900)))
    assert len(err.errors) <= 20


@pytest.mark.parametrize(("env", "value"), [
    ("VM_MEMORY_OVERHEAD_PERCENT", "inf"), ("VM_MEMORY_OVERHEAD_PERCENT", "nan"),
    ("VM_MEMORY_OVERHEAD_PERCENT", "1e400"),
    ("METRICS_PORT", "\uff18\uff10\uff18\uff10"), ("HEALTH_PROBE_PORT", "\u0668\u0660\u0668\u0661"),
    ("CLUSTER_NAME", "prod\x00"), ("CLUSTER_NAME", "pro\nd"), ("CLUSTER_NAME", "prod cluster"),
    ("INTERRUPTION_QUEUE", "q\x1b[31m"), ("KUBE_CLIENT_QPS", "0"), ("RESERVED_ENIS", "100000"),
    ("BATCH_IDLE_DURATION", "1ns"), ("HEALTH_PROBE_PORT", "8080"), ("KUBE_CLIENT_BURST", "-1"),
])
def test_a_bad_environment_value_is_an_error_naming_the_variable(env: str, value: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        settings_sources.load({}, {env: value})
    assert env in {e.path for e in info.value.errors}


@pytest.mark.parametrize(("text", "key"), [
    ("consolidationMinSaving: .inf", "consolidationMinSaving"),
    ("consolidationMinSaving: .nan", "consolidationMinSaving"),
    ("consolidationMinSaving: 2", "consolidationMinSaving"), ("reservedENIs: -1", "reservedENIs"),
    ("spotToSpotMinFlexibility: -5", "spotToSpotMinFlexibility"), ("registrationTTL: 1ns", "registrationTTL"),
    ("launchTTL: 1ns", "launchTTL"), ("iceCacheTTL: 1us", "iceCacheTTL"), ("launchTTL: 100000h", "launchTTL"),
    ("batchMaxDuration: 1000h", "batchMaxDuration"),
    ("consolidationValidationDelay: 2h", "consolidationValidationDelay"),
    ("metricsPort: 70000", "metricsPort"), ("clusterName: !!binary aGVsbG8=", "clusterName"),
    ("featureGates: !!set {NodeRepair}", "featureGates"),
])
def test_a_number_out_of_range_or_a_yaml_only_value_in_the_file_is_an_error_naming_the_key(
        tmp_path: Path, text: str, key: str) -> None:
    err = _file_error(tmp_path, text + "\n")
    assert any(key in e.path for e in err.errors), err


def _run(**options: object) -> tuple[int, str]:
    out = io.StringIO()
    opts = controller_run.Options(cloud_provider="kwok", in_memory_cluster=True, leader_elect=False,
                                  **options)  # type: ignore[arg-type]
    code = controller_run.run(opts, environ={}, stderr=out, install_signals=False)
    return code, out.getvalue()


@pytest.mark.parametrize("address", ["not an address", "", "1.2.3.4:80", "0.0.0.0\x00"])
def test_a_bad_bind_address_exits_2_naming_the_flag_without_a_traceback(address: str) -> None:
    code, err = _run(bind_address=address)
    assert code == 2 and "--bind-address" in err and "Traceback" not in err


def test_an_address_that_is_not_this_hosts_exits_2_saying_it_cannot_listen() -> None:
    code, err = _run(bind_address="192.0.2.1", settings_flags={"metricsPort": "18080", "healthProbePort": "18081"})
    # the probes listen first (/readyz answers 503 while the caches sync), so their port is the one named
    assert code == 2 and "cannot listen on --bind-address 192.0.2.1 --health-probe-port 18081" in err


def test_equal_metrics_and_health_ports_exit_2_naming_the_setting() -> None:
    code, err = _run(settings_flags={"metricsPort": "9000", "healthProbePort": "9000"})
    assert code == 2 and "--health-probe-port" in err and "other than metricsPort" in err
