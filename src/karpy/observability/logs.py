"""karpy's log stream: structured JSON with Karpenter's keys, or a console form; levels per component.

Controllers log with the standard :mod:`logging` module and put structured fields in ``extra`` built
by :func:`fields`::

    log.info("launched nodeclaim", extra=logs.fields(
        "nodeclaim.lifecycle", NodeClaim=name, NodePool=pool, **{"provider-id": pid}))

:class:`JSONFormatter` writes one JSON object per line with Karpenter's keys, in this order:
``level`` (``DEBUG``/``INFO``/``WARN``/``ERROR``), ``time`` (RFC 3339 with milliseconds, from the
formatter's clock: wall time in a cluster, *virtual* time under ``karpy simulate --logs``),
``logger``, ``message``, ``controller`` when known, then the fields. Objects are rendered as
Karpenter's ``klog.KObj`` renders them in JSON: ``"NodeClaim": {"name": "default-x7k2p"}``,
``"Pod": {"name": "web-1", "namespace": "default"}`` (:func:`fields` does that for the keys in
:data:`OBJECT_KEYS`). :class:`ConsoleFormatter` writes ``time  LEVEL  logger  message  {fields}``.

:func:`configure` installs one handler on the ``karpy`` logger: a global level (``LOG_LEVEL``) and
per-component levels (``{"karpy.disruption": "debug"}``); it replaces a handler it installed before,
so calling it twice does not duplicate lines.

:data:`VIRTUAL_TIME` is the clock the simulator registers (one line in the engine) so that
``karpy simulate --logs`` stamps lines with simulated time.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

from karpy import clock as clock_mod

OBJECT_KEYS = ("NodePool", "NodeClaim", "Node", "Pod", "NodeClass", "EC2NodeClass", "AKSNodeClass")
"""Field names whose value is an object reference (``name`` or ``namespace/name``)."""

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "warning": logging.WARNING,
          "error": logging.ERROR}
LEVEL_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN", logging.ERROR: "ERROR",
               logging.CRITICAL: "ERROR"}
FORMATS = ("json", "console")

_EXTRA = "karpy_fields"
_HANDLER_MARK = "_karpy_handler"


def ref(value: str) -> dict[str, str]:
    """``"ns/name"`` -> ``{"name": name, "namespace": ns}``; ``"name"`` -> ``{"name": name}``."""
    namespace, sep, name = value.rpartition("/")
    return {"name": name, "namespace": namespace} if sep else {"name": value}


def fields(controller: str = "", **values: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the controller and structured fields (``None`` values are dropped)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        out[key] = ref(value) if key in OBJECT_KEYS and isinstance(value, str) else value
    return {_EXTRA: out, "controller": controller} if controller else {_EXTRA: out}


class VirtualTime:
    """The clock of the running simulation (see the module docstring)."""

    def __init__(self) -> None:
        self.clock: clock_mod.Clock | None = None

    def use(self, clock: clock_mod.Clock) -> None:
        self.clock = clock

    def now(self) -> float:
        return self.clock.now() if self.clock is not None else clock_mod.WallClock().now()


VIRTUAL_TIME = VirtualTime()


def timestamp(ts: float) -> str:
    """RFC 3339 with milliseconds: ``2026-01-01T00:00:05.250Z``."""
    whole = int(ts)
    return clock_mod.rfc3339(whole)[:-1] + f".{min(999, int((ts - whole) * 1000)):03d}Z"


def _record_fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = dict(getattr(record, _EXTRA, None) or {})
    if record.exc_info and record.exc_info[1] is not None:
        out["error"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
    return out


def _level(record: logging.LogRecord) -> str:
    return LEVEL_NAMES.get(record.levelno, record.levelname)


class JSONFormatter(logging.Formatter):
    """One JSON object per line with Karpenter's keys; see the module docstring."""

    def __init__(self, now: Callable[[], float] | None = None) -> None:
        super().__init__()
        self.now = now if now is not None else clock_mod.WallClock().now

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"level": _level(record), "time": timestamp(self.now()), "logger": record.name,
                                "message": record.getMessage()}
        controller = getattr(record, "controller", "")
        if controller:
            line["controller"] = controller
        for key, value in _record_fields(record).items():
            line.setdefault(key, value)
        return json.dumps(line, default=str, separators=(",", ":"))


class ConsoleFormatter(logging.Formatter):
    """``time  LEVEL  logger  message  {"field": ...}`` for people reading a terminal."""

    def __init__(self, now: Callable[[], float] | None = None) -> None:
        super().__init__()
        self.now = now if now is not None else clock_mod.WallClock().now

    def format(self, record: logging.LogRecord) -> str:
        extra = _record_fields(record)
        controller = getattr(record, "controller", "")
        if controller:
            extra = {"controller": controller, **extra}
        tail = "\t" + json.dumps(extra, default=str, separators=(",", ":")) if extra else ""
        return f"{timestamp(self.now())}\t{_level(record)}\t{record.name}\t{record.getMessage()}{tail}"


def parse_level(name: str, setting: str = "LOG_LEVEL") -> int:
    level = LEVELS.get(name.strip().lower())
    if level is None:
        from karpy.api import errors

        raise errors.ValidationError.single("Settings", setting, "one of debug, info, warn, error", name)
    return level


def configure(level: str = "info", *, fmt: str = "json", components: Mapping[str, str] | None = None,
              stream: IO[str] | None = None, now: Callable[[], float] | None = None) -> logging.Handler:
    """Send the ``karpy`` loggers to ``stream`` (stderr) in ``fmt`` at ``level``; see the module docstring."""
    if fmt not in FORMATS:
        from karpy.api import errors

        raise errors.ValidationError.single("--log-format", "(option)", "json or console", fmt)
    root = logging.getLogger("karpy")
    for h in list(root.handlers):
        if getattr(h, _HANDLER_MARK, False):
            root.removeHandler(h)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JSONFormatter(now) if fmt == "json" else ConsoleFormatter(now))
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(parse_level(level))
    for component, component_level in (components or {}).items():
        name = component if component.startswith("karpy") else f"karpy.{component}"
        logging.getLogger(name).setLevel(parse_level(component_level, f"log level of {component}"))
    return handler


def pretty_slice(items: list[str], limit: int = 5) -> str:
    """Karpenter's ``pretty.Slice``: ``"a, b, c and 7 other(s)"``."""
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} other(s)"


def go_duration(seconds: float) -> str:
    """A duration as Go prints one: ``1.5s``, ``12.345ms``, ``2m3s``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3f}".rstrip("0").rstrip(".") + "µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3f}".rstrip("0").rstrip(".") + "ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text
