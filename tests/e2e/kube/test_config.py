"""Choosing the connection: --kubeconfig, KUBECONFIG, in-cluster service account, ~/.kube/config."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from karpy.kube import config, errors


def kubeconfig(path: Path, server: str, *contexts: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": c, "cluster": {"server": f"{server}/{c}"}} for c in contexts],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": c, "context": {"cluster": c, "user": "u", "namespace": f"ns-{c}"}} for c in contexts],
        "current-context": contexts[0],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def test_an_explicit_kubeconfig_wins_and_a_context_can_be_chosen(tmp_path: Path) -> None:
    explicit = kubeconfig(tmp_path / "a.yaml", "https://a", "one", "two")
    env = {"KUBECONFIG": str(kubeconfig(tmp_path / "b.yaml", "https://b", "one"))}
    conn = config.load(str(explicit), environ=env)
    assert (conn.server, conn.namespace) == ("https://a/one", "ns-one")
    assert conn.source.startswith("--kubeconfig")
    assert config.load(str(explicit), "two", environ=env).server == "https://a/two"
    with pytest.raises(errors.ConfigError):
        config.load(str(explicit), "three", environ=env)


def test_kubeconfig_from_the_environment_uses_the_first_existing_file(tmp_path: Path) -> None:
    real = kubeconfig(tmp_path / "real.yaml", "https://env", "c")
    conn = config.load(environ={"KUBECONFIG": f"{tmp_path / 'missing.yaml'}:{real}"}, home=str(tmp_path))
    assert conn.server == "https://env/c" and conn.source.startswith("KUBECONFIG")
    with pytest.raises(errors.ConfigError):
        config.load(environ={"KUBECONFIG": str(tmp_path / "missing.yaml")})


def test_in_cluster_service_account_is_used_inside_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    (sa / "namespace").write_text("karpenter")
    (sa / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    conn = config.load(environ=env, service_account_dir=str(sa), home=str(tmp_path))
    assert (conn.server, conn.namespace) == ("https://10.0.0.1:443", "karpenter")
    assert conn.source == "in-cluster service account"


def test_the_home_kubeconfig_is_the_last_resort_and_nothing_at_all_is_a_clear_error(tmp_path: Path) -> None:
    kubeconfig(tmp_path / ".kube" / "config", "https://home", "c")
    assert config.load(environ={}, home=str(tmp_path)).server == "https://home/c"
    with pytest.raises(errors.ConfigError) as info:
        config.load(environ={}, home=str(tmp_path / "nobody"))
    assert "--kubeconfig" in info.value.message
