"""A real Kubernetes control plane on loopback, built from upstream's Go modules, for karpy's tests.

``scripts/realcluster/build.sh`` builds kube-apiserver, kube-controller-manager, kube-scheduler,
kubectl, etcd, kwok, kwokctl, helm (and Karpenter's KWOK provider) from their published Go modules
into a cache outside the repository. This module starts a cluster from those binaries with
``kwokctl create cluster --runtime binary`` (RBAC and admission on), and drives it with the real
``kubectl`` and ``helm``:

- :func:`start` / :meth:`RealCluster.stop`: one cluster per call, its state under a work directory.
- :meth:`RealCluster.kubectl` / :meth:`RealCluster.helm`: the upstream tools against it.
- :func:`service_account_kubeconfig`: a kubeconfig holding a TokenRequest token of a ServiceAccount,
  so a process outside the cluster runs with exactly that account's RBAC (as the chart's pod would).

As a command: ``python tests/support/realcluster.py up [--name N] [--workdir DIR]`` starts a cluster
and prints its admin kubeconfig's path; ``down [--name N] [--workdir DIR]`` stops it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "realcluster" / "build.sh"
K8S_VERSION = "v1.34.4"
"""The Kubernetes version build.sh builds (keep equal to its K8S_VERSION)."""
BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok", "kwokctl",
            "helm")


class RealClusterError(RuntimeError):
    """The control plane could not be built, started or driven; the message says which step and why."""


def cache_dir() -> Path:
    return Path(os.environ.get("KARPY_UPSTREAM_CACHE") or Path.home() / ".cache" / "karpy-upstream")


def bin_dir() -> Path:
    return cache_dir() / "bin"


def missing_binaries(names: Sequence[str] = BINARIES) -> list[str]:
    return [n for n in names if not os.access(bin_dir() / n, os.X_OK)]


def build(components: Sequence[str] = ()) -> Path:
    """Run build.sh (a no-op for what is cached) and return the bin directory."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), *components], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RealClusterError(f"build.sh {' '.join(components)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass
class RealCluster:
    """One kwokctl cluster on loopback; see the module docstring."""

    name: str
    workdir: Path
    kubeconfig: Path
    bin: Path
    env: dict[str, str] = field(default_factory=dict)

    def _run(self, argv: Sequence[str], stdin: str | None, check: bool,
             timeout: float) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False, timeout=timeout,
                              env={**os.environ, **self.env, "KUBECONFIG": str(self.kubeconfig)})
        if check and proc.returncode != 0:
            raise RealClusterError(f"{' '.join(argv[:6])} ... exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        return proc

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return self._run([str(self.bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args], stdin, check,
                         timeout)

    def helm(self, *args: str, check: bool = True, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        home = self.workdir / "helm"
        self.env.setdefault("HELM_CACHE_HOME", str(home / "cache"))
        self.env.setdefault("HELM_CONFIG_HOME", str(home / "config"))
        self.env.setdefault("HELM_DATA_HOME", str(home / "data"))
        return self._run([str(self.bin / "helm"), "--kubeconfig", str(self.kubeconfig), *args], None, check,
                         timeout)

    def apply(self, objects: Sequence[Mapping[str, Any]] | str, *extra: str) -> None:
        """``kubectl apply --server-side`` of objects (or YAML text): the real schema and CEL checks run."""
        text = objects if isinstance(objects, str) else yaml.safe_dump_all([dict(o) for o in objects])
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", *extra, stdin=text)

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def server(self) -> str:
        conf = yaml.safe_load(self.kubeconfig.read_text())
        return str(conf["clusters"][0]["cluster"]["server"])

    def ca_data(self) -> str:
        conf = yaml.safe_load(self.kubeconfig.read_text())
        c = conf["clusters"][0]["cluster"]
        if "certificate-authority-data" in c:
            return str(c["certificate-authority-data"])
        return base64.b64encode(Path(c["certificate-authority"]).read_bytes()).decode()

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            proc = self.kubectl("get", "--raw", "/readyz", check=False, timeout=10)
            if proc.returncode == 0 and proc.stdout.strip() == "ok":
                # kube-controller-manager must have created the default ServiceAccount.
                sa = self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False, timeout=10)
                if sa.returncode == 0:
                    return
                last = sa.stderr
            else:
                last = proc.stderr
            time.sleep(0.5)
        raise RealClusterError(f"cluster {self.name} not ready within {timeout}s: {last[-2000:]}")

    def logs(self, component: str) -> str:
        path = self.workdir / "clusters" / self.name / "logs" / f"{component}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        _kwokctl(self.bin, self.workdir, ["--name", self.name, "delete", "cluster"], check=False, timeout=120)


def _kwokctl(bins: Path, workdir: Path, args: Sequence[str], check: bool = True,
             timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KWOK_WORKDIR": str(workdir), "KWOK_KUBECTL_BINARY": str(bins / "kubectl"),
           "KWOK_KUBE_VERSION": K8S_VERSION}
    proc = subprocess.run([str(bins / "kwokctl"), *args], capture_output=True, text=True, env=env, check=False,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise RealClusterError(f"kwokctl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def loopback_config(etcd_port: int, etcd_peer_port: int, kwok_port: int) -> dict[str, Any]:
    """kwokctl's binary runtime binds every component to every address; keep them on loopback."""
    client, peer = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{etcd_peer_port}"

    def override(component: str, args: Mapping[str, str]) -> dict[str, Any]:
        return {"name": component, "extraArgs": [{"key": k, "value": v, "override": True} for k, v in args.items()]}

    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokctlConfiguration",
        "componentsPatches": [
            override("etcd", {"listen-client-urls": client, "advertise-client-urls": client,
                              "listen-peer-urls": peer, "initial-advertise-peer-urls": peer,
                              "initial-cluster": f"node0={peer}"}),
            override("kube-apiserver", {"bind-address": "127.0.0.1"}),
            override("kube-controller-manager", {"bind-address": "127.0.0.1"}),
            override("kube-scheduler", {"bind-address": "127.0.0.1"}),
            override("kwok-controller", {"server-address": f"127.0.0.1:{kwok_port}"}),
        ],
    }


def start(name: str, workdir: Path, extra_args: Sequence[str] = (), bins: Path | None = None) -> RealCluster:
    """Start a cluster: etcd, kube-apiserver (RBAC + admission), kube-controller-manager, kube-scheduler
    and the KWOK controller, all upstream builds, listening on loopback."""
    bins = bins or bin_dir()
    missing = [n for n in BINARIES if not os.access(bins / n, os.X_OK)]
    if missing:
        raise RealClusterError(f"missing upstream binaries in {bins}: {', '.join(missing)} (run {BUILD_SCRIPT})")
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = workdir / f"{name}.kubeconfig"
    config = workdir / f"{name}.kwokctl.yaml"
    ports = _free_ports(6)
    config.write_text(yaml.safe_dump(loopback_config(ports[1], ports[2], ports[5])))
    _kwokctl(bins, workdir, ["--name", name, "delete", "cluster"], check=False, timeout=120)
    _kwokctl(bins, workdir, [
        "--name", name, "create", "cluster", "--runtime", "binary",
        "--kube-apiserver-binary", str(bins / "kube-apiserver"),
        "--kube-controller-manager-binary", str(bins / "kube-controller-manager"),
        "--kube-scheduler-binary", str(bins / "kube-scheduler"),
        "--kwok-controller-binary", str(bins / "kwok"),
        "--etcd-binary", str(bins / "etcd"),
        "--kube-authorization", "--kube-admission", "--disable-qps-limits",
        "--kube-apiserver-port", str(ports[0]), "--etcd-port", str(ports[1]),
        "--kube-controller-manager-port", str(ports[3]), "--kube-scheduler-port", str(ports[4]),
        "--controller-port", str(ports[5]), "--config", str(config),
        "--kubeconfig", str(kubeconfig), "--wait", "120s", *extra_args,
    ], timeout=300)
    cluster = RealCluster(name=name, workdir=workdir, kubeconfig=kubeconfig, bin=bins)
    cluster.wait_ready()
    return cluster


def service_account_kubeconfig(cluster: RealCluster, namespace: str, account: str, path: Path,
                               duration: str = "2h") -> Path:
    """A kubeconfig that authenticates as ``namespace/account`` with a TokenRequest token."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration", duration).stdout.strip()
    conf = {
        "apiVersion": "v1", "kind": "Config", "current-context": account,
        "clusters": [{"name": cluster.name, "cluster": {"server": cluster.server(),
                                                          "certificate-authority-data": cluster.ca_data()}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": cluster.name, "user": account,
                                                    "namespace": namespace}}],
    }
    path.write_text(yaml.safe_dump(conf))
    path.chmod(0o600)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start or stop karpy's real test cluster (kwokctl, upstream builds).")
    parser.add_argument("action", choices=["up", "down", "build"])
    parser.add_argument("--name", default="karpy")
    parser.add_argument("--workdir", default=str(cache_dir() / "clusters"))
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    if args.action == "build":
        print(build())
        return 0
    if args.action == "up":
        if shutil.which("bash") is None:
            raise RealClusterError("bash is needed to build the binaries")
        if missing_binaries():
            build()
        cluster = start(args.name, workdir)
        print(cluster.kubeconfig)
        return 0
    RealCluster(args.name, workdir, workdir / f"{args.name}.kubeconfig", bin_dir()).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
