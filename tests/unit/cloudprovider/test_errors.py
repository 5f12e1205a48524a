"""The cloud provider's typed errors: retryability, reasons and what they carry."""

from __future__ import annotations

import pytest

from karpy.api import errors as api_errors
from karpy.cloudprovider import errors


def test_insufficient_capacity_is_retryable_and_names_the_offerings_that_failed() -> None:
    exc = errors.InsufficientCapacityError(
        [("m5.large", "us-east-1a", "spot"), ("m5.large", "us-east-1b", "spot")])
    assert exc.retryable is True
    assert exc.reason == "InsufficientCapacity"
    assert exc.offerings == (("m5.large", "us-east-1a", "spot"), ("m5.large", "us-east-1b", "spot"))
    assert "m5.large/us-east-1a/spot" in str(exc)
    assert "m5.large/us-east-1b/spot" in str(exc)


def test_nodeclaim_not_found_is_not_retryable() -> None:
    exc = errors.NodeClaimNotFoundError("instance i-0123456789abcdef0 not found")
    assert exc.retryable is False
    assert exc.reason == "NodeClaimNotFound"
    assert not errors.is_retryable(exc)


def test_nodeclass_not_ready_is_retryable() -> None:
    exc = errors.NodeClassNotReadyError("EC2NodeClass default not found")
    assert exc.retryable is True
    assert errors.is_retryable(exc)


@pytest.mark.parametrize("retryable", [True, False])
def test_a_create_error_carries_the_retryability_and_reason_it_was_given(retryable: bool) -> None:
    exc = errors.CreateError("quota exceeded", reason="VcpuLimitExceeded", retryable=retryable)
    assert exc.retryable is retryable
    assert exc.reason == "VcpuLimitExceeded"
    assert errors.is_retryable(exc) is retryable
    assert str(exc) == "quota exceeded"


def test_a_create_error_is_not_retryable_unless_told() -> None:
    exc = errors.CreateError("no compatible instance types")
    assert exc.retryable is False
    assert exc.reason == "LaunchFailed"


def test_not_owned_is_never_retryable() -> None:
    exc = errors.NotOwnedError("instance belongs to another cluster")
    assert exc.retryable is False
    assert exc.reason == "NotOwned"


def test_every_typed_error_is_a_cloud_provider_error() -> None:
    for cls in (errors.InsufficientCapacityError, errors.NodeClaimNotFoundError,
                errors.NodeClassNotReadyError, errors.CreateError, errors.NotOwnedError):
        assert issubclass(cls, errors.CloudProviderError)


def test_setting_retryable_on_one_error_does_not_change_its_class() -> None:
    errors.CloudProviderError("x", retryable=True)
    assert errors.CloudProviderError("y").retryable is False


def test_exceptions_that_do_not_say_are_not_retryable() -> None:
    assert errors.is_retryable(RuntimeError("boom")) is False
    invalid = api_errors.ValidationError.single("NodePool default", "spec", "a map", 3)
    assert errors.is_retryable(invalid) is False


def test_an_exception_that_says_retryable_is_retryable() -> None:
    class Throttled(Exception):
        retryable = True

    assert errors.is_retryable(Throttled()) is True
