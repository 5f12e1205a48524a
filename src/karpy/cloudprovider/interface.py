"""The cloud-provider contract: what karpy's controllers may ask of a cloud, and what they may rely on.

This is karpy's equivalent of Karpenter's ``cloudprovider.CloudProvider``. The provisioner, the
NodeClaim lifecycle, garbage collection, drift and interruption controllers talk to a cloud only
through :class:`CloudProvider` (and, for interruption notices, :class:`InterruptionQueue`). The
implementations are the AWS (EC2) and Azure (AKS) providers, KWOK, and the simulated cloud in
:mod:`karpy.cloudprovider.fake.provider` used by ``karpy simulate`` and the integration tests.

Errors are the typed ones of :mod:`karpy.cloudprovider.errors`; any other exception is a bug or an
unexpected outage and callers treat it as retryable only if it says ``retryable = True``.

Provider IDs have the real formats so that nodes registered by the kubelet match NodeClaims:

* AWS: ``aws:///<zone>/i-<17 hex digits>``, e.g. ``aws:///us-east-1a/i-0123456789abcdef0``
* Azure: ``azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<vm>``
* KWOK: ``kwok://<node name>``
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from karpy.api import nodeclaim, nodepool
from karpy.cloudprovider import instancetype

INTERRUPTION_KINDS = ("SpotInterruption", "ScheduledChange", "StateChange", "Rebalance")
"""Kinds of :class:`InterruptionMessage`, as Karpenter's interruption controller distinguishes them:

