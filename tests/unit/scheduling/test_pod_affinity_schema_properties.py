"""Every field of the pod (anti-)affinity schema goes through the scheduler without an exception.

Issue 21 item 1: a ``namespaceSelector`` (even ``{}``) raised ``TypeError`` in the topology terms,
failing every provisioning batch. Pods are generated from the Kubernetes ``PodAffinity`` /
``PodAntiAffinity`` schema: required and preferred (weighted) terms, each with ``labelSelector``
(absent, empty, ``matchLabels``, ``matchExpressions`` with every operator), ``namespaces``,
``namespaceSelector`` (absent, ``null``, ``{}``, labels, expressions), ``topologyKey`` (hostname,
zone, a key no node has), ``matchLabelKeys`` and ``mismatchLabelKeys``. They are scheduled as
pending pods and as pods already running on existing nodes (whose anti-affinity binds others),
with a cluster of labelled Namespaces.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import errors as api_errors
from karpy.api import labels as wk
from karpy.api import pod
from karpy.provisioning import scheduler
from karpy.scheduling import namespaces as ns_mod

from ..provisioning import builders as b

KEYS = ["app", "team", "tier"]
VALUES = ["a", "b", "c"]
NAMESPACES = ns_mod.NamespaceIndex.of([("default", {"team": "a"}), ("team-b", {"team": "b"}),
                                       ("plain", {})])

expressions = st.lists(st.one_of(
    st.builds(lambda k, op, v: {"key": k, "operator": op, "values": v},
              st.sampled_from(KEYS), st.sampled_from(["In", "NotIn"]),
              st.lists(st.sampled_from(VALUES), min_size=1, max_size=2)),
    st.builds(lambda k, op: {"key": k, "operator": op},
              st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"]))), max_size=2)
selector = st.one_of(
    st.just({}),
    st.builds(lambda m: {"matchLabels": m}, st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES),
                                                            max_size=2)),
    st.builds(lambda e: {"matchExpressions": e}, expressions))


@st.composite
def terms(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": draw(st.sampled_from([wk.HOSTNAME, wk.ZONE, "example.com/rack"]))}
    if draw(st.booleans()):
        out["labelSelector"] = draw(selector)
    if draw(st.booleans()):
        out["namespaces"] = draw(st.lists(st.sampled_from(["default", "team-b", "plain", "absent"]), max_size=2))
    ns_choice = draw(st.sampled_from(["absent", "null", "selector"]))
    if ns_choice == "null":
        out["namespaceSelector"] = None
    elif ns_choice == "selector":
        out["namespaceSelector"] = draw(selector)
    if draw(st.booleans()):
        out["matchLabelKeys"] = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    if draw(st.booleans()):
        out["mismatchLabelKeys"] = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    return out


weighted = st.builds(lambda w, t: {"weight": w, "podAffinityTerm": t}, st.integers(1, 100), terms())
one_affinity = st.fixed_dictionaries({}, optional={
    "requiredDuringSchedulingIgnoredDuringExecution": st.lists(terms(), max_size=2),
    "preferredDuringSchedulingIgnoredDuringExecution": st.lists(weighted, max_size=2)})
affinity = st.fixed_dictionaries({}, optional={"podAffinity": one_affinity, "podAntiAffinity": one_affinity})
pod_shape = st.tuples(affinity, st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
                      st.sampled_from(["default", "team-b", "plain"]), st.integers(1, 3))


def _pods(prefix: str, shapes: list[tuple[dict[str, Any], dict[str, str], str, int]],
          node_name: str | None = None) -> list[pod.Pod]:
    out: list[pod.Pod] = []
    for i, (aff, labels, namespace, count) in enumerate(shapes):
        for j in range(count):
            extra: dict[str, Any] = {"affinity": aff} if aff else {}
            if node_name is not None:
                extra["node_name"] = node_name
            # a clear rejection of bad input is fine; an exception later is not
            with contextlib.suppress(api_errors.ValidationError):
                out.append(b.make_pod(f"{prefix}-{i}-{j}", labels=labels, namespace=namespace, **extra))
    return out


@settings(max_examples=60, deadline=None)
@given(pending=st.lists(pod_shape, min_size=1, max_size=4), running=st.lists(pod_shape, max_size=3),
       with_namespaces=st.booleans())
def test_pods_with_any_pod_affinity_fields_are_scheduled_or_explained_never_crash(
        pending: list[tuple[dict[str, Any], dict[str, str], str, int]],
        running: list[tuple[dict[str, Any], dict[str, str], str, int]], with_namespaces: bool) -> None:
    existing = [b.existing_node(f"node-{i}", zone=b.ZONES[i % 3], running=_pods(f"run{i}", [shape], f"node-{i}"))
                for i, shape in enumerate(running)]
    pods = _pods("pending", pending)
    index = NAMESPACES if with_namespaces else None
    res = scheduler.Scheduler([b.make_nodepool()], {"default": b.small_catalog()}, existing, (), None,
                              namespaces=index).solve(pods)
    placed = {p.key for c in res.new_claims for p in c.pods} | {p.key for ps in res.existing.values() for p in ps}
    for p in pods:
        assert (p.key in placed) != (p.key in res.errors), f"{p.key}: placed and failed, or neither"
