"""Exec credential plugins, proxies and tls-server-name, as client-go honours them (issue 19)."""

from __future__ import annotations

import http.server
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.kube import client, config, errors, transport
from support import apiserver, tcpproxy

PLUGIN = """
import json, os, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
count_file = sys.argv[1]
n = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(n))
server = info["spec"].get("cluster", {}).get("server", "none")
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {"token": f"tok-{n}-interactive-{info['spec']['interactive']}-server-{server}",
                             "expirationTimestamp": sys.argv[2]}}))
"""


def exec_config(tmp_path: Path, api_version: str = "client.authentication.k8s.io/v1",
                expiry: str = "2030-01-01T00:00:00Z", **extra: Any) -> dict[str, Any]:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    return {"apiVersion": api_version, "command": sys.executable,
            "args": [str(script), str(tmp_path / "count"), expiry], **extra}


def test_a_v1_plugin_is_accepted_and_its_token_cached_until_its_expiration(tmp_path: Path) -> None:
    now = [1_800_000_000.0]  # 2027-01-15T08:00:00Z
    auth = transport.ExecAuth(exec_config(tmp_path, expiry="2027-01-15T09:00:00Z", interactiveMode="Never"),
                              now=lambda: now[0], stdin_is_terminal=lambda: False)
    assert auth.token() == "tok-1-interactive-False-server-none"
    assert auth.token() == "tok-1-interactive-False-server-none"
    assert auth.runs == 1
    now[0] = 1_800_000_000.0 + 3600.0  # 09:00, the expiry
    assert auth.token() == "tok-2-interactive-False-server-none"
    assert auth.runs == 2


def test_a_v1beta1_plugin_is_accepted_and_defaults_to_interactive_if_available(tmp_path: Path) -> None:
    auth = transport.ExecAuth(exec_config(tmp_path, "client.authentication.k8s.io/v1beta1"),
                              stdin_is_terminal=lambda: True)
    assert auth.interactive_mode == "IfAvailable"
    assert auth.token() == "tok-1-interactive-True-server-none"


def test_interactive_mode_always_without_a_terminal_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    auth = transport.ExecAuth(exec_config(tmp_path, interactiveMode="Always"), stdin_is_terminal=lambda: False)
    with pytest.raises(errors.ConfigError, match="interactiveMode Always, but stdin is not a terminal"):
        auth.token()


@pytest.mark.parametrize(("entry", "message"), [
    ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "apiVersion must be one of"),
    ({"interactiveMode": None}, "interactiveMode must be one of"),
    ({"interactiveMode": "Sometimes"}, "found 'Sometimes'"),
])
def test_a_bad_exec_entry_is_a_config_error_naming_the_field(tmp_path: Path, entry: dict[str, Any],
                                                              message: str) -> None:
    with pytest.raises(errors.ConfigError, match=message):
        transport.ExecAuth({**exec_config(tmp_path), **entry})


def test_a_kubeconfig_with_a_v1_exec_plugin_authenticates_requests(tmp_path: Path) -> None:
    with apiserver.EmulatedApiServer() as api:
        path = api.write_kubeconfig(tmp_path / "kubeconfig")
        doc = yaml.safe_load(path.read_text())
        doc["users"][0]["user"] = {"exec": exec_config(tmp_path, interactiveMode="IfAvailable",
                                                       provideClusterInfo=True)}
        path.write_text(yaml.safe_dump(doc))
        conn = config.load(str(path))
        assert conn.exec_config is not None and conn.exec_config["interactiveMode"] == "IfAvailable"
        kc = client.KubeClient(conn, qps=0)
        try:
            assert kc.server_version()["gitVersion"]
            assert kc.server_version()["gitVersion"]
        finally:
            kc.close()
        assert (tmp_path / "count").read_text() == "1"  # cached across requests
        auth = transport.build_auth(conn)
        assert isinstance(auth, transport.ExecAuth)
        assert auth.token().endswith(f"-server-{api.url}")  # provideClusterInfo: spec.cluster.server


@pytest.mark.parametrize(("server", "env", "expected"), [
    ("https://api.example.com", {"HTTPS_PROXY": "http://proxy:3128"}, "http://proxy:3128"),
    ("https://api.example.com", {"https_proxy": "http://proxy:3128"}, "http://proxy:3128"),
    ("http://api.example.com", {"HTTPS_PROXY": "http://proxy:3128"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".example.com"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "other.com,*"}, None),
    ("https://api.example.com", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "ample.com"}, "http://p:1"),
    ("https://10.0.3.4:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/16"}, None),
    ("https://10.1.3.4:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/16"}, "http://p:1"),
    ("https://10.0.3.4:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.3.4:443"}, "http://p:1"),
    ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://localhost:6443", {"HTTPS_PROXY": "http://p:1"}, None),
])
def test_the_environment_proxy_is_chosen_as_go_chooses_it(server: str, env: dict[str, str],
                                                          expected: str | None) -> None:
    assert transport.proxy_for(server, None, env) == expected


def test_the_kubeconfig_proxy_url_wins_over_the_environment() -> None:
    assert transport.proxy_for("https://127.0.0.1", "http://kube-proxy:8080", {"NO_PROXY": "*"}) == \
        "http://kube-proxy:8080"


def test_requests_go_through_the_kubeconfig_proxy_url(tmp_path: Path) -> None:
    with apiserver.EmulatedApiServer() as api:
        host, _, port = api.url.removeprefix("http://").partition(":")
        with tcpproxy.TcpProxy((host, int(port))) as proxy:
            path = api.write_kubeconfig(tmp_path / "kubeconfig")
            doc = yaml.safe_load(path.read_text())
            doc["clusters"][0]["cluster"]["proxy-url"] = proxy.url
            path.write_text(yaml.safe_dump(doc))
            kc = client.KubeClient(config.load(str(path)), qps=0)
            try:
                assert kc.server_version()["gitVersion"]
            finally:
                kc.close()
            assert proxy.connections >= 1


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server whose certificate names only ``api.internal``; yields its URL and CA file."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=api.internal", "-addext", "subjectAltName=DNS:api.internal", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"major": "1", "minor": "31", "gitVersion": "v1.31.0"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()


def _tls_kubeconfig(tmp_path: Path, url: str, ca: Path, server_name: str | None) -> config.Connection:
    cluster: dict[str, Any] = {"server": url, "certificate-authority": str(ca)}
    if server_name:
        cluster["tls-server-name"] = server_name
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": cluster}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "current-context": "c"}
    path = tmp_path / f"kubeconfig-{server_name}"
    path.write_text(yaml.safe_dump(doc))
    return config.load(str(path))


def test_tls_server_name_is_the_name_checked_against_the_certificate(
        tmp_path: Path, tls_server: tuple[str, Path]) -> None:
    url, ca = tls_server
    named = client.KubeClient(_tls_kubeconfig(tmp_path, url, ca, "api.internal"), qps=0, max_retries=0)
    plain = client.KubeClient(_tls_kubeconfig(tmp_path, url, ca, None), qps=0, max_retries=0)
    try:
        assert named.server_version()["gitVersion"] == "v1.31.0"
        with pytest.raises(errors.Unavailable, match="certificate"):
            plain.server_version()  # 127.0.0.1 is not in the certificate
    finally:
        named.close()
        plain.close()
