"""Where the adapter connects: kubeconfig file and context, or the in-cluster service account.

:func:`load` picks the configuration the way controller-runtime's ``GetConfig`` does (and so
Karpenter): an explicit ``--kubeconfig`` path, else the ``KUBECONFIG`` environment variable
(the first existing file of a ``:``-separated list), else the in-cluster service account when
``KUBERNETES_SERVICE_HOST`` is set, else ``~/.kube/config``. ``context`` selects a kubeconfig
context (default: the file's ``current-context``). Parsing, token files, client certificates and
exec plugins are lightkube's (:mod:`lightkube.config.kubeconfig`); this module only chooses.

Every failure is a :class:`karpy.kube.errors.ConfigError` saying which source was tried.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lightkube.config import kubeconfig as lk_kubeconfig
from lightkube.core import exceptions as lk_exceptions

from karpy.kube import errors

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class Connection:
    """A chosen configuration: lightkube's ``SingleConfig`` plus where it came from."""

    config: lk_kubeconfig.SingleConfig
    source: str

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
    return Connection(single, f"{source}: {path}")


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