* ``SpotInterruption``: the spot instance will be reclaimed two minutes after the notice.
* ``ScheduledChange``: a scheduled maintenance event (AWS Health) will affect the instance.
* ``StateChange``: the instance is stopping, stopped, shutting down or terminated.
* ``Rebalance``: a rebalance recommendation (elevated risk of interruption); informational.
"""

SPOT_INTERRUPTION_WARNING_SECONDS = 120.0
"""A spot instance is reclaimed this long after its interruption notice (EC2's two-minute warning)."""


@dataclass(frozen=True, slots=True)
class InterruptionMessage:
    """One notice from the cloud's interruption queue (on AWS: an SQS message from EventBridge)."""

    id: str
    """Unique within the queue; pass the message back to :meth:`InterruptionQueue.ack`."""
    provider_id: str
    """The instance concerned, in the provider-id format of :class:`CloudProvider`."""
    kind: str
    """One of :data:`INTERRUPTION_KINDS`."""
    time: float
    """When the cloud sent the notice (seconds since the epoch)."""
    detail: str = ""
    """Free text (e.g. the new instance state of a ``StateChange``: ``"terminated"``)."""


class InterruptionQueue(Protocol):
    """Where interruption notices wait until the interruption controller has handled them.

    A caller may rely on: messages come out in the order the cloud sent them; a message stays in
    :meth:`pending_interruptions` until it is acknowledged (at-least-once delivery, like SQS);
    acknowledging a message twice, or one that is unknown, is harmless.
    """

    def pending_interruptions(self) -> builtins.list[InterruptionMessage]:
        """Every unacknowledged message sent so far, oldest first."""
        ...

    def ack(self, message: InterruptionMessage) -> None:
        """Remove ``message`` from the queue (SQS DeleteMessage)."""
        ...


@dataclass(frozen=True, slots=True)
class QueueHealth:
    """What a queue that receives on a background thread says about itself (see
    :meth:`karpy.cloudprovider.aws.interruption.SQSQueue.queue_health`); the interruption controller
    turns it into metrics."""

    alive: bool
    """The receiving thread is running (or the queue receives synchronously)."""
    malformed: int
    """Messages that could not be parsed so far (each was logged and deleted)."""
    restarts: int
    """Times the receiving loop failed and started again after a backoff."""
    last_receive: float | None
    """Clock time of the last successful receive, ``None`` before the first."""


class CloudProvider(Protocol):
    """A cloud karpy can launch nodes in. See the module docstring for provider ID formats."""

    name: str
    """``"aws"``, ``"azure"``, ``"kwok"`` or ``"fake"``; used in metrics labels and events."""

    def create(self, claim: nodeclaim.NodeClaim) -> nodeclaim.NodeClaim:
        """Launch one instance for ``claim`` and return the launched NodeClaim.

        The provider launches the cheapest available offering compatible with the claim's
        requirements (``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``,
        ``karpenter.sh/capacity-type`` and any other instance-type label) whose instance type's
        allocatable holds ``spec.resources.requests``. When the requirements allow both spot and
        on-demand and a compatible spot offering is available, it launches spot (spot is chosen
        price-capacity-optimised; on-demand by lowest price). Offerings are tried cheapest first,
        as EC2 CreateFleet tries its overrides.

        The returned NodeClaim is ``claim`` with ``status.providerID``, ``status.imageID``,
        ``status.capacity`` and ``status.allocatable`` set, and with labels that include
        ``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``,
        ``topology.kubernetes.io/region``, ``karpenter.sh/capacity-type``, ``kubernetes.io/arch``,
        ``kubernetes.io/os`` and every label of the instance type. The NodeClass hash annotation is
        set when the claim refers to a NodeClass. ``claim`` itself is not modified.

        Raises :class:`errors.InsufficientCapacityError` (naming every offering tried) when no
        compatible offering has capacity, :class:`errors.NodeClassNotReadyError` when the NodeClass
        is missing or not ready, and :class:`errors.CreateError` for any other failure (including
        "no instance type is compatible", which is not retryable).
        """
        ...

    def delete(self, claim: nodeclaim.NodeClaim) -> None:
        """Terminate the instance behind ``claim.status.providerID``.

        Raises :class:`errors.NodeClaimNotFoundError` when the instance is already gone (callers
        treat that as success: deleting twice is safe) and :class:`errors.NotOwnedError` when the
        instance does not carry this cluster's ownership tag: a provider never terminates an
        instance it did not launch for this cluster.
        """
        ...

    def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        """The NodeClaim view of a live instance this provider launched for this cluster.

        Raises :class:`errors.NodeClaimNotFoundError` for unknown, terminated or foreign instances.
        """
        ...

    def list(self) -> builtins.list[nodeclaim.NodeClaim]:
        """Every live instance this provider launched for this cluster, for garbage collection.

        Each NodeClaim is built from the instance: its name comes from the ``karpenter.sh/nodeclaim``
        tag, with ``status.providerID``, labels (instance type, zone, capacity type, nodepool...)
        and the launch time as ``metadata.creationTimestamp``. Order: by launch time, then id.
        """
        ...

    def get_instance_types(self, pool: nodepool.NodePool | None) -> builtins.list[instancetype.InstanceType]:
        """The instance types ``pool`` may launch, with offering availability as it is now.

        Availability reflects what the provider knows about capacity (offerings recently out of
        capacity are ``available=False``). Allocatable honours the NodeClass's kubelet settings
        where the provider supports them. The list is sorted by name and is a fresh list.
        """
        ...

    def is_drifted(self, claim: nodeclaim.NodeClaim) -> str:
        """``""`` when the instance still matches its NodeClass, else the drift reason.

        Reasons are Karpenter's: ``"NodeClassDrift"`` (the NodeClass hash annotation of the claim
        differs from the NodeClass's current hash), ``"AMIDrift"`` / ``"ImageDrift"`` (the image
        the NodeClass resolves to changed), ``"SubnetDrift"``, ``"SecurityGroupDrift"``.
        """
        ...

    def repair_policies(self) -> builtins.list[RepairPolicy]:
        """Node conditions after which an unhealthy node is replaced (may be empty)."""
        ...

    def resolve_node_class(self, node_class: Mapping[str, Any]) -> dict[str, Any]:
        """The ``status`` the NodeClass object ``node_class`` (a dict as the API returns it) should have now.

        A provider resolves what the NodeClass selects (AWS: subnets, security groups, AMIs, instance
        profile; Azure: images, subnet) and returns the whole status to write, always with a
        ``conditions`` list holding a ``Ready`` condition (``status`` ``"True"`` / ``"False"``, a
        CamelCase ``reason`` and a ``message`` saying what matched nothing). A NodePool whose NodeClass
        is not Ready is not provisioned from. A NodeClass kind the provider does not serve gets
        ``Ready=False`` with reason ``UnsupportedNodeClass``. Raises only :class:`errors.CloudProviderError`
        (retryable when the cloud could not be asked); the caller keeps the previous status then.
        """
        ...


class Billing(Protocol):
    """An optional capability of a cloud provider that knows the customer's commitments.

    ``billed_price(provider_id)`` is what the running instance adds to the bill per hour: ``0`` under a
    Reserved Instance, its uncovered part under a Savings Plan, else its price less any negotiated
    discount; ``None`` when unknown. Consolidation prices a node with it (when the provider has it), so
    a node under a commitment is never replaced by one that is in fact paid on top; offering prices in
    :meth:`CloudProvider.get_instance_types` are then marginal prices (what one more instance would add).
    """

    def billed_price(self, provider_id: str) -> float | None: ...


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """Replace a node whose condition ``condition_type`` has had ``condition_status`` for
    ``toleration_seconds`` (Karpenter's node auto-repair)."""

    condition_type: str
    condition_status: str
    toleration_seconds: float


def ready_condition(ready: bool, reason: str, message: str = "") -> dict[str, Any]:
    """A NodeClass ``Ready`` condition as :meth:`CloudProvider.resolve_node_class` returns it
    (without ``lastTransitionTime``, which the status writer sets when the status changes)."""
    return {"type": "Ready", "status": "True" if ready else "False", "reason": reason, "message": message}
