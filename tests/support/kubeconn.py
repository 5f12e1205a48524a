"""A :class:`karpy.kube.config.Connection` without a file, for clients that send through a mock transport."""

from __future__ import annotations

from typing import Any

from lightkube.config import kubeconfig

from karpy.kube import config


def connection(server: str = "http://127.0.0.1:9", user: dict[str, Any] | None = None) -> config.Connection:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    single = kubeconfig.KubeConfig.from_dict(doc).get()
    assert single is not None
    return config.Connection(single, "test")
