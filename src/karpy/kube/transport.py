"""How a :class:`karpy.kube.client.KubeClient` reaches its API server: TLS, proxy, keepalive, credentials.

What a caller may rely on (each as client-go's ``rest.Config`` / ``transport`` behaves):

* **TLS**: the kubeconfig's CA (file or data), ``insecure-skip-tls-verify`` and client certificate
  (lightkube's ``verify_cluster``). ``tls-server-name`` is the name sent in SNI *and* checked
  against the server's certificate instead of the URL's host.
* **Proxy**: the cluster's ``proxy-url`` when set; else ``HTTPS_PROXY`` (``HTTP_PROXY`` for an
  ``http://`` server, lower-case names too) unless ``NO_PROXY`` lists the host (``*``, a name and
  its sub-domains, ``.suffix``, an IP or a CIDR, optionally with ``:port``); a loopback server is
  never proxied (Go's ``httpproxy``).
* **TCP keepalive** on every connection (:data:`KEEPALIVE`: probes after 30 s idle, every 10 s,
  3 lost probes drop the connection), so a peer lost without a FIN is noticed by the kernel as well
  as by the watch's read timeout.
* **Exec credential plugins** (:class:`ExecAuth`) declaring ``client.authentication.k8s.io/v1`` or
  ``v1beta1``: ``KUBERNETES_EXEC_INFO`` is set (with ``spec.cluster`` - server, CA data,
  ``tls-server-name``, ``proxy-url`` - when the entry says ``provideClusterInfo: true``),
  ``interactiveMode`` honoured (``Never``: stdin not
  connected; ``IfAvailable``: connected when it is a terminal; ``Always``: refused when it is not),
  the token cached until its ``expirationTimestamp`` (or the next 401), one plugin run at a time.
  A plugin that fails, or answers another apiVersion or no token, is a
  :class:`karpy.kube.errors.ConfigError` naming the command and what it answered.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from lightkube.config import client_adapter

from karpy import clock as clock_mod
from karpy.kube import config as config_mod
from karpy.kube import errors

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_TIMEOUT = 60.0
"""Seconds an exec plugin may take."""


def _keepalive() -> list[tuple[int, int, int]]:
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        opt = getattr(socket, name, None)
        if opt is not None:
            options.append((socket.IPPROTO_TCP, opt, value))
    return options


KEEPALIVE = _keepalive()


def proxy_for(server: str, proxy_url: str | None, environ: Mapping[str, str]) -> str | None:
    """The proxy to reach ``server`` through (module docstring), or ``None``."""
    if proxy_url:
        return proxy_url
    parts = urlsplit(server)
    host = (parts.hostname or "").lower()
    if not host or host == "localhost" or _is_loopback(host):
        return None
    names = ("HTTPS_PROXY", "https_proxy") if parts.scheme == "https" else ("HTTP_PROXY", "http_proxy")
    proxy = next((environ[n] for n in names if environ.get(n)), "")
    if not proxy:
        return None
    no_proxy = environ.get("NO_PROXY") or environ.get("no_proxy") or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry and _bypassed(host, port, entry):
            return None
    return proxy


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bypassed(host: str, port: int, entry: str) -> bool:
    if entry == "*":
        return True
    if "/" in entry:
        try:
            return ipaddress.ip_address(host.strip("[]")) in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    name, _, want_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
    if want_port and want_port != str(port):
        return False
    name = name.lstrip(".")
    return host == name or host.endswith("." + name)


class _ServerNameTransport(httpx2.HTTPTransport):
    """Sends and checks ``tls-server-name`` instead of the URL's host."""

    def __init__(self, server_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._server_name = server_name

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.extensions = {**request.extensions, "sni_hostname": self._server_name}
        return super().handle_request(request)


def build_transport(connection: config_mod.Connection, environ: Mapping[str, str] | None = None
                    ) -> httpx2.HTTPTransport:
    """The transport for ``connection``: TLS, proxy, server name and keepalive (module docstring)."""
    env = os.environ if environ is None else environ
    cfg = connection.config
    try:
        if cfg.user is None:
            raise errors.ConfigError(f"kubeconfig context {cfg.context_name!r} names no user")
        verify = client_adapter.verify_cluster(cfg.cluster, cfg.user, cfg.abs_file, trust_env=False)
    except errors.ConfigError:
        raise
    except Exception as exc:  # lightkube ConfigError, ssl and OS errors (a missing CA file...)
        raise errors.ConfigError(f"cannot set up TLS for {connection.server}: {exc}") from exc
    proxy = proxy_for(connection.server, connection.proxy_url, env)
    kwargs: dict[str, Any] = {"verify": verify, "proxy": proxy, "socket_options": KEEPALIVE, "trust_env": False}
    if connection.tls_server_name:
        return _ServerNameTransport(connection.tls_server_name, **kwargs)
    return httpx2.HTTPTransport(**kwargs)


def build_auth(connection: config_mod.Connection) -> httpx2.Auth | None:
    """The credentials of ``connection``'s user: :class:`ExecAuth` for an exec plugin, else lightkube's."""
    if connection.exec_config is not None:
        return ExecAuth(connection.exec_config, connection.server, cluster_info=cluster_info(connection))
    try:
        return client_adapter.user_auth(connection.config.user)
    except Exception as exc:  # an auth-provider entry
        raise errors.ConfigError(f"cannot use the credentials of {connection.source}: {exc}") from exc


def cluster_info(connection: config_mod.Connection) -> dict[str, Any]:
    """The ``spec.cluster`` an exec plugin asking ``provideClusterInfo`` receives (client-go's ``Cluster``)."""
    cluster = connection.config.cluster
    info: dict[str, Any] = {"server": connection.server}
    ca_data = cluster.certificate_auth_data
    if not ca_data and cluster.certificate_auth:
        try:
            ca_data = base64.b64encode(Path(connection.config.abs_file(cluster.certificate_auth)).read_bytes()).decode()
        except (OSError, ValueError) as exc:
            raise errors.ConfigError(f"cannot read certificate-authority {cluster.certificate_auth}: {exc}") from exc
    if ca_data:
        info["certificate-authority-data"] = ca_data
    if cluster.insecure:
        info["insecure-skip-tls-verify"] = True
    if connection.tls_server_name:
        info["tls-server-name"] = connection.tls_server_name
    if connection.proxy_url:
        info["proxy-url"] = connection.proxy_url
    return info


class ExecAuth(httpx2.Auth):
    """A bearer token from an exec credential plugin (module docstring)."""

    def __init__(
        self,
        exec_config: Mapping[str, Any],
        server: str = "",
        *,
        now: Callable[[], float] = time.time,
        stdin_is_terminal: Callable[[], bool] = lambda: sys.stdin is not None and sys.stdin.isatty(),
        environ: Mapping[str, str] | None = None,
        cluster_info: Mapping[str, Any] | None = None,
    ) -> None:
        self.api_version = str(exec_config.get("apiVersion") or "")
        if self.api_version not in EXEC_API_VERSIONS:
            raise errors.ConfigError(
                f"exec plugin {exec_config.get('command')!r}: apiVersion must be one of "
                f"{', '.join(EXEC_API_VERSIONS)}, found {self.api_version!r}"
            )
        command = exec_config.get("command")
        if not isinstance(command, str) or not command:
            raise errors.ConfigError("exec plugin: command must be a non-empty string")
        args = exec_config.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise errors.ConfigError(f"exec plugin {command!r}: args must be a list of strings")
        self.command = [command, *args]
        default_mode = "IfAvailable" if self.api_version.endswith("v1beta1") else ""
        self.interactive_mode = str(exec_config.get("interactiveMode") or default_mode)
        if self.interactive_mode not in INTERACTIVE_MODES:
            raise errors.ConfigError(
                f"exec plugin {command!r}: interactiveMode must be one of {', '.join(INTERACTIVE_MODES)} "
                f"(required for {EXEC_API_VERSIONS[0]}), found {self.interactive_mode!r}"
            )
        self.env = {str(e.get("name")): str(e.get("value")) for e in exec_config.get("env") or ()
                    if isinstance(e, Mapping)}
        self.server = server
        self.cluster_info = dict(cluster_info or {"server": server}) if exec_config.get("provideClusterInfo") else None
        self._now = now
        self._stdin_is_terminal = stdin_is_terminal
        self._environ = environ
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires: float | None = None
        self.runs = 0
        """How many times the plugin ran (tests)."""

    def token(self, *, refresh: bool = False) -> str:
        """The cached token, or a fresh one from the plugin when none, expired or ``refresh``."""
        with self._lock:
            if refresh or self._token is None or (self._expires is not None and self._now() >= self._expires):
                self._token, self._expires = self._run()
            return self._token

    def _run(self) -> tuple[str, float | None]:
        interactive = self.interactive_mode == "Always" or (
            self.interactive_mode == "IfAvailable" and self._stdin_is_terminal()
        )
        if self.interactive_mode == "Always" and not self._stdin_is_terminal():
            raise errors.ConfigError(
                f"exec plugin {self.command[0]!r} requires interactiveMode Always, but stdin is not a terminal"
            )
        env = dict(os.environ if self._environ is None else self._environ)
        env.update(self.env)
        spec: dict[str, Any] = {"interactive": interactive}
        if self.cluster_info is not None:
            spec["cluster"] = self.cluster_info
        env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential",
                                                  "spec": spec})
        self.runs += 1
        try:
            done = subprocess.run(
                self.command, env=env, stdin=None if interactive else subprocess.DEVNULL,
                capture_output=True, timeout=EXEC_TIMEOUT, check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise errors.ConfigError(f"exec plugin {self.command[0]!r} could not run: {exc}") from exc
        if done.returncode != 0:
            raise errors.ConfigError(
                f"exec plugin {self.command[0]!r} exited {done.returncode}: "
                f"{done.stderr.decode('utf-8', 'replace')[:400]}"
            )
        return self._parse(done.stdout)

    def _parse(self, output: bytes) -> tuple[str, float | None]:
        what = f"exec plugin {self.command[0]!r}"
        try:
            cred = json.loads(output)
        except ValueError as exc:
            raise errors.ConfigError(f"{what}: the output is not JSON: {output[:200]!r}") from exc
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            raise errors.ConfigError(f"{what}: expected an ExecCredential, found {str(cred)[:200]}")
        if cred.get("apiVersion") != self.api_version:
            raise errors.ConfigError(
                f"{what}: answered apiVersion {cred.get('apiVersion')!r}, the kubeconfig declares {self.api_version!r}"
            )
        status = cred.get("status")
        token = status.get("token") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token:
            raise errors.ConfigError(f"{what}: the ExecCredential has no status.token (client certificates "
                                     "from exec plugins are not supported)")
        expiry = status.get("expirationTimestamp") if isinstance(status, dict) else None
        if expiry is None:
            return token, None
        try:
            return token, clock_mod.parse_rfc3339(str(expiry))
        except ValueError as exc:
            raise errors.ConfigError(f"{what}: status.expirationTimestamp {expiry!r} is not RFC 3339") from exc

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = f"Bearer {self.token(refresh=True)}"
            yield request
