"""``karpy catalog`` lists the built-in catalogs as a table or as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner, Result

from karpy import cli

pytestmark = pytest.mark.e2e

DOCUMENTED_KEYS = {"name", "labels", "capacity", "allocatable", "offerings"}
OPTIONAL_KEYS = {"volumeLimits"}  # CSI driver -> volumes one node attaches, when the type has a count
OFFERING_KEYS = {"zone", "capacityType", "price", "available"}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args), catch_exceptions=False)


def expect_catalog_json(text: str, count: int) -> list[dict[str, Any]]:
    doc = json.loads(text)
    assert isinstance(doc, list)
    assert len(doc) == count
    for entry in doc:
        assert DOCUMENTED_KEYS <= set(entry) <= DOCUMENTED_KEYS | OPTIONAL_KEYS
        assert entry["offerings"]
        assert all(set(o) == OFFERING_KEYS for o in entry["offerings"])
    return doc


def test_the_benchmark_catalog_as_json_has_the_documented_keys() -> None:
    result = run("catalog", "benchmark", "--output", "json")
    assert result.exit_code == 0, result.output
    doc = expect_catalog_json(result.output, 400)
    first = next(e for e in doc if e["name"] == "fake-it-0")
    assert first["capacity"] == {"cpu": "1", "memory": "2Gi", "pods": "10"}
    assert first["allocatable"]["cpu"] == "900m"


def test_the_aws_table_lists_m5_large_with_its_allocatable_and_prices() -> None:
    result = run("catalog", "aws")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if " m5.large " in line)
    assert "1930m" in line
    assert "6903Mi" in line
    assert "0.0960" in line
    assert "us-east-1{a,b,c,d,f}" in line
    assert "instance types" in result.output.splitlines()[-1]


def test_a_zone_option_limits_the_json_to_that_zone() -> None:
    result = run("catalog", "kwok", "-o", "json", "--zone", "test-zone-b")
    doc = expect_catalog_json(result.output, 144)
    assert {o["zone"] for e in doc for o in e["offerings"]} == {"test-zone-b"}


def test_the_azure_catalog_takes_a_region() -> None:
    result = run("catalog", "azure", "--region", "westcentralus", "--output", "json")
    assert result.exit_code == 0, result.output
    names = {e["name"] for e in json.loads(result.output)}
    assert "Standard_D2s_v3" in names
    assert "Standard_NC16as_T4_v3" not in names


def test_an_unknown_region_is_a_usage_error_naming_what_was_expected() -> None:
    result = run("catalog", "aws", "--region", "eu-west-1")
    assert result.exit_code == 2
    assert "us-east-1" in result.output


def test_an_aws_region_without_prices_says_which_region_has_them_why_and_what_to_do_instead() -> None:
    result = run("catalog", "aws", "--region", "eu-west-1")
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "region: expected us-east-1: the only region karpy has EC2 on-demand prices for" in text
    assert "no package reachable here ships current prices of other regions" in text
    assert "karpy controller --cloud-provider aws" in text and "Pricing API" in text
    assert text.rstrip().endswith("found 'eu-west-1'")


def test_an_unknown_catalog_name_is_a_usage_error() -> None:
    result = run("catalog", "gcp")
    assert result.exit_code == 2
    assert "benchmark" in result.output


def test_the_catalog_command_runs_as_a_module_in_a_real_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "karpy.cli", "catalog", "benchmark", "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    expect_catalog_json(proc.stdout, 400)


def test_the_table_in_a_real_process_is_wide_enough_for_long_names() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "karpy.cli", "catalog", "azure"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Standard_NC24ads_A100_v4" in proc.stdout
