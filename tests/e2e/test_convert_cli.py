"""``karpy convert`` on every old-form fixture: v1 out, the same warnings simulate prints."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import yaml

from karpy.api import manifest

pytestmark = pytest.mark.e2e

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "manifests"
OLD = sorted(p for p in FIXTURES.glob("seed-*.yaml") if p.name != "seed-001-reference.yaml")
"""Every seed fixture that is a whole, valid input (seed-001 collects the reference page's snippets)."""
NEWEST = {"NodePool": "karpenter.sh/v1", "NodeClaim": "karpenter.sh/v1", "EC2NodeClass": "karpenter.k8s.aws/v1",
          "AKSNodeClass": "karpenter.azure.com/v1beta1"}
OLD_KINDS = {"Provisioner", "Machine", "AWSNodeTemplate"}


def karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpy.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("path", OLD, ids=[p.name for p in OLD])
def test_every_old_form_fixture_converts_to_v1_that_loads_without_conversion(path: pathlib.Path) -> None:
    done = karpy("convert", str(path), "--default-instance-profile", "KarpenterNodeInstanceProfile")
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    kinds = {d["kind"] for d in docs}
    assert not kinds & OLD_KINDS
    for d in docs:
        if d["kind"] in NEWEST:
            assert d["apiVersion"] == NEWEST[d["kind"]], d
    again = manifest.load_documents(done.stdout, source="converted")
    assert all(o.kind == o.original_kind and o.api_version == o.original_api_version for o in again.objects)
    original = manifest.load_documents(path.read_text(), source=str(path))
    assert len(again.objects) == len(original.objects)


def test_a_provisioner_gives_a_nodepool_and_its_ec2nodeclass_with_the_simulate_warnings() -> None:
    path = FIXTURES / "seed-000-provisioner.yaml"
    done = karpy("convert", str(path))
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    pool = next(d for d in docs if d["kind"] == "NodePool")
    nc = next(d for d in docs if d["kind"] == "EC2NodeClass")
    assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == nc["metadata"]["name"]
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert "ttlSecondsAfterEmpty" in done.stderr and "consolidateAfter" in done.stderr


def test_an_invalid_old_manifest_writes_nothing_and_names_the_field(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\n"
                   "spec: {ttlSecondsAfterEmpty: soon}\n")
    out = tmp_path / "out.yaml"
    done = karpy("convert", str(bad), "-o", str(out))
    assert done.returncode == 2
    assert "ttlSecondsAfterEmpty" in done.stderr
    assert not out.exists()


def test_the_reference_snippets_that_are_not_whole_objects_are_refused_each_by_name() -> None:
    done = karpy("convert", str(FIXTURES / "seed-001-reference.yaml"))
    assert done.returncode == 2
    assert "NodePool/foo-nodepool" in done.stderr and "nodeClassRef" in done.stderr
    assert done.stdout == ""
