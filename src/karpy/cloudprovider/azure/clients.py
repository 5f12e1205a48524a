"""Azure SDK clients for one cluster, and the translation of azure.core errors into karpy's.

:func:`connect` builds the Compute and Network management clients (azure-mgmt-compute,
azure-mgmt-network) on one subscription, optionally against another ARM endpoint (the fake ARM
service of the tests, Azure Stack, a sovereign cloud). Against a plain-``http`` loopback endpoint
the bearer token is still sent, by :class:`_LoopbackBearerPolicy`, because azure-core's own policy
refuses non-TLS URLs. :class:`StaticTokenCredential` is a credential that needs no network (for
such endpoints and for tests); real clusters pass an azure-identity credential.

What a caller may rely on: every exception azure.core raises comes out of :func:`call` as a
:class:`AzureAPIError` (a :class:`karpy.cloudprovider.errors.CloudProviderError`) carrying the ARM
error ``code`` (``"AllocationFailed"``, ``"SkuNotAvailable"``...), the HTTP ``status`` and
``retryable`` (True for throttling, 5xx and connection failures), with the original exception as
``__cause__``. Nothing from azure.core escapes this package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from azure.core import exceptions as azure_exceptions
from azure.core.credentials import AccessToken, TokenCredential
from azure.core.pipeline import PipelineRequest
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient

from karpy.cloudprovider import errors

ARM_SCOPE = "https://management.azure.com/.default"
MESSAGE_LIMIT = 400
"""Error messages from ARM are cut to this many characters before they reach karpy's errors."""

T = TypeVar("T")


class AzureAPIError(errors.CloudProviderError):
    """An ARM call failed. ``code`` is ARM's error code (``""`` when the service sent none)."""

    reason = "AzureAPIError"

    def __init__(self, message: str, *, code: str = "", status: int | None = None,
                 retryable: bool = False) -> None:
        super().__init__(message, retryable=retryable)
        self.code = code
        self.status = status


class NotFoundError(AzureAPIError):
    """The resource does not exist (HTTP 404)."""

    reason = "NotFound"


class StaticTokenCredential:
    """A credential that returns a fixed token and never touches the network."""

    NEVER_EXPIRES = 2**31 - 1

    def __init__(self, token: str = "karpy-offline-token") -> None:
        self._token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self._token, self.NEVER_EXPIRES)


class _LoopbackBearerPolicy(SansIOHTTPPolicy):  # type: ignore[type-arg]
    """Sends ``Authorization: Bearer <token>`` over plain http (loopback endpoints only)."""

    def __init__(self, credential: TokenCredential, scope: str) -> None:
        self._credential = credential
        self._scope = scope

    def on_request(self, request: PipelineRequest) -> None:  # type: ignore[type-arg]
        token = self._credential.get_token(self._scope)
        request.http_request.headers["Authorization"] = f"Bearer {token.token}"


def loopback_bearer_policy(credential: TokenCredential) -> SansIOHTTPPolicy:  # type: ignore[type-arg]
    """The policy that sends the ARM bearer token over plain http (loopback endpoints only)."""
    return _LoopbackBearerPolicy(credential, ARM_SCOPE)


@dataclass(frozen=True)
class AzureClients:
    """The management clients of one subscription; ``endpoint`` is ARM's base URL."""

    compute: ComputeManagementClient
    network: NetworkManagementClient
    subscription_id: str
    endpoint: str
    credential: TokenCredential


def is_loopback_http(endpoint: str) -> bool:
    """True for a plain-http endpoint on this machine (an emulator)."""
    return endpoint.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))


def connect(subscription_id: str, credential: TokenCredential, *, endpoint: str | None = None,
            polling_interval: float | None = None, retry_total: int = 3) -> AzureClients:
    """Clients for ``subscription_id`` at ``endpoint`` (public Azure when ``None``)."""
    base = (endpoint or "https://management.azure.com").rstrip("/")
    options: dict[str, Any] = {"retry_total": retry_total}
    if polling_interval is not None:
        options["polling_interval"] = polling_interval
    if base.startswith("http://"):
        if not is_loopback_http(base):
            raise errors.CloudProviderError(
                f"refusing to send Azure credentials over plain http to {base}; use https", reason="Configuration")
        options["authentication_policy"] = _LoopbackBearerPolicy(credential, ARM_SCOPE)
    compute = ComputeManagementClient(credential, subscription_id, base_url=base, **options)
    network = NetworkManagementClient(credential, subscription_id, base_url=base, **options)
    return AzureClients(compute=compute, network=network, subscription_id=subscription_id, endpoint=base,
                        credential=credential)


GENERIC_CODES = frozenset({"Conflict", "BadRequest", "DeploymentFailed", "InternalServerError", "OperationFailed"})
"""Top-level codes that only wrap the real one, which ARM puts in ``error.details[0].code``."""


def error_code(exc: BaseException) -> str:
    """ARM's error code of an azure.core exception (``""`` when it has none); a generic wrapper code
    (:data:`GENERIC_CODES`) gives way to the first detail's code."""
    err = getattr(exc, "error", None)
    code = str(getattr(err, "code", None) or "") if err is not None else ""
    if code in GENERIC_CODES or not code:
        for detail in getattr(err, "details", None) or ():
            inner = getattr(detail, "code", None)
            if inner:
                return str(inner)
    return code


def translate(exc: BaseException, action: str) -> AzureAPIError:
    """The karpy error for an azure.core exception raised while doing ``action``."""
    err = getattr(exc, "error", None)
    code = error_code(exc)
    message = str(getattr(err, "message", None) or exc)
    for detail in getattr(err, "details", None) or ():
        if getattr(detail, "code", None) == code and getattr(detail, "message", None):
            message = str(detail.message)
            break
    message = message[:MESSAGE_LIMIT]
    status = getattr(exc, "status_code", None)
    text = f"{action}: {code + ': ' if code else ''}{message}"
    if isinstance(exc, azure_exceptions.ResourceNotFoundError) or status == 404:
        return NotFoundError(text, code=code or "NotFound", status=404)
    if isinstance(exc, (azure_exceptions.ServiceRequestError, azure_exceptions.ServiceResponseError)):
        return AzureAPIError(text, code=code or "ConnectionError", retryable=True)
    retryable = status is not None and (status == 429 or status >= 500)
    return AzureAPIError(text, code=code, status=status, retryable=retryable)


def call(action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` with azure.core exceptions translated (see :func:`translate`)."""
    try:
        return fn(*args, **kwargs)
    except azure_exceptions.AzureError as exc:
        raise translate(exc, action) from exc
