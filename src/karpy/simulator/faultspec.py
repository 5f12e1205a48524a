"""``spec.faults`` of a Scenario: which faults a run injects, each with its rate or its moments.

::

    spec:
      faults:
        api:            # the API server, per call (karpy.kube.faults)
          conflict: 0.01          # 409 before the write
          throttle: 0.01          # 429
          serverError: 0.01       # 500
          timeout: 0.005          # 504, not applied
          lostResponse: 0.005     # applied, then 504
          readError: 0.005        # 500 on get/list
          watchDrop: 0.001        # an event lost; the watch re-lists after relistAfter
          relistAfter: 5s
          watchDelay: 0.01        # an event arrives delayFor late
          delayFor: 3s
          watchReorder: true      # events of other objects overtake a delayed one
        cloud:          # the cloud API, per call (karpy.cloudprovider.fake.faults)
          throttle: 0.02
          serverError: 0.01
          lostLaunch: 0.05        # the instance runs; the response is lost
          iceAtLaunch: 0.1        # insufficient capacity discovered when launching
          iceFor: 3m
          lostInterruption: 0.1
          duplicateInterruption: 0.2
          reorderInterruptions: 0.5
        restarts: {at: [10m, 2h], every: 45m}   # karpy's controllers crash and restart
        nodes:
          neverRegister: 0.05     # launched instances whose Node never registers
          notReadyEvery: 1h       # a random karpy Node goes Ready=Unknown
        pods:           # the simulated kubelet (karpy.simulator.kubelet)
          startFailure: 0.05      # a bound pod fails to start (phase Failed, reason StartError)
          gracefulTermination: true  # deleted/evicted pods linger terminationGracePeriodSeconds
        plan:           # a fault of one kind at a named moment, whatever the rates draw
        - {at: 20m, fault: iceAtLaunch}

A ``plan`` entry makes its fault certain: from ``at``, that kind's rate is 1 until it has fired
(the next call it can hit gets it: the next launch for ``iceAtLaunch``, the next write for
``conflict``; every such call in that same step of karpy's controllers gets it too, a burst), then
the rate is the scenario's again. ``fault`` is one of :data:`PLANNABLE` (the
names the run counts them under in ``faultsInjected``).

:func:`read` validates all of it (rates between 0 and 1, durations) and raises
:class:`karpy.api.errors.ValidationError` naming the path; unknown fields are errors with a
suggestion, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import duration, errors, fields, strict
from karpy.cloudprovider.fake import faults as cloud_faults
from karpy.kube import faults as kube_faults

_API = {"conflict": "conflict", "throttle": "throttle", "serverError": "server_error", "timeout": "timeout",
        "lostResponse": "lost_response", "readError": "read_error", "watchDrop": "watch_drop"}
_CLOUD = {"throttle": "throttle", "serverError": "server_error", "lostLaunch": "lost_launch",
          "iceAtLaunch": "ice_at_launch", "lostInterruption": "lost_interruption",
          "duplicateInterruption": "duplicate_interruption", "reorderInterruptions": "reorder_interruptions"}
PLANNABLE: dict[str, tuple[str, str]] = {
    "conflict": ("api", "conflict"), "throttle": ("api", "throttle"), "serverError": ("api", "server_error"),
    "timeout": ("api", "timeout"), "lostResponse": ("api", "lost_response"), "readError": ("api", "read_error"),
    "watchDrop": ("api", "watch_drop"),
    "cloudThrottle": ("cloud", "throttle"), "cloudServerError": ("cloud", "server_error"),
    "lostLaunchResponse": ("cloud", "lost_launch"), "iceAtLaunch": ("cloud", "ice_at_launch"),
    "lostInterruption": ("cloud", "lost_interruption"), "duplicateInterruption": ("cloud", "duplicate_interruption"),
    "reorderedInterruptions": ("cloud", "reorder_interruptions"),
    "neverRegisters": ("nodes", "never_register"),
}
"""Fault name (as counted in ``faultsInjected``) -> (layer, the rate's attribute) for ``plan`` entries."""
MODELS: dict[str, dict[str, str]] = {
    "Faults": {"api": "FaultsAPI", "cloud": "FaultsCloud", "restarts": "FaultsRestarts", "nodes": "FaultsNodes",
               "pods": "FaultsPods", "plan": "list:FaultsPlan"},
    "FaultsAPI": {**{k: "float" for k in _API}, "relistAfter": "str", "watchDelay": "float", "delayFor": "str",
                  "watchReorder": "bool"},
    "FaultsCloud": {**{k: "float" for k in _CLOUD}, "iceFor": "str"},
    "FaultsRestarts": {"at": "list:str", "every": "str"},
    "FaultsNodes": {"neverRegister": "float", "notReadyEvery": "str"},
    "FaultsPods": {"startFailure": "float", "gracefulTermination": "bool"},
    "FaultsPlan": {"at": "str", "fault": "str"},
}


@dataclass(frozen=True, slots=True)
class Faults:
    api: kube_faults.KubeFaults = field(default_factory=kube_faults.KubeFaults)
    cloud: cloud_faults.CloudFaults = field(default_factory=cloud_faults.CloudFaults)
    restart_at: tuple[float, ...] = ()
    restart_every: float | None = None
    never_register: float = 0.0
    not_ready_every: float | None = None
    start_failure: float = 0.0
    graceful_termination: bool = False
    plan: tuple[tuple[float, str], ...] = ()
    """``(seconds after the start, fault name)``, in time order (see the module docstring)."""

    @property
    def any(self) -> bool:
        return self.api.any or self.cloud.any or bool(self.restart_at) or self.restart_every is not None \
            or self.never_register > 0 or self.not_ready_every is not None or self.start_failure > 0 \
            or self.graceful_termination or bool(self.plan)


def _rate(f: fields.Fields, key: str) -> float:
    raw = f.raw(key, 0.0)
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0.0 <= float(raw) <= 1.0:
        raise f.fail(key, "a rate between 0 and 1", raw)
    return float(raw)


def _duration(f: fields.Fields, key: str, default: float | None = None) -> float | None:
    raw = f.raw(key)
    if raw is None:
        return default
    try:
        value = duration.parse_duration(raw)
    except duration.DurationError:
        value = None
    if value is None or value <= 0:
        raise f.fail(key, "a positive duration such as 30s or 1h", raw)
    return value


def read(data: Any, obj: str, path: str = "spec.faults") -> Faults:
    """The faults of ``spec.faults`` (``None``: no faults)."""
    if data is None:
        return Faults()
    problems = strict.check_against(data, "Faults", obj, MODELS, path)
    if problems:
        raise errors.ValidationError(problems)
    f = fields.Fields(data, obj, path)
    api, cloud, restarts, nodes = f.sub("api"), f.sub("cloud"), f.sub("restarts"), f.sub("nodes")
    pods = f.sub("pods")
    kube = kube_faults.KubeFaults(**{attr: _rate(api, key) for key, attr in _API.items()},
                                  relist_after=_duration(api, "relistAfter", 5.0) or 5.0,
                                  watch_delay=_rate(api, "watchDelay"),
                                  delay_seconds=_duration(api, "delayFor", 3.0) or 3.0,
                                  watch_reorder=bool(api.bool("watchReorder", False)))
    cl = cloud_faults.CloudFaults(**{attr: _rate(cloud, key) for key, attr in _CLOUD.items()},
                                  ice_duration=_duration(cloud, "iceFor", 180.0) or 180.0)
    at: list[float] = []
    for i, raw in enumerate(restarts.list("at")):
        try:
            value = duration.parse_duration(raw)
        except duration.DurationError:
            value = None
        if value is None or value < 0:
            raise errors.ValidationError.single(obj, f"{restarts.at('at')}[{i}]", "a duration such as 10m", raw)
        at.append(value)
    return Faults(api=kube, cloud=cl, restart_at=tuple(sorted(at)), restart_every=_duration(restarts, "every"),
                  never_register=_rate(nodes, "neverRegister"), not_ready_every=_duration(nodes, "notReadyEvery"),
                  start_failure=_rate(pods, "startFailure"),
                  graceful_termination=bool(pods.bool("gracefulTermination", False)), plan=_plan(f))


def _plan(f: fields.Fields) -> tuple[tuple[float, str], ...]:
    out: list[tuple[float, str]] = []
    for entry in f.items("plan"):
        raw = entry.raw("at")
        try:
            at = duration.parse_duration(raw) if raw is not None else None
        except duration.DurationError:
            at = None
        if at is None or at < 0:
            raise entry.fail("at", "a duration such as 20m", raw)
        fault = entry.str("fault")
        if fault not in PLANNABLE:
            raise entry.fail("fault", "one of " + ", ".join(sorted(PLANNABLE)), fault)
        out.append((at, fault))
    return tuple(sorted(out))


def summary(faults: Faults) -> Mapping[str, Any]:
    """Plain data for outputs."""
    return {"restartAt": list(faults.restart_at), "restartEvery": faults.restart_every,
            "neverRegister": faults.never_register, "notReadyEvery": faults.not_ready_every,
            "startFailure": faults.start_failure, "gracefulTermination": faults.graceful_termination}
