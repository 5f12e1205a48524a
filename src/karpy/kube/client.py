"""The HTTP client under the adapter: rate limits, retries, JSON and karpy errors.

:class:`KubeClient` sends requests to one API server chosen by :mod:`karpy.kube.config`, over the
transport and credentials of :mod:`karpy.kube.transport` (TLS, ``tls-server-name``, proxies, TCP
keepalive, tokens, token files, client certificates, exec plugins). What a caller may rely on:

* Requests are limited client-side by a token bucket (``qps`` tokens a second, at most ``burst``
  stored), as client-go's ``--kube-api-qps`` / ``--kube-api-burst`` (Karpenter's
  ``KUBE_CLIENT_QPS`` / ``KUBE_CLIENT_BURST``). Watches take one token when they start.
* 429 and 5xx answers and connection failures are retried with exponential back-off (honouring a
  ``Retry-After`` header) up to ``max_retries`` times, unless the call says ``retry=False``
  (evictions: a 429 there means a PodDisruptionBudget said no, the caller decides).
* A request inside a :func:`karpy.kube.deadline.within` block ends by its deadline, retries
  included (:class:`karpy.kube.errors.Timeout` once it passed).
* Watches (:meth:`KubeClient.stream`) have a read timeout: a stream that sends nothing - not even
  a bookmark - for ``read_timeout`` seconds ends with :class:`karpy.kube.errors.Timeout`, so a
  peer lost without a FIN is noticed (the connections also have TCP keepalive).
* Bodies are JSON, decoded with orjson into plain dicts and lists.
* Every failure is a :mod:`karpy.kube.errors` class with ``retryable`` set
  (:func:`error_from_response`, :func:`error_from_transport`); no ``httpx2`` or lightkube exception
  escapes. Error ``Status`` bodies are read whatever their ``Content-Type`` says (API servers and
  proxies add ``; charset=utf-8``), and payloads are truncated in messages.

Thread-safe: informer threads and the controller thread share one client.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx2
import orjson

from karpy import clock as clock_mod
from karpy.kube import config as config_mod
from karpy.kube import deadline, errors
from karpy.kube import transport as transport_mod

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
MAX_MESSAGE = 400
"""Characters of a response payload kept in an error message."""


def truncate(text: str | bytes, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


_BY_STATUS: dict[int, type[errors.KubeError]] = {
    400: errors.BadRequest,
    401: errors.Forbidden,
    403: errors.Forbidden,
    404: errors.NotFound,
    405: errors.BadRequest,
    406: errors.BadRequest,
    410: errors.Gone,
    413: errors.BadRequest,
    415: errors.BadRequest,
    422: errors.Invalid,
    429: errors.TooManyRequests,
}


def error_from_response(
    status: int, body: bytes, headers: Mapping[str, str], what: str, *, kind: str = "", name: str = "",
    namespace: str = "",
) -> errors.KubeError:
    """The karpy error for an HTTP error answer; ``what`` names the request (``"PATCH Node n1"``)."""
    reason, message = "", ""
    retry_after = _retry_after(headers)
    try:
        payload = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        payload = None
    if isinstance(payload, dict) and payload.get("kind") == "Status":
        reason = str(payload.get("reason") or "")
        message = str(payload.get("message") or "")
        details = payload.get("details")
        if retry_after is None and isinstance(details, dict) and details.get("retryAfterSeconds"):
            retry_after = float(details["retryAfterSeconds"])
    else:
        message = truncate(body)
    text = f"{what}: {status} {reason or 'error'}: {truncate(message)}"
    where = {"kind": kind, "name": name, "namespace": namespace}
    if status == 409:
        cls: type[errors.KubeError] = errors.AlreadyExists if reason == "AlreadyExists" else errors.Conflict
        return cls(text, **where)
    if status == 429:
        return errors.TooManyRequests(text, retry_after_seconds=retry_after or 1.0, **where)
    if status in (502, 503, 504):
        return errors.Unavailable(text, **where)
    cls = _BY_STATUS.get(status, errors.InternalError if status >= 500 else errors.BadRequest)
    return cls(text, **where)


def error_from_transport(exc: BaseException, what: str) -> errors.KubeError:
    """A connection failure (retryable :class:`karpy.kube.errors.Unavailable`) or a timeout
    (retryable :class:`karpy.kube.errors.Timeout`: it may or may not have been applied)."""
    cls = errors.Timeout if isinstance(exc, httpx2.TimeoutException) else errors.Unavailable
    return cls(f"{what}: {type(exc).__name__}: {truncate(str(exc))}")


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` stored; :meth:`take` blocks until one is free."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        now: Callable[[], float] = clock_mod.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._now = now
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = now()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Take one token; returns the seconds waited."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._now()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            wait = 0.0 if self._tokens >= 0 else -self._tokens / self.qps
        if wait > 0:
            self._sleep(wait)
        return wait


class KubeClient:
    """JSON over HTTP to one API server (module docstring)."""

    def __init__(
        self,
        connection: config_mod.Connection,
        *,
        qps: float = 200.0,
        burst: int = 300,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff_base: float = 0.2,
        backoff_cap: float = 10.0,
        user_agent: str = "karpy",
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        """``transport``: an ``httpx2`` transport to send through instead of the network (tests
        pass ``httpx2.MockTransport(handler)``)."""
        self.connection = connection
        self.limiter = TokenBucket(qps, burst, sleep=sleep)
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._sleep = sleep
        auth = transport_mod.build_auth(connection)
        if transport is None:
            transport = transport_mod.build_transport(connection)
        try:
            self._http = httpx2.Client(
                base_url=connection.server, auth=auth, transport=transport, timeout=httpx2.Timeout(timeout),
                trust_env=False,
            )
        except Exception as exc:  # a server URL httpx2 cannot use
            raise errors.ConfigError(f"cannot set up a client for {connection.server}: {exc}") from exc
        self._http.headers["User-Agent"] = user_agent
        self.requests = 0
        """Requests sent so far, retries included (for tests and metrics)."""

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry: bool = True,
        what: str = "",
        kind: str = "",
        name: str = "",
        namespace: str = "",
    ) -> Any:
        """Send one request; the decoded JSON answer (``None`` for an empty body)."""
        data = self.request_bytes(
            method, path, params=params, body=body, content_type=content_type, retry=retry, what=what,
            kind=kind, name=name, namespace=namespace,
        )
        return orjson.loads(data) if data else None

    def request_bytes(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry: bool = True,
        what: str = "",
        kind: str = "",
        name: str = "",
        namespace: str = "",
    ) -> bytes:
        """As :meth:`request`, but the answer's raw body (for a caller with its own decoder)."""
        what = what or f"{method} {path}"
        content = None if body is None else orjson.dumps(body)
        headers = {"Accept": JSON}
        if content is not None:
            headers["Content-Type"] = content_type
        attempt = 0
        while True:
            left = deadline.remaining()
            if left is not None and left <= 0:
                raise errors.Timeout(f"{what}: deadline passed before the request was sent", kind=kind, name=name,
                                     namespace=namespace)
            self.limiter.take()
            self.requests += 1
            err: errors.KubeError
            timeout = httpx2.Timeout(self.timeout if left is None else max(0.01, min(self.timeout, left)))
            try:
                resp = self._http.request(
                    method, path, params=dict(params or {}), content=content, headers=headers, timeout=timeout
                )
            except (httpx2.HTTPError, errors.ConfigError) as exc:  # ConfigError: an exec plugin failed
                if isinstance(exc, errors.ConfigError):
                    raise
                err = error_from_transport(exc, what)
                delay = None
            else:
                if resp.status_code < 400:
                    return bytes(resp.content)
                err = error_from_response(
                    resp.status_code, resp.content, resp.headers, what, kind=kind, name=name, namespace=namespace
                )
                delay = _retry_after(resp.headers)
            if not retry or not self._should_retry(err) or attempt >= self.max_retries:
                raise err
            pause = delay if delay is not None else self._backoff(attempt)
            left = deadline.remaining()
            if left is not None and pause >= left:
                raise err
            self._sleep(pause)
            attempt += 1

    @staticmethod
    def _should_retry(err: errors.KubeError) -> bool:
        return isinstance(err, (errors.TooManyRequests, errors.Unavailable, errors.InternalError, errors.Timeout))

    def _backoff(self, attempt: int) -> float:
        return float(min(self.backoff_cap, self.backoff_base * (2**attempt)))

    @contextmanager
    def stream(
        self, path: str, params: Mapping[str, str], *, what: str = "", read_timeout: float | None = None
    ) -> Iterator[Stream]:
        """A watch stream (its JSON lines, and ``close()`` from another thread); errors as :meth:`request`'s.

        ``read_timeout``: seconds without a byte after which the stream ends with
        :class:`karpy.kube.errors.Timeout` (``None``: wait for ever)."""
        what = what or f"WATCH {path}"
        self.limiter.take()
        self.requests += 1
        timeout = httpx2.Timeout(self.timeout, read=read_timeout)
        try:
            with self._http.stream("GET", path, params=dict(params), timeout=timeout) as resp:
                if resp.status_code >= 400:
                    raise error_from_response(resp.status_code, resp.read(), resp.headers, what)
                yield Stream(resp, what)
        except httpx2.HTTPError as exc:
            raise error_from_transport(exc, what) from exc

    def server_version(self) -> dict[str, Any]:
        """``GET /version`` as the server answers it (``major``, ``minor``, ``gitVersion``...)."""
        data = self.request("GET", "/version", what="GET /version")
        if not isinstance(data, dict):
            raise errors.InternalError(f"GET /version: expected an object, found {truncate(repr(data))}")
        return data


    def kubernetes_version(self) -> str:
        """The server's Kubernetes ``major.minor`` (``"1.29"``; EKS's ``"29+"`` loses the ``+``)."""
        data = self.server_version()
        major = str(data.get("major") or "").rstrip("+")
        minor = str(data.get("minor") or "").rstrip("+")
        if major.isdigit() and minor.isdigit():
            return f"{major}.{minor}"
        git = str(data.get("gitVersion") or "").lstrip("v")
        parts = git.split(".")
        if len(parts) >= 2 and parts[0].isdigit():
            return f"{parts[0]}.{''.join(c for c in parts[1] if c.isdigit())}"
        raise errors.InternalError(f"GET /version: no Kubernetes version in {truncate(repr(data))}")


class Stream:
    """One open watch response: iterate :meth:`lines`; :meth:`close` ends it from any thread."""

    def __init__(self, resp: httpx2.Response, what: str) -> None:
        self._resp = resp
        self._what = what
        self.closed = False
        stream = resp.extensions.get("network_stream")
        self._sock: socket.socket | None = None
        with contextlib.suppress(Exception):
            self._sock = stream.get_extra_info("socket") if stream is not None else None

    def close(self) -> None:
        """End the watch now, from any thread: a thread blocked reading it (up to the read timeout) is woken
        by shutting the socket down; closing the response alone does not interrupt a blocking read."""
        self.closed = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):  # another thread may be reading it; it ends anyway
            self._resp.close()

    def lines(self) -> Iterator[bytes]:
        buf = bytearray()
        try:
            for chunk in self._resp.iter_bytes():
                buf += chunk
                while True:
                    end = buf.find(b"\n")
                    if end < 0:
                        break
                    line = bytes(buf[:end])
                    del buf[: end + 1]
                    if line.strip():
                        yield line
        except (httpx2.HTTPError, RuntimeError, OSError) as exc:
            if self.closed:
                return
            raise error_from_transport(exc, self._what) from exc
        if buf.strip():
            yield bytes(buf)
