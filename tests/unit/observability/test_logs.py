"""karpy's log stream: Karpenter's JSON keys, object references, console form, levels per component."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from karpy import clock
from karpy.api import errors
from karpy.observability import logs


@pytest.fixture
def restore_karpy_logger() -> Iterator[None]:
    root = logging.getLogger("karpy")
    handlers, level = list(root.handlers), root.level
    component = logging.getLogger("karpy.disruption")
    component_level = component.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    component.setLevel(component_level)


def test_a_json_line_has_karpenters_keys_in_order_and_objects_as_references(restore_karpy_logger: None) -> None:
    out = io.StringIO()
    vclock = clock.VirtualClock()
    vclock.advance(5.25)
    logs.configure("info", stream=out, now=vclock.now)
    logging.getLogger("karpy.controllers.lifecycle").info("launched nodeclaim", extra=logs.fields(
        "nodeclaim.lifecycle", NodeClaim="default-x7k2p", NodePool="default", Pod="default/web-1",
        **{"provider-id": "kwok://default-x7k2p", "zone": None}))
    line = json.loads(out.getvalue())
    assert list(line)[:5] == ["level", "time", "logger", "message", "controller"]
    assert line["level"] == "INFO"
    assert line["time"] == "2026-01-01T00:00:05.250Z"
    assert line["message"] == "launched nodeclaim"
    assert line["controller"] == "nodeclaim.lifecycle"
    assert line["NodeClaim"] == {"name": "default-x7k2p"}
    assert line["Pod"] == {"name": "web-1", "namespace": "default"}
    assert line["provider-id"] == "kwok://default-x7k2p"
    assert "zone" not in line


def test_levels_are_global_with_overrides_per_component(restore_karpy_logger: None) -> None:
    out = io.StringIO()
    logs.configure("warn", stream=out, components={"disruption": "debug"})
    logging.getLogger("karpy.controllers.provisioner").info("hidden")
    logging.getLogger("karpy.disruption.controller").debug("shown")
    logging.getLogger("karpy.controllers.provisioner").warning("also shown")
    messages = [json.loads(line)["message"] for line in out.getvalue().splitlines()]
    assert messages == ["shown", "also shown"]
    assert json.loads(out.getvalue().splitlines()[1])["level"] == "WARN"


def test_configuring_twice_does_not_duplicate_lines_and_console_format_is_readable(
        restore_karpy_logger: None) -> None:
    out = io.StringIO()
    logs.configure("info", stream=out)
    logs.configure("info", fmt="console", stream=out, now=lambda: clock.DEFAULT_EPOCH)
    logging.getLogger("karpy.controllers.termination").info("deleted node", extra=logs.fields("termination",
                                                                                             Node="n1"))
    (line,) = out.getvalue().splitlines()
    assert line.startswith("2026-01-01T00:00:00.000Z\tINFO\tkarpy.controllers.termination\tdeleted node\t")
    assert json.loads(line.split("\t")[-1]) == {"controller": "termination", "Node": {"name": "n1"}}


def test_a_bad_level_or_format_names_the_setting(restore_karpy_logger: None) -> None:
    with pytest.raises(errors.ValidationError, match="LOG_LEVEL"):
        logs.configure("loud")
    with pytest.raises(errors.ValidationError, match="log level of disruption"):
        logs.configure("info", components={"disruption": "loud"})
    with pytest.raises(errors.ValidationError, match="json or console"):
        logs.configure("info", fmt="xml")


def test_karpenters_pretty_slice_and_go_durations() -> None:
    assert logs.pretty_slice(["a", "b"]) == "a, b"
    assert logs.pretty_slice([str(i) for i in range(8)], 5) == "0, 1, 2, 3, 4 and 3 other(s)"
    assert logs.go_duration(0.0123) == "12.3ms"
    assert logs.go_duration(1.5) == "1.5s"
    assert logs.go_duration(125) == "2m5s"
