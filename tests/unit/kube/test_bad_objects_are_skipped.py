"""One object the informer cannot read is reported and skipped; the rest of its page is kept (issue 22.1)."""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import Any, cast

import httpx2
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.kube import client, fastdecode, informer, paths
from support import kubeconn

from .test_fastdecode import realistic_pod

EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "150"))
"""More with KARPY_FUZZ_EXAMPLES=4000."""

BAD_PODS: list[tuple[str, Any]] = [
    ("spec", None),
    ("spec.containers", 5),
    ("spec.volumes", "x"),
    ("status", "Pending"),
    ("metadata", "x"),
    ("metadata.name", 7),
    ("metadata.labels", {"app": 1}),
    ("metadata.annotations", {"big": 2**70}),
    ("spec.containers.0", "app"),
]


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node: Any = obj
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def bad_pod(i: int, path: str, value: Any) -> dict[str, Any]:
    pod = realistic_pod(i)
    pod["metadata"]["name"] = f"bad-{i}"
    _set(pod, path, value)
    return pod


def page(pods: list[Any]) -> bytes:
    """JSON as a server could send it (stdlib: integers over 64 bits too)."""
    return json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "500"}, "items": pods}).encode()


def new_informer(*, project_pods: bool = True, kind: str = "Pod") -> informer.Informer:
    return informer.Informer(cast(Any, None), paths.resource_for(kind), lambda *_: None, project_pods=project_pods)


@pytest.mark.parametrize(("path", "value"), BAD_PODS, ids=[p for p, _ in BAD_PODS])
@pytest.mark.parametrize("project_pods", [True, False], ids=["typed", "dicts"])
def test_a_pod_of_the_wrong_shape_is_skipped_and_the_rest_of_the_page_kept(
    path: str, value: Any, project_pods: bool, caplog: pytest.LogCaptureFixture
) -> None:
    inf = new_informer(project_pods=project_pods)
    body = page([realistic_pod(1), bad_pod(2, path, value), realistic_pod(3)])
    with caplog.at_level(logging.WARNING, "karpy.kube.informer"):
        meta, items = inf.read_page(body)
    assert meta["resourceVersion"] == "500"
    assert [p["metadata"]["name"] for p in items] == ["web-1", "web-3"]
    assert inf.decode_errors == 1
    (record,) = [r for r in caplog.records if "skipped" in r.getMessage()]
    if not path.startswith("metadata"):  # a readable name is named
        assert "default/bad-2" in record.getMessage()
    first = path.split(".", maxsplit=1)[0] if path != "spec.containers.0" else "spec.containers"
    assert first in record.getMessage()


def test_the_typed_decoder_names_the_field_of_each_rejected_item() -> None:
    _meta, items, rejected = fastdecode.decode_pod_page(
        page([realistic_pod(1), bad_pod(2, "spec.containers", 5), bad_pod(3, "spec.volumes", "x")])
    )
    assert [p["metadata"]["name"] for p in items] == ["web-1"]
    assert [(r.namespace, r.name) for r in rejected] == [("default", "bad-2"), ("default", "bad-3")]
    assert "$.spec.containers" in rejected[0].reason and "$.spec.volumes" in rejected[1].reason


def test_a_watch_event_with_an_unreadable_pod_is_skipped_and_the_watch_goes_on() -> None:
    seen: list[tuple[str, str]] = []
    inf = informer.Informer(cast(Any, None), paths.resource_for("Pod"),
                            lambda _k, t, o: seen.append((t, o["metadata"]["name"])))
    before = informer.DECODE_ERRORS["Pod"]
    bad = bad_pod(2, "spec.containers", 5)
    bad["metadata"]["resourceVersion"] = "600"
    rv = inf._event(orjson.dumps({"type": "ADDED", "object": bad}), "500")
    assert rv == "600"  # the watch resumes after it
    rv = inf._event(orjson.dumps({"type": "ADDED", "object": realistic_pod(4)}), rv)
    assert seen == [("ADDED", "web-4")]
    assert informer.DECODE_ERRORS["Pod"] == before + 1


def test_an_informer_syncs_while_the_server_holds_a_pod_it_cannot_decode() -> None:
    """Before the fix the LIST failed for ever and the cache never synced."""
    body = page([realistic_pod(1), bad_pod(2, "spec", None)])

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get("watch") == "true":
            return httpx2.Response(200, content=b"")
        return httpx2.Response(200, content=body, headers={"Content-Type": "application/json"})

    kc = client.KubeClient(kubeconn.connection(), qps=0, transport=httpx2.MockTransport(handler))
    inf = informer.Informer(kc, paths.resource_for("Pod"), lambda *_: None, backoff_base=0.01, backoff_cap=0.05)
    inf.start()
    try:
        assert inf.wait_for_sync(5)
        assert [p["metadata"]["name"] for p in inf.items()] == ["web-1"]
    finally:
        inf.stop()
        kc.close()


# ----------------------------------------------------------------------------------- fuzz

HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63, max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.lists(st.text(max_size=3), max_size=2),
    st.just([None]), st.just({"": None}),
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


POD_PATHS = _paths(realistic_pod(0))


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(POD_PATHS), HOSTILE), min_size=1, max_size=3), st.booleans())
def test_wrong_types_in_any_field_of_a_pod_never_raise_out_of_the_page_path(
    mutations: list[tuple[tuple[Any, ...], Any]], project_pods: bool
) -> None:
    hostile = realistic_pod(2)
    for path, value in mutations:
        with_parent = copy.deepcopy(hostile)
        try:
            _replace(with_parent, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the parent
        hostile = with_parent
    inf = new_informer(project_pods=project_pods)
    _meta, items = inf.read_page(page([realistic_pod(1), hostile, realistic_pod(3)]))
    names = [p["metadata"]["name"] for p in items]
    assert names[0] == "web-1" and names[-1] == "web-3"
    assert len(items) + inf.decode_errors == 3
    line = json.dumps({"type": "MODIFIED", "object": hostile}).encode()
    inf._event(line, "1")  # never raises either
