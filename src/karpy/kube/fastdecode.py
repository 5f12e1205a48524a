"""Pods decoded straight into their cached projection, for large clusters.

A list page of Pods as an API server returns it is mostly what karpy never reads (managedFields,
container probes, env, mounts, container statuses). :func:`decode_pod_list` and
:func:`decode_pod_event` decode such JSON with msgspec into typed partial schemas, so the dropped
fields are skipped by the parser instead of being built and thrown away, then turn the result into
plain dicts (``msgspec.to_builtins``). The outcome is the projection of
:func:`karpy.kube.compact.project_pod` (the tests check both agree on a realistic pod) except for
one thing a caller may rely on knowing: a Pod field this module does not list (a field newer than
Kubernetes 1.32, say) is dropped too, where the dict path would have kept it. Fields set to
``null`` stay ``None``; absent fields stay absent.

One item that does not fit the schema (``spec: null``, ``containers: 5``, ``volumes: "x"``...)
never fails its page: :func:`decode_pod_page` decodes the page strictly first (the fast path) and,
only when that fails, item by item, returning the items that fit and a :class:`Rejected` for each
one that does not (its namespace / name when readable and the field msgspec names). A watch line
whose object does not fit raises :class:`RejectedObject` (a :class:`DecodeError` that says which
object, so the watch can skip it and go on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import orjson
from msgspec import UNSET, Raw, Struct, field


class _Base(Struct, omit_defaults=True):
    pass


class Meta(_Base):
    name: Any = UNSET
    generateName: Any = UNSET
    namespace: Any = UNSET
    selfLink: Any = UNSET
    uid: Any = UNSET
    resourceVersion: Any = UNSET
    generation: Any = UNSET
    creationTimestamp: Any = UNSET
    deletionTimestamp: Any = UNSET
    deletionGracePeriodSeconds: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    ownerReferences: Any = UNSET
    finalizers: Any = UNSET


class Container(_Base):
    name: Any = UNSET
    image: Any = UNSET
    resources: Any = UNSET
    ports: Any = UNSET
    restartPolicy: Any = UNSET


class Volume(_Base):
    name: Any = UNSET
    persistentVolumeClaim: Any = UNSET
    ephemeral: Any = UNSET
    emptyDir: Any = UNSET


class Spec(_Base):
    activeDeadlineSeconds: Any = UNSET
    affinity: Any = UNSET
    automountServiceAccountToken: Any = UNSET
    containers: list[Container] | msgspec.UnsetType | None = UNSET
    dnsConfig: Any = UNSET
    dnsPolicy: Any = UNSET
    enableServiceLinks: Any = UNSET
    hostAliases: Any = UNSET
    hostIPC: Any = UNSET
    hostNetwork: Any = UNSET
    hostPID: Any = UNSET
    hostUsers: Any = UNSET
    hostname: Any = UNSET
    imagePullSecrets: Any = UNSET
    initContainers: list[Container] | msgspec.UnsetType | None = UNSET
    nodeName: Any = UNSET
    nodeSelector: Any = UNSET
    os: Any = UNSET
    overhead: Any = UNSET
    preemptionPolicy: Any = UNSET
    priority: Any = UNSET
    priorityClassName: Any = UNSET
    readinessGates: Any = UNSET
    resourceClaims: Any = UNSET
    resources: Any = UNSET
    restartPolicy: Any = UNSET
    runtimeClassName: Any = UNSET
    schedulerName: Any = UNSET
    schedulingGates: Any = UNSET
    securityContext: Any = UNSET
    serviceAccount: Any = UNSET
    serviceAccountName: Any = UNSET
    setHostnameAsFQDN: Any = UNSET
    shareProcessNamespace: Any = UNSET
    subdomain: Any = UNSET
    terminationGracePeriodSeconds: Any = UNSET
    tolerations: Any = UNSET
    topologySpreadConstraints: Any = UNSET
    volumes: list[Volume] | msgspec.UnsetType | None = UNSET


class Status(_Base):
    phase: Any = UNSET
    conditions: Any = UNSET
    message: Any = UNSET
    reason: Any = UNSET
    nominatedNodeName: Any = UNSET
    hostIP: Any = UNSET
    startTime: Any = UNSET
    qosClass: Any = UNSET
    observedGeneration: Any = UNSET


class Pod(_Base):
    apiVersion: Any = UNSET
    kind: Any = UNSET
    metadata: Meta | msgspec.UnsetType = UNSET
    spec: Spec | msgspec.UnsetType = UNSET
    status: Status | msgspec.UnsetType = UNSET


class ListMeta(_Base):
    resourceVersion: Any = UNSET
    continue_: Any = field(name="continue", default=UNSET)


class PodList(_Base):
    metadata: ListMeta | msgspec.UnsetType = UNSET
    items: list[Pod] | None = None


class RawPodList(_Base):
    metadata: ListMeta | msgspec.UnsetType = UNSET
    items: list[Raw] | None = None


class Event(Struct):
    type: str
    object: Raw


_list_decoder = msgspec.json.Decoder(PodList)
_raw_list_decoder = msgspec.json.Decoder(RawPodList)
_pod_decoder = msgspec.json.Decoder(Pod)
_event_decoder = msgspec.json.Decoder(Event)
_KEPT_VOLUME = ("persistentVolumeClaim", "ephemeral", "emptyDir")


def _finish(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod.get("spec")
    if isinstance(spec, dict):
        volumes = spec.get("volumes")
        if isinstance(volumes, list):
            spec["volumes"] = [v for v in volumes if any(k in v for k in _KEPT_VOLUME)]
    return pod


class DecodeError(ValueError):
    """The body is not JSON of the expected shape."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """One object that does not fit the Pod schema: who it is (when readable) and why."""

    namespace: str
    name: str
    resource_version: str
    reason: str
    """msgspec's message, naming the field: ``Expected `array`, got `int` - at `$.spec.containers```."""


