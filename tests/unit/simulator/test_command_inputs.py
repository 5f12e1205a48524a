"""The commands that read a live cluster (``karpy whatif`` and ``karpy design`` with ``--kubeconfig``) read it the
same way, through :mod:`karpy.simulator.command_inputs`: warnings on stderr, exit status 3 when it cannot be read."""

from __future__ import annotations

import pathlib

import click
import pytest
from click.testing import CliRunner

from karpy import cli
from karpy.kube import errors as kube_errors
from karpy.simulator import command_inputs, whatif_live

SPACE = str(pathlib.Path(__file__).resolve().parents[3] / "examples" / "design" / "space.yaml")
COMMANDS = {
    "whatif": ["whatif", "--kubeconfig", "kc.yaml"],
    "design": ["design", "--kubeconfig", "kc.yaml", "--space", SPACE],
}


def _unreachable(kubeconfig: str | None = None, context: str | None = None) -> tuple[tuple[str, str], list[str]]:
    raise kube_errors.KubeError(f"cannot connect ({kubeconfig}, {context})")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_cluster_that_cannot_be_read_exits_3_naming_the_kubeconfig(command: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(whatif_live, "read", _unreachable)
    result = CliRunner().invoke(cli.main, COMMANDS[command])
    assert result.exit_code == 3
    assert "Error: cannot read the cluster of kc.yaml: cannot connect (kc.yaml, None)" in result.output


def test_the_kinds_skipped_while_reading_a_cluster_are_warnings_and_the_list_is_the_input(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def read(kubeconfig: str | None = None, context: str | None = None) -> tuple[tuple[str, str], list[str]]:
        return ("https://api:6443", "kind: List\nitems: []\n"), ["NodePool: CRD not installed"]

    monkeypatch.setattr(whatif_live, "read", read)
    assert command_inputs.read_live_cluster("kc.yaml", "ctx") == ("https://api:6443", "kind: List\nitems: []\n")
    assert capsys.readouterr().err == "Warning: NodePool: CRD not installed\n"


def test_an_input_file_that_is_not_utf8_is_a_file_error_naming_it(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "dump.yaml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(click.FileError) as info:
        command_inputs.read_file(str(bad))
    assert info.value.filename == str(bad)
    assert "can't decode" in info.value.message
