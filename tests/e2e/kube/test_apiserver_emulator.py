"""The emulator's own extensions of kmock, each checked over raw HTTP (no adapter involved)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import orjson
import pytest

from support import apiserver


@pytest.fixture
def http(api: apiserver.EmulatedApiServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=api.url, timeout=10) as client:
        yield client


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def test_created_objects_get_uid_resource_version_and_creation_timestamp(http: httpx2.Client) -> None:
    resp = http.post("/api/v1/nodes", json=node("n1"))
    assert resp.status_code == 201
    meta = resp.json()["metadata"]
    assert meta["uid"] and meta["resourceVersion"].isdigit() and meta["creationTimestamp"].endswith("Z")


def test_errors_are_status_objects_with_a_charset_in_the_content_type(http: httpx2.Client) -> None:
    resp = http.get("/api/v1/nodes/missing")
    assert resp.status_code == 404
    assert resp.headers["Content-Type"] == "application/json; charset=utf-8"
    body = resp.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "NotFound", 404)


def test_a_stale_put_is_409_and_a_put_of_the_status_changes_only_the_status(http: httpx2.Client) -> None:
    created = http.post("/api/v1/nodes", json=node("n1")).json()
    fresh = http.put("/api/v1/nodes/n1", json={**created, "spec": {"unschedulable": True}})
    assert fresh.status_code == 200 and fresh.json()["metadata"]["generation"] == 2
    stale = http.put("/api/v1/nodes/n1", json={**created, "spec": {}})
    assert stale.status_code == 409 and stale.json()["reason"] == "Conflict"
    status = http.put("/api/v1/nodes/n1/status", json={**fresh.json(), "status": {"phase": "Up"}, "spec": {}})
    assert status.json()["status"] == {"phase": "Up"} and status.json()["spec"] == {"unschedulable": True}


def test_a_strategic_merge_patch_of_a_custom_resource_is_415(http: httpx2.Client) -> None:
    http.post("/apis/karpenter.sh/v1/nodepools", json={"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                                        "metadata": {"name": "np"}, "spec": {}})
    patch = orjson.dumps({"spec": {"weight": 1}})
    strategic = {"Content-Type": "application/strategic-merge-patch+json"}
    assert http.patch("/apis/karpenter.sh/v1/nodepools/np", content=patch, headers=strategic).status_code == 415
    merge = {"Content-Type": "application/merge-patch+json"}
    assert http.patch("/apis/karpenter.sh/v1/nodepools/np", content=patch, headers=merge).json()["spec"] == {
        "weight": 1
    }
    http.post("/api/v1/nodes", json=node("n1"))
    labels = orjson.dumps({"metadata": {"labels": {"a": "b"}}})
    assert http.patch("/api/v1/nodes/n1", content=labels, headers=strategic).status_code == 200


def test_a_json_patch_is_applied_with_the_read_version_as_precondition(http: httpx2.Client) -> None:
    http.post("/api/v1/nodes", json=node("n1"))
    ops = orjson.dumps([{"op": "add", "path": "/metadata/labels", "value": {"x": "1"}}])
    resp = http.patch("/api/v1/nodes/n1", content=ops, headers={"Content-Type": "application/json-patch+json"})
    assert resp.status_code == 200 and resp.json()["metadata"]["labels"] == {"x": "1"}


def test_lists_are_paginated_and_carry_a_resource_version(http: httpx2.Client) -> None:
    for i in range(5):
        http.post("/api/v1/nodes", json=node(f"n{i}"))
    first = http.get("/api/v1/nodes", params={"limit": "2"}).json()
    assert [n["metadata"]["name"] for n in first["items"]] == ["n0", "n1"]
    assert first["metadata"]["resourceVersion"] == "5"
    rest = http.get("/api/v1/nodes", params={"limit": "10", "continue": first["metadata"]["continue"]}).json()
    assert [n["metadata"]["name"] for n in rest["items"]] == ["n2", "n3", "n4"]
    assert "continue" not in rest["metadata"]


def test_label_and_field_selectors_filter_lists(http: httpx2.Client) -> None:
    for name, node_name, app in (("a", "n1", "web"), ("b", "n2", "web"), ("c", "n1", "db")):
        pod = {"kind": "Pod", "metadata": {"name": name, "labels": {"app": app}}, "spec": {"nodeName": node_name}}
        http.post("/api/v1/namespaces/default/pods", json=pod)
    got = http.get("/api/v1/pods", params={"labelSelector": "app=web", "fieldSelector": "spec.nodeName=n1"})
    assert [p["metadata"]["name"] for p in got.json()["items"]] == ["a"]
    assert http.get("/api/v1/pods", params={"fieldSelector": "spec.bogus=1"}).status_code == 400


def test_eviction_is_429_while_a_pdb_forbids_it(http: httpx2.Client) -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web"}}, "status": {"phase": "Running"}}
    http.post("/api/v1/namespaces/default/pods", json=pod)
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets", json=pdb)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    refused = http.post("/api/v1/namespaces/default/pods/p/eviction", json=eviction)
    assert refused.status_code == 429 and refused.json()["reason"] == "TooManyRequests"
    http.delete("/apis/policy/v1/namespaces/default/poddisruptionbudgets/web")
    assert http.post("/api/v1/namespaces/default/pods/p/eviction", json=eviction).status_code == 201
    assert http.get("/api/v1/namespaces/default/pods/p").status_code == 404


def watch_lines(http: httpx2.Client, params: dict[str, str], count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with http.stream("GET", "/api/v1/nodes", params={"watch": "true", **params}) as resp:
        for line in resp.iter_lines():
            if line:
                out.append(orjson.loads(line))
            if len(out) >= count:
                break
    return out


def test_a_watch_resumes_after_a_resource_version_and_says_410_once_compacted(
    http: httpx2.Client, api: apiserver.EmulatedApiServer
) -> None:
    for i in range(3):
        http.post("/api/v1/nodes", json=node(f"n{i}"))
    events = watch_lines(http, {"resourceVersion": "1", "timeoutSeconds": "1"}, 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "n1"), ("ADDED", "n2")]
    api.compact()
    gone = watch_lines(http, {"resourceVersion": "2", "timeoutSeconds": "1"}, 1)
    assert gone[0]["type"] == "ERROR" and gone[0]["object"]["code"] == 410


def test_a_watch_sends_bookmarks_when_asked(http: httpx2.Client, api: apiserver.EmulatedApiServer) -> None:
    http.post("/api/v1/nodes", json=node("n1"))
    events = watch_lines(http, {"resourceVersion": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "3"}, 1)
    assert events[0]["type"] == "BOOKMARK"
    assert events[0]["object"]["metadata"]["resourceVersion"] == "1"


def test_a_selective_watch_sees_objects_enter_and_leave_its_selection(
    http: httpx2.Client, api: apiserver.EmulatedApiServer
) -> None:
    api.store.create({"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}})
    api.store.patch("Pod", "p", {"spec": {"nodeName": "n1"}}, "default")
    api.store.patch("Pod", "p", {"metadata": {"labels": {"a": "b"}}}, "default")
    api.store.patch("Pod", "p", {"spec": {"nodeName": "n2"}}, "default")
    params = {"watch": "true", "resourceVersion": "1", "fieldSelector": "spec.nodeName=n1", "timeoutSeconds": "1"}
    events: list[tuple[str, str]] = []
    with http.stream("GET", "/api/v1/pods", params=params) as resp:
        for line in resp.iter_lines():
            if line:
                event = orjson.loads(line)
                events.append((event["type"], event["object"]["spec"].get("nodeName", "")))
    assert events == [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n2")]