class RejectedObject(DecodeError):
    """A watch event whose object does not fit the Pod schema (:attr:`rejected` says which)."""

    def __init__(self, event_type: str, rejected: Rejected) -> None:
        super().__init__(rejected.reason)
        self.event_type = event_type
        self.rejected = rejected


def identify(raw: bytes, reason: str) -> Rejected:
    """A :class:`Rejected` for ``raw`` with its namespace / name / resourceVersion where they are strings."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}

    def text(key: str) -> str:
        value = meta.get(key)
        return value if isinstance(value, str) else ""

    return Rejected(text("namespace"), text("name"), text("resourceVersion"), reason)


def decode_pod_list(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(list metadata, projected pods)`` of a PodList body; :class:`DecodeError` if any item does not fit."""
    meta, items, rejected = decode_pod_page(body)
    if rejected:
        raise DecodeError(rejected[0].reason)
    return meta, items


def decode_pod_page(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]], list[Rejected]]:
    """``(list metadata, projected pods, rejected items)`` of a PodList body (module docstring).

    :class:`DecodeError` only when the page itself is not a list object."""
    try:
        decoded = _list_decoder.decode(body)
    except msgspec.ValidationError:
        return _decode_item_by_item(body)
    except msgspec.DecodeError as exc:
        raise DecodeError(str(exc)) from exc
    meta = msgspec.to_builtins(decoded.metadata) if decoded.metadata is not UNSET else {}
    items = msgspec.to_builtins(decoded.items or [])
    return meta, [_finish(p) for p in items], []


def _decode_item_by_item(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]], list[Rejected]]:
    try:
        decoded = _raw_list_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DecodeError(str(exc)) from exc
    meta = msgspec.to_builtins(decoded.metadata) if decoded.metadata is not UNSET else {}
    items: list[dict[str, Any]] = []
    rejected: list[Rejected] = []
    for raw in decoded.items or ():
        try:
            items.append(_finish(msgspec.to_builtins(_pod_decoder.decode(raw))))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            rejected.append(identify(bytes(raw), str(exc)))
    return meta, items, rejected


def decode_pod_event(line: bytes) -> tuple[str, dict[str, Any]]:
    """``(event type, object)`` of one watch line; ``ERROR`` objects (a Status) are decoded whole.

    :class:`RejectedObject` when the line is a well-formed event whose object does not fit."""
    try:
        event = _event_decoder.decode(line)
        if event.type == "ERROR":
            return event.type, orjson.loads(bytes(event.object))
    except (msgspec.DecodeError, msgspec.ValidationError, orjson.JSONDecodeError) as exc:
        raise DecodeError(str(exc)) from exc
    try:
        return event.type, _finish(msgspec.to_builtins(_pod_decoder.decode(event.object)))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RejectedObject(event.type, identify(bytes(event.object), str(exc))) from exc
