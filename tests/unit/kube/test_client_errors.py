"""HTTP answers become karpy errors; the token bucket; plurals and paths. Pure: no server."""

from __future__ import annotations

import orjson
import pytest

from karpy.kube import client, errors, paths


def status(code: int, reason: str, message: str = "msg", **details: object) -> bytes:
    body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "code": code, "reason": reason, "message": message}
    if details:
        body["details"] = details
    return orjson.dumps(body)


@pytest.mark.parametrize(
    ("code", "reason", "cls", "retryable"),
    [
        (404, "NotFound", errors.NotFound, False),
        (410, "Expired", errors.Gone, True),
        (410, "Gone", errors.Gone, True),
        (409, "AlreadyExists", errors.AlreadyExists, False),
        (409, "Conflict", errors.Conflict, True),
        (422, "Invalid", errors.Invalid, False),
        (400, "BadRequest", errors.BadRequest, False),
        (403, "Forbidden", errors.Forbidden, False),
        (415, "UnsupportedMediaType", errors.BadRequest, False),
        (429, "TooManyRequests", errors.TooManyRequests, True),
        (500, "InternalError", errors.InternalError, True),
        (503, "ServiceUnavailable", errors.Unavailable, True),
    ],
)
def test_each_status_code_maps_to_a_karpy_error_with_its_retry_semantics(
    code: int, reason: str, cls: type[errors.KubeError], retryable: bool
) -> None:
    headers = {"Content-Type": "application/json; charset=utf-8"}
    err = client.error_from_response(code, status(code, reason), headers, "PATCH Node n1", kind="Node", name="n1")
    assert type(err) is cls
    assert err.retryable is retryable
    assert err.message.startswith(f"PATCH Node n1: {code} {reason}")
    assert (err.kind, err.name) == ("Node", "n1")


def test_retry_after_comes_from_the_header_or_the_status_details() -> None:
    from_header = client.error_from_response(429, status(429, "TooManyRequests"), {"Retry-After": "7"}, "x")
    assert isinstance(from_header, errors.TooManyRequests) and from_header.retry_after_seconds == 7
    from_details = client.error_from_response(429, status(429, "TooManyRequests", retryAfterSeconds=3), {}, "x")
    assert isinstance(from_details, errors.TooManyRequests) and from_details.retry_after_seconds == 3


def test_a_non_status_payload_is_truncated_in_the_message() -> None:
    err = client.error_from_response(502, b"<html>" + b"x" * 5000, {"Content-Type": "text/html"}, "GET /api")
    assert isinstance(err, errors.Unavailable)
    assert len(err.message) < 600
    assert "more characters" in err.message


def test_a_transport_failure_is_retryable() -> None:
    err = client.error_from_transport(ConnectionRefusedError("refused"), "GET /api/v1/nodes")
    assert isinstance(err, errors.Unavailable) and err.retryable
    assert "ConnectionRefusedError" in err.message


def test_the_token_bucket_lets_a_burst_through_then_paces_to_qps() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = client.TokenBucket(10, 2, now=lambda: now[0], sleep=sleep)
    assert [bucket.take(), bucket.take()] == [0.0, 0.0]
    assert bucket.take() == pytest.approx(0.1)
    now[0] += 1.0  # a quiet second refills up to the burst, not beyond
    assert [bucket.take(), bucket.take()] == [0.0, 0.0]
    assert bucket.take() == pytest.approx(0.1)
    assert slept == [pytest.approx(0.1), pytest.approx(0.1)]


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Pod", "pods"),
        ("NodePool", "nodepools"),
        ("EC2NodeClass", "ec2nodeclasses"),
        ("AKSNodeClass", "aksnodeclasses"),
        ("PodDisruptionBudget", "poddisruptionbudgets"),
        ("StorageClass", "storageclasses"),
        ("NetworkPolicy", "networkpolicies"),
        ("Endpoints", "endpoints"),
    ],
)
def test_plurals_are_guessed_as_kubectl_does(kind: str, plural: str) -> None:
    assert paths.guess_plural(kind) == plural


def test_paths_of_collections_objects_and_subresources() -> None:
    pod = paths.resource_for("Pod")
    assert paths.path(pod) == "/api/v1/pods"
    assert paths.path(pod, "default") == "/api/v1/namespaces/default/pods"
    assert paths.path(pod, "default", "web", "eviction") == "/api/v1/namespaces/default/pods/web/eviction"
    claim = paths.resource_for("NodeClaim")
    assert paths.path(claim, "ignored", "c1", "status") == "/apis/karpenter.sh/v1/nodeclaims/c1/status"
    kwok = paths.resource_for("KWOKNodeClass")
    assert paths.path(kwok, "x", "default") == "/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses/default"
    custom = paths.resource_for("Widget", "example.com/v1alpha1")
    assert (custom.namespaced, paths.path(custom, "ns")) == (True, "/apis/example.com/v1alpha1/namespaces/ns/widgets")
