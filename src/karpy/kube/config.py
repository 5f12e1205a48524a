"""Where the adapter connects: kubeconfig file and context, or the in-cluster service account.

:func:`load` picks the configuration the way controller-runtime's ``GetConfig`` does (and so
Karpenter): an explicit ``--kubeconfig`` path, else the ``KUBECONFIG`` environment variable
(the first existing file of a ``:``-separated list), else the in-cluster service account when
``KUBERNETES_SERVICE_HOST`` is set, else ``~/.kube/config``. ``context`` selects a kubeconfig
context (default: the file's ``current-context``). Parsing, token files and client certificates
are lightkube's (:mod:`lightkube.config.kubeconfig`); this module chooses, and reads from the file
what lightkube drops: the cluster's ``proxy-url`` and ``tls-server-name`` and the user's whole
``exec`` entry (``interactiveMode``, ``provideClusterInfo``), used by :mod:`karpy.kube.transport`.

Every failure is a :class:`karpy.kube.errors.ConfigError` saying which source was tried.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from lightkube.config import kubeconfig as lk_kubeconfig
from lightkube.core import exceptions as lk_exceptions

from karpy.kube import errors

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class Connection:
    """A chosen configuration: lightkube's ``SingleConfig`` plus where it came from."""

    config: lk_kubeconfig.SingleConfig
    source: str
    proxy_url: str | None = None
    tls_server_name: str | None = None
    exec_config: Mapping[str, Any] | None = None
    """The user's ``exec`` entry as written (apiVersion, command, args, env, interactiveMode...)."""

    @property
    def server(self) -> str:
        return str(self.config.cluster.server)

    @property
    def namespace(self) -> str:
        return str(self.config.namespace)


def _from_file(path: str, context: str | None, source: str) -> Connection:
    try:
        kc = lk_kubeconfig.KubeConfig.from_file(path)
        single = kc.get(context_name=context)
    except (lk_exceptions.ConfigError, OSError, ValueError, KeyError, TypeError) as exc:
        raise errors.ConfigError(f"cannot use kubeconfig {path} ({source}): {exc}") from exc
    if single is None:
        raise errors.ConfigError(f"kubeconfig {path} ({source}) has no current-context; pass --kube-context")
    return with_extras(Connection(single, f"{source}: {path}"), _read_yaml(path))


def _read_yaml(path: str) -> Any:
    try:
        return yaml.safe_load(Path(path).expanduser().read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise errors.ConfigError(f"cannot read kubeconfig {path}: {exc}") from exc


def _named(doc: Any, section: str, name: str, field: str) -> Mapping[str, Any]:
    for entry in (doc.get(section) if isinstance(doc, Mapping) else None) or ():
        found = entry.get(field) if isinstance(entry, Mapping) and entry.get("name") == name else None
        if isinstance(found, Mapping):
            return found
    return {}


def with_extras(conn: Connection, doc: Any) -> Connection:
    """``conn`` with the fields lightkube drops, read from the kubeconfig document ``doc``."""
    context = _named(doc, "contexts", conn.config.context_name, "context")
    cluster = _named(doc, "clusters", str(context.get("cluster") or ""), "cluster")
    user = _named(doc, "users", str(context.get("user") or ""), "user")
    proxy, server_name, exec_config = cluster.get("proxy-url"), cluster.get("tls-server-name"), user.get("exec")
    for field, value in (("proxy-url", proxy), ("tls-server-name", server_name)):
        if value is not None and not isinstance(value, str):
            raise errors.ConfigError(f"kubeconfig cluster {context.get('cluster')!r}: {field} must be a string, "
                                     f"found {type(value).__name__}")
    if exec_config is not None and not isinstance(exec_config, Mapping):
        raise errors.ConfigError(f"kubeconfig user {context.get('user')!r}: exec must be a mapping")
    return Connection(conn.config, conn.source, proxy or None, server_name or None,
                      dict(exec_config) if exec_config is not None else None)


def load(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    home: str | None = None,
) -> Connection:
    """The connection configuration, chosen in controller-runtime's order (module docstring)."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        return _from_file(kubeconfig, context, "--kubeconfig")
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        for candidate in listed:
            if Path(candidate).is_file():
                return _from_file(candidate, context, "KUBECONFIG")
        raise errors.ConfigError(f"none of the files in KUBECONFIG exists: {listed}")
    if env.get("KUBERNETES_SERVICE_HOST"):
        try:
            kc = lk_kubeconfig.KubeConfig.from_service_account(service_account=service_account_dir)
            single = kc.get()
        except (lk_exceptions.ConfigError, OSError) as exc:
            raise errors.ConfigError(
                f"in-cluster configuration from {service_account_dir} is not usable: {exc}"
            ) from exc
        if single is None:  # pragma: no cover - lightkube always sets a context for a service account
            raise errors.ConfigError("in-cluster configuration has no context")
        return Connection(single, "in-cluster service account")
    default = Path(home if home is not None else Path.home()) / ".kube" / "config"
    if default.is_file():
        return _from_file(str(default), context, "default")
    raise errors.ConfigError(
        "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a pod with a "
        f"service account, or create {default}"
    )
