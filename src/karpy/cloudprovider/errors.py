"""Typed errors of the cloud-provider contract (:mod:`karpy.cloudprovider.interface`).

Every error a cloud provider raises on purpose is a :class:`CloudProviderError`, which carries
``retryable`` (may the caller try the same call again later and expect a different outcome?) and a
short machine-readable ``reason`` (``"InsufficientCapacity"``, ``"NodeClaimNotFound"`` ...) that
controllers put into events, conditions and metrics. What a caller may rely on:

* :class:`InsufficientCapacityError`: no compatible offering had capacity. Retryable once the
  offerings it names are treated as unavailable and the NodeClaim is planned again.
* :class:`NodeClaimNotFoundError`: the instance does not exist (any more). Not retryable; a caller
  deleting an instance treats it as success.
* :class:`NodeClassNotReadyError`: the NodeClass is missing or not ready yet. Retryable later.
* :class:`CreateError`: any other launch failure; ``retryable`` says whether to try again.
* :class:`NotOwnedError`: the instance was not launched by this provider for this cluster; the
  provider refused to touch it. Never retryable.

:func:`is_retryable` answers for any exception (``False`` for those that do not say).
"""

from __future__ import annotations

from collections.abc import Iterable

OfferingKey = tuple[str, str, str]
"""``(instance_type, zone, capacity_type)``: one offering, as named in errors and capacity pools."""


class CloudProviderError(Exception):
    """Base of every error a cloud provider raises on purpose."""

    retryable: bool = False
    reason: str = "CloudProviderError"

    def __init__(self, message: str, *, reason: str | None = None, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        if retryable is not None:
            self.retryable = retryable


class InsufficientCapacityError(CloudProviderError):
    """No compatible offering had capacity; ``offerings`` are the ones that were tried and failed."""

    retryable = True
    reason = "InsufficientCapacity"

    def __init__(self, offerings: Iterable[OfferingKey], message: str = "") -> None:
        self.offerings: tuple[OfferingKey, ...] = tuple(offerings)
        if not message:
            named = ", ".join(f"{it}/{zone}/{ct}" for it, zone, ct in self.offerings) or "none"
            message = f"insufficient capacity for every compatible offering (tried: {named})"
        super().__init__(message)


class NodeClaimNotFoundError(CloudProviderError):
    """The instance behind a NodeClaim does not exist or is already terminated."""

    retryable = False
    reason = "NodeClaimNotFound"


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClass a NodeClaim refers to is missing or not ready; try again later."""

    retryable = True
    reason = "NodeClassNotReady"


class CreateError(CloudProviderError):
    """A launch failed for a reason other than capacity."""

    reason = "LaunchFailed"

    def __init__(self, message: str, *, reason: str = "LaunchFailed", retryable: bool = False) -> None:
        super().__init__(message, reason=reason, retryable=retryable)


class NotOwnedError(CloudProviderError):
    """The instance does not carry this cluster's ownership tag; the provider will not touch it."""

    retryable = False
    reason = "NotOwned"


def is_retryable(exc: BaseException) -> bool:
    """True when ``exc`` says the same call may succeed later (``retryable = True``)."""
    return getattr(exc, "retryable", False) is True
