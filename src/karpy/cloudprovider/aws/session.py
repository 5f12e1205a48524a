"""boto3 clients for karpy's AWS provider, and the one place botocore errors become karpy errors.

:class:`Session` holds one client each for EC2, SSM, SQS, IAM, EKS and the Pricing API, all created up
front (boto3 clients are thread-safe once made; sessions are not), with botocore's ``standard``
retry mode, a connection pool large enough for concurrent launches and one optional
``endpoint_url`` shared by every service (a sandbox such as a moto server). Credentials come from
the environment as boto3 reads them.

:func:`call` runs one API operation and translates every botocore / boto3 exception, keeping the
cause (``raise ... from``):

* capacity codes (``InsufficientInstanceCapacity``, ``InsufficientCapacity``,
  ``MaxSpotInstanceCountExceeded``, ``VcpuLimitExceeded``, ``UnfulfillableCapacity``,
  ``InsufficientFreeAddressesInSubnet`` ...) -> :class:`errors.InsufficientCapacityError`;
* ``InvalidInstanceID.NotFound`` / ``.Malformed`` -> :class:`errors.NodeClaimNotFoundError`;
* throttling, 5xx and connection problems -> :class:`AWSError` with ``retryable = True``;
* anything else -> :class:`AWSError` (not retryable), with the AWS error ``code`` on the object.

Nothing outside this package sees a botocore type.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.config
import botocore.exceptions

from karpy.cloudprovider import errors

log = logging.getLogger("karpy.cloudprovider.aws")

SERVICES = ("ec2", "ssm", "sqs", "iam", "pricing", "eks")
PRICING_REGIONS = ("us-east-1", "ap-south-1", "eu-central-1")
"""Regions that serve the Pricing API; others ask us-east-1 (prices cover every region)."""

CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
    "UnfulfillableCapacity", "InsufficientFreeAddressesInSubnet", "ReservationCapacityExceeded",
    "SpotMaxPriceTooLow", "Unsupported",
})
"""CreateFleet / RunInstances codes that mean "this offering cannot be had now" (Karpenter's list)."""

NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled",
    "TooManyRequestsException", "ProvisionedThroughputExceededException", "SlowDown",
    "ServiceUnavailable", "InternalError", "InternalFailure", "Unavailable",
})


class AWSError(errors.CloudProviderError):
    """An AWS API call failed; ``code`` is the AWS error code (``""`` for connection problems)."""

    reason = "AWSError"

    def __init__(self, message: str, *, code: str = "", operation: str = "", retryable: bool = False) -> None:
        super().__init__(message, retryable=retryable)
        self.code = code
        self.operation = operation


def is_capacity_code(code: str) -> bool:
    return code in CAPACITY_CODES


def translate(exc: BaseException, operation: str) -> errors.CloudProviderError:
    """The karpy error for a botocore/boto3 exception raised by ``operation``."""
    if isinstance(exc, botocore.exceptions.ClientError):
        err = exc.response.get("Error") or {}
        code = str(err.get("Code") or "")
        message = str(err.get("Message") or exc)[:500]
        status = int((exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        text = f"{operation}: {code}: {message}"
        if code in CAPACITY_CODES:
            return errors.InsufficientCapacityError((), text)
        if code in NOT_FOUND_CODES:
            return errors.NodeClaimNotFoundError(text)
        retryable = code in THROTTLING_CODES or status >= 500 or status == 429
        return AWSError(text, code=code, operation=operation, retryable=retryable)
    if isinstance(exc, botocore.exceptions.NoCredentialsError | botocore.exceptions.NoRegionError):
        return AWSError(f"{operation}: {exc}", operation=operation, retryable=False)
    if isinstance(exc, botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectionError |
                  botocore.exceptions.ReadTimeoutError | botocore.exceptions.ConnectTimeoutError):
        return AWSError(f"{operation}: {exc}", operation=operation, retryable=True)
    if isinstance(exc, botocore.exceptions.BotoCoreError):
        return AWSError(f"{operation}: {exc}", operation=operation, retryable=False)
    return AWSError(f"{operation}: {type(exc).__name__}: {exc}", operation=operation, retryable=False)


def call(client: Any, operation: str, **params: Any) -> dict[str, Any]:
    """``client.<operation>(**params)`` with errors translated (see the module docstring)."""
    try:
        response: dict[str, Any] = getattr(client, operation)(**params)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise translate(exc, operation) from exc
    return response


def paginate(client: Any, operation: str, **params: Any) -> Iterator[dict[str, Any]]:
    """Each page of ``operation``, errors translated."""
    try:
        paginator = client.get_paginator(operation)
        yield from paginator.paginate(**params)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise translate(exc, operation) from exc


class Session:
    """One client per service (:data:`SERVICES`); see the module docstring."""

    def __init__(self, region: str | None = None, *, endpoint_url: str | None = None, max_attempts: int = 3,
                 max_pool_connections: int = 64, boto_session: Any = None) -> None:
        """Raises :class:`AWSError` (not retryable) when no region is given or configured."""
        self.boto_session = boto_session or boto3.session.Session(region_name=region)
        self.region = region or self.boto_session.region_name or ""
        if not self.region:
            raise AWSError("no AWS region: pass --region or set AWS_REGION / AWS_DEFAULT_REGION",
                           operation="configure")
        self.endpoint_url = endpoint_url
        config = botocore.config.Config(
            retries={"max_attempts": max_attempts, "mode": "standard"},
            max_pool_connections=max_pool_connections,
            user_agent_extra="karpy",
        )
        self.ec2 = self._client("ec2", self.region, config)
        self.ssm = self._client("ssm", self.region, config)
        self.sqs = self._client("sqs", self.region, config)
        self.iam = self._client("iam", self.region, config)
        self.eks = self._client("eks", self.region, config)
        pricing_region = self.region if (endpoint_url or self.region in PRICING_REGIONS) else "us-east-1"
        self.pricing = self._client("pricing", pricing_region, config)

    def _client(self, service: str, region: str, config: botocore.config.Config) -> Any:
        try:
            return self.boto_session.client(service, region_name=region, endpoint_url=self.endpoint_url,
                                            config=config)
        except (botocore.exceptions.BotoCoreError, ValueError) as exc:
            raise AWSError(f"creating the {service} client: {exc}", operation="configure") from exc
