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
"""

from __future__ import annotations

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


class Event(Struct):
    type: str
    object: Raw


_list_decoder = msgspec.json.Decoder(PodList)
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


def decode_pod_list(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(list metadata, projected pods)`` of a PodList body."""
    try:
        decoded = _list_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DecodeError(str(exc)) from exc
    meta = msgspec.to_builtins(decoded.metadata) if decoded.metadata is not UNSET else {}
    items = msgspec.to_builtins(decoded.items or [])
    return meta, [_finish(p) for p in items]


def decode_pod_event(line: bytes) -> tuple[str, dict[str, Any]]:
    """``(event type, object)`` of one watch line; ``ERROR`` objects (a Status) are decoded whole."""
    try:
        event = _event_decoder.decode(line)
        if event.type == "ERROR":
            return event.type, orjson.loads(bytes(event.object))
        return event.type, _finish(msgspec.to_builtins(_pod_decoder.decode(event.object)))
    except (msgspec.DecodeError, msgspec.ValidationError, orjson.JSONDecodeError) as exc:
        raise DecodeError(str(exc)) from exc
