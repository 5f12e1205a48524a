"""Start and stop `karpy controller` processes for end-to-end tests (loopback only)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


class Controller:
    """One `karpy controller` process with its own ports; stderr (the JSON log) goes to a file."""

    def __init__(self, args: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.log_path = log_path
        full_env = {**os.environ, **(env or {})}
        self.log_file = log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "karpy.cli", "controller", "--bind-address", "127.0.0.1",
             "--metrics-port", str(self.metrics_port), "--health-probe-port", str(self.health_port), *args],
            stdout=subprocess.DEVNULL, stderr=self.log_file, env=full_env)

    def url(self, path: str) -> str:
        port = self.metrics_port if path == "/metrics" else self.health_port
        return f"http://127.0.0.1:{port}{path}"

    def get(self, path: str) -> tuple[int, str]:
        return get(self.url(path))

    def wait_for(self, path: str, code: int = 200, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"controller exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            status, body = self.get(path)
            if status == code:
                return body
            time.sleep(0.1)
        raise AssertionError(f"{path} did not answer {code} within {timeout}s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        if not self.log_file.closed:
            self.log_file.flush()
        return self.log_path.read_text()

    def terminate(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGUSR1)  # the stacks of every thread go to the log
            time.sleep(1)
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"no exit within {timeout}s of SIGTERM:\n{self.log()[-6000:]}") from None
        finally:
            self.log_file.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log_file.close()
