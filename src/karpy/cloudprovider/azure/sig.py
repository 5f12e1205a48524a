"""AKS's shared image gallery (``USE_SIG=true``): image ids and the newest node image versions.

Karpenter's Azure provider with ``USE_SIG`` boots images from the shared image galleries AKS publishes in
the ``SIG_SUBSCRIPTION_ID`` subscription instead of the community galleries. What a caller may rely on:

* :func:`image_id`: ``/subscriptions/<sig subscription>/resourceGroups/<AKS-Ubuntu | AKS-AzureLinux>/providers/
  Microsoft.Compute/galleries/<AKSUbuntu | AKSAzureLinux>/images/<definition>/versions/<version>`` for the
  community gallery karpy's image table names (:data:`GALLERIES` maps one to the other);
* :func:`node_image_version`: the AKS machine API's ``nodeImageVersion`` of such an id
  (``AKSUbuntu-2204gen2containerd-202505.27.0``: gallery, definition, version);
* :class:`NodeImageVersions`: the newest version of each definition from AKS's node image versions API
  (``GET /subscriptions/<sub>/providers/Microsoft.ContainerService/locations/<region>/nodeImageVersions``),
  only the ``AKSUbuntu`` and ``AKSAzureLinux`` entries, newest by numeric dot-separated segments (a longer
  version wins a tie, as ``yymm.dd.build`` replaced ``yy.mm.dd``); kept :data:`gallery.IMAGE_TTL` seconds, a
  failed listing keeps the last answer and is retried after :data:`gallery.RETRY_SECONDS`.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from azure.core import PipelineClient
from azure.core.credentials import TokenCredential
from azure.core.pipeline import policies
from azure.core.rest import HttpRequest

from karpy import clock
from karpy.cloudprovider.azure import clients, gallery, images

log = logging.getLogger("karpy.cloudprovider.azure")

GALLERIES = images.SIG_GALLERIES
"""Community gallery -> (resource group, gallery name) of AKS's shared image gallery."""
NODE_IMAGE_API_VERSION = "2025-10-01"
_SIG_ID = re.compile(r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
                     r"galleries/(?P<gallery>[^/]+)/images/(?P<image>[^/]+)/versions/(?P<version>[^/]+)$",
                     re.IGNORECASE)


def image_id(subscription: str, community_gallery: str, definition: str, version: str) -> str:
    """The shared image gallery id of ``definition`` at ``version`` (module docstring)."""
    rg, name = GALLERIES[community_gallery]
    return (f"/subscriptions/{subscription}/resourceGroups/{rg}/providers/Microsoft.Compute/galleries/{name}/"
            f"images/{definition}/versions/{version}")


def node_image_version(sig_image_id: str) -> str:
    """``<gallery>-<definition>-<version>`` of a shared image gallery id; a community gallery id (which the AKS
    machine API does not take) or anything else is a :class:`ValueError` naming it."""
    m = _SIG_ID.match(sig_image_id)
    if m is None:
        raise ValueError(f"image {sig_image_id!r} is not a shared image gallery image "
                         "(/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/galleries/<gallery>/"
                         "images/<definition>/versions/<version>); the AKS machine API takes only those")
    return f"{m['gallery']}-{m['image']}-{m['version']}"


def newer(a: str, b: str) -> bool:
    """Whether version ``a`` is newer than ``b`` (numeric segments; a non-number segment decides nothing)."""
    sa, sb = a.split("."), b.split(".")
    for x, y in zip(sa, sb, strict=False):
        if not (x.isdigit() and y.isdigit()):
            return False
        if int(x) != int(y):
            return int(x) > int(y)
    return len(sa) > len(sb)


def latest_versions(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(gallery name, definition) -> newest version among node image version entries (``os``, ``sku``,
    ``version``); galleries other than AKS's Ubuntu and Azure Linux ones are left out."""
    wanted = {name for _, name in GALLERIES.values()}
    out: dict[tuple[str, str], str] = {}
    for item in items:
        os_, sku, version = str(item.get("os") or ""), str(item.get("sku") or ""), str(item.get("version") or "")
        if os_ not in wanted or not sku or not version:
            continue
        have = out.get((os_, sku))
        if have is None or newer(version, have):
            out[(os_, sku)] = version
    return out


def pipeline(endpoint: str, credential: TokenCredential) -> PipelineClient[Any, Any]:
    """An azure-core pipeline to ARM at ``endpoint`` (bearer token; plain http only to a loopback emulator)."""
    base = endpoint.rstrip("/")
    auth: Any = (clients.loopback_bearer_policy(credential) if base.startswith("http://")
                 else policies.BearerTokenCredentialPolicy(credential, clients.ARM_SCOPE))
    return PipelineClient(base_url=base, policies=[policies.HeadersPolicy(), policies.RetryPolicy(retry_total=3),
                                                   auth])


def get_json(client: PipelineClient[Any, Any], method: str, path: str, action: str, body: Any = None,
             ok: tuple[int, ...] = (200,)) -> tuple[int, dict[str, str], Any]:
    """Send one ARM request; a status outside ``ok`` is an :class:`clients.AzureAPIError` with ARM's error code
    (404: :class:`clients.NotFoundError`)."""
    kwargs: dict[str, Any] = {"json": body} if body is not None else {}
    request = HttpRequest(method, client.format_url(path), **kwargs)
    response = clients.call(action, client.send_request, request)
    try:
        payload = response.json() if response.text() else None
    except ValueError:
        payload = None
    if response.status_code not in ok:
        err = (payload or {}).get("error") or {} if isinstance(payload, dict) else {}
        code = str(err.get("code") or f"HTTP{response.status_code}")
        message = f"{action}: {err.get('message') or response.text()[: clients.MESSAGE_LIMIT]}"
        cls = clients.NotFoundError if response.status_code == 404 else clients.AzureAPIError
        raise cls(message, code=code, status=response.status_code,
                  retryable=response.status_code == 429 or response.status_code >= 500)
    return response.status_code, dict(response.headers), payload


class NodeImageVersions:
    """The newest SIG node image versions of one region (see the module docstring)."""

    def __init__(self, client: PipelineClient[Any, Any], subscription_id: str, region: str, clk: clock.Clock,
                 ttl: float = gallery.IMAGE_TTL) -> None:
        self.client = client
        self.path = (f"/subscriptions/{subscription_id}/providers/Microsoft.ContainerService/locations/{region}/"
                     f"nodeImageVersions?api-version={NODE_IMAGE_API_VERSION}")
        self.clock = clk
        self.ttl = ttl
        self._versions: dict[tuple[str, str], str] | None = None
        self._until = 0.0
        self._lock = threading.Lock()

    def _list(self) -> list[Mapping[str, Any]]:
        items: list[Mapping[str, Any]] = []
        path: str | None = self.path
        while path:
            _, _, payload = get_json(self.client, "GET", path, "listing node image versions")
            items.extend(payload.get("value") or ())
            link = payload.get("nextLink")
            path = str(link) if link else None
        return items

    def latest(self, community_gallery: str, definition: str) -> str | None:
        """The newest version of ``definition`` in the shared gallery standing for ``community_gallery``."""
        now = self.clock.now()
        with self._lock:
            if self._versions is None or now >= self._until:
                try:
                    self._versions = latest_versions(self._list())
                    self._until = now + self.ttl
                except clients.AzureAPIError as exc:
                    log.warning("could not list node image versions (%s); keeping the last answer", exc.message)
                    self._versions = self._versions or {}
                    self._until = now + gallery.RETRY_SECONDS
            name = GALLERIES.get(community_gallery, ("", ""))[1]
            return self._versions.get((name, definition))
