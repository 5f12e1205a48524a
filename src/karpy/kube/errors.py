"""Typed errors of the cluster interface (:mod:`karpy.kube.interface`).

Every call on a :class:`karpy.kube.interface.Cluster` that fails raises a :class:`KubeError`
subclass that mirrors the API server's ``Status`` response: ``status`` is the HTTP code, ``reason``
the ``metav1.StatusReason`` string. A caller decides what to do from the class (or ``reason``) and
from ``retryable``:

* :class:`Conflict` (409): the object changed since it was read. Retryable *after re-reading it*.
* :class:`TooManyRequests` (429): e.g. an eviction blocked by a PodDisruptionBudget. Retryable
  later, unchanged.
* :class:`InternalError` (500): e.g. a pod selected by more than one PodDisruptionBudget.
  Retryable later.
* :class:`Gone` (410 Expired): a resourceVersion too old for the server's history; list again.
* :class:`NotFound` (404), :class:`AlreadyExists` (409), :class:`Invalid` (422),
  :class:`BadRequest` (400), :class:`Forbidden` (403): retrying the same request cannot succeed.
"""

from __future__ import annotations


class KubeError(Exception):
    """Base of every error the cluster interface raises."""

    status: int = 500
    reason: str = "InternalError"
    retryable: bool = False

    def __init__(self, message: str, *, kind: str = "", name: str = "", namespace: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.name = name
        self.namespace = namespace

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status} {self.reason}: {self.message})"


class BadRequest(KubeError):
    """400: the request itself is malformed (e.g. an unparsable or unsupported selector)."""

    status = 400
    reason = "BadRequest"


class Forbidden(KubeError):
    """403: the request is not allowed (e.g. creating an object in a terminating namespace)."""

    status = 403
    reason = "Forbidden"


class NotFound(KubeError):
    """404: the object does not exist (or no longer exists)."""

    status = 404
    reason = "NotFound"


class Gone(KubeError):
    """410 Gone / Expired: the requested ``resourceVersion`` (a watch start, a list's
    ``continue`` token) is no longer in the server's history. Not a missing object: list again
    from scratch (a quorum list) and watch from the new version."""

    status = 410
    reason = "Expired"
    retryable = True


class AlreadyExists(KubeError):
    """409 AlreadyExists: ``create`` of a name that is taken."""

    status = 409
    reason = "AlreadyExists"


class Conflict(KubeError):
    """409 Conflict: a stale ``metadata.resourceVersion`` (or uid) precondition; re-read and retry."""

    status = 409
    reason = "Conflict"
    retryable = True


class Invalid(KubeError):
    """422: the object fails validation (missing name, forbidden change, ...)."""

    status = 422
    reason = "Invalid"


class TooManyRequests(KubeError):
    """429: try again later, e.g. an eviction that a PodDisruptionBudget does not allow now."""

    status = 429
    reason = "TooManyRequests"
    retryable = True

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        name: str = "",
        namespace: str = "",
        retry_after_seconds: float = 10.0,
    ) -> None:
        super().__init__(message, kind=kind, name=name, namespace=namespace)
        self.retry_after_seconds = retry_after_seconds


class InternalError(KubeError):
    """500: the server could not serve the request; retry later."""

    status = 500
    reason = "InternalError"
    retryable = True


class Timeout(KubeError):
    """504: the request timed out; it may or may not have been applied. Re-read, then retry."""

    status = 504
    reason = "Timeout"
    retryable = True


def is_not_found(err: BaseException) -> bool:
    """True for a :class:`NotFound` (the common "already gone, nothing to do" check)."""
    return isinstance(err, NotFound)


def is_conflict(err: BaseException) -> bool:
    return isinstance(err, Conflict)


class ConfigError(KubeError):
    """No usable connection configuration (kubeconfig, context, in-cluster service account)."""

    status = 0
    reason = "ConfigError"


class Unavailable(KubeError):
    """503 / connection failure / timeout: the API server could not be reached; retry later."""

    status = 503
    reason = "ServiceUnavailable"
    retryable = True


class NotSynced(Unavailable):
    """The cache of the kind read has no first list yet: the answer is unknown, retry later
    (a read on the thread that pumps events never waits for a cache)."""

    reason = "NotSynced"
