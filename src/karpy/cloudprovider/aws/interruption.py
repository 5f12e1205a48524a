"""The SQS interruption queue: EventBridge notices about EC2 instances, as Karpenter reads them.

:class:`SQSQueue` implements :class:`karpy.cloudprovider.interface.InterruptionQueue` over the queue
named by ``settings.interruptionQueue`` (a name or a queue URL). ``ReceiveMessage`` (``WaitTimeSeconds`` =
``wait_seconds``, up to 10 messages) runs on a background thread when ``wait_seconds > 0`` (so the
controller loop never waits on SQS) and inside :meth:`SQSQueue.pending_interruptions` when it is 0 (the
simulator). Each body is parsed:

* ``aws.ec2`` / ``EC2 Spot Instance Interruption Warning`` -> ``SpotInterruption`` (and the offering
  ``(type, zone, spot)`` goes into the insufficient-capacity cache);
* ``aws.ec2`` / ``EC2 Instance Rebalance Recommendation`` -> ``Rebalance``;
* ``aws.ec2`` / ``EC2 Instance State-change Notification`` -> ``StateChange`` with the new state as
  ``detail`` (``stopping``, ``stopped``, ``shutting-down``, ``terminated``; other states are deleted);
* ``aws.health`` / ``AWS Health Event`` with ``eventTypeCategory: scheduledChange`` for EC2 ->
  one ``ScheduledChange`` per affected instance.

Provider ids need the instance's zone: it is looked up with ``DescribeInstances`` (and remembered).
A message that is not JSON or not one of these shapes is logged and deleted at once, as Karpenter
does. A message stays pending until :meth:`SQSQueue.ack` deletes it (``DeleteMessage`` with its
receipt handle); SQS's visibility timeout brings back messages nobody acknowledged.
:meth:`SQSQueue.send` writes a notice in EventBridge's shape (for rehearsals and tests).
"""

from __future__ import annotations

import builtins
import datetime
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import labels
from karpy.cloudprovider import errors, interface
from karpy.cloudprovider.aws import session, unavailable

log = logging.getLogger("karpy.cloudprovider.aws.interruption")

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
HEALTH = "AWS Health Event"
ACTED_STATES = ("stopping", "stopped", "shutting-down", "terminated")


class SQSQueue:
    """See the module docstring."""

    def __init__(self, sess: session.Session, queue: str, clock: clock_mod.Clock,
                 ice: unavailable.UnavailableOfferings | None = None, *, wait_seconds: int = 20) -> None:
        self.session = sess
        self.clock = clock
        self.ice = ice
        self.wait_seconds = wait_seconds
        if queue.startswith(("https://", "http://")):
            self.url = queue
        else:
            self.url = str(session.call(sess.sqs, "get_queue_url", QueueName=queue)["QueueUrl"])
        self._lock = threading.Lock()
        self._receipts: dict[str, str] = {}
        self._where: dict[str, tuple[str, str]] = {}
        """instance id -> (zone, instance type)."""
        self.malformed = 0
        self._pending: dict[str, interface.InterruptionMessage] = {}
        self._poller: threading.Thread | None = None
        self._stop = threading.Event()

    def pending_interruptions(self) -> builtins.list[interface.InterruptionMessage]:
        """Unacknowledged notices, oldest first. Never blocks when ``wait_seconds > 0``: a background
        thread long-polls then (started on the first call; :meth:`close` stops it); with
        ``wait_seconds == 0`` (the simulator) each call receives once, synchronously."""
        if self.wait_seconds > 0:
            self._start_poller()
        else:
            self.receive()
        with self._lock:
            return list(self._pending.values())

    def receive(self) -> int:
        """One ``ReceiveMessage`` (long-polling ``wait_seconds``); returns the number of notices added."""
        response = session.call(self.session.sqs, "receive_message", QueueUrl=self.url, MaxNumberOfMessages=10,
                                WaitTimeSeconds=self.wait_seconds, AttributeNames=["SentTimestamp"])
        added = 0
        for m in response.get("Messages") or ():
            parsed = self._parse(m)
            if not parsed:
                self._delete(str(m["ReceiptHandle"]))
                continue
            with self._lock:
                for p in parsed:
                    self._receipts[p.id] = str(m["ReceiptHandle"])
                    if p.id not in self._pending:
                        self._pending[p.id] = p
                        added += 1
        return added

    def _start_poller(self) -> None:
        with self._lock:
            if self._poller is not None:
                return
            self._poller = threading.Thread(target=self._poll, name="karpy-sqs-interruption", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self.receive()
            except errors.CloudProviderError as exc:
                log.warning("receiving interruption messages failed: %s", exc)
                self._stop.wait(5.0)

    def close(self) -> None:
        """Stop the background poller (it ends after its current long poll)."""
        self._stop.set()

    def ack(self, message: interface.InterruptionMessage) -> None:
        with self._lock:
            self._pending.pop(message.id, None)
            receipt = self._receipts.pop(message.id, None)
            # one SQS message may carry several notices (Health events): delete it with the last one
            if receipt is None or receipt in self._receipts.values():
                return
        self._delete(receipt)

    def _delete(self, receipt: str) -> None:
        try:
            session.call(self.session.sqs, "delete_message", QueueUrl=self.url, ReceiptHandle=receipt)
        except errors.CloudProviderError as exc:
            log.warning("deleting an interruption message failed: %s", exc)

    def _parse(self, m: Mapping[str, Any]) -> builtins.list[interface.InterruptionMessage]:
        try:
            body = json.loads(str(m.get("Body") or ""))
            source, kind, detail = body["source"], body["detail-type"], body.get("detail") or {}
            if not isinstance(detail, Mapping):
                raise TypeError("detail is not an object")
        except (ValueError, KeyError, TypeError) as exc:
            self.malformed += 1
            log.error("deleting a malformed interruption message %s: %s", m.get("MessageId"), exc)
            return []
        when = _time(body.get("time"), self.clock.now())
        mid = str(m.get("MessageId") or body.get("id") or "")
        if source == "aws.ec2" and kind in (SPOT_WARNING, REBALANCE, STATE_CHANGE):
            iid = str(detail.get("instance-id") or "")
            if not iid:
                self.malformed += 1
                log.error("deleting interruption message %s without an instance id", mid)
                return []
            if kind == STATE_CHANGE:
                state = str(detail.get("state") or "")
                if state not in ACTED_STATES:
                    return []
                return [interface.InterruptionMessage(mid, self._provider_id(iid), "StateChange", when, state)]
            if kind == SPOT_WARNING:
                zone, itype = self._locate(iid)
                if self.ice is not None and zone and itype:
                    self.ice.mark(itype, zone, labels.CAPACITY_TYPE_SPOT, "SpotInterruption")
                return [interface.InterruptionMessage(mid, self._provider_id(iid), "SpotInterruption", when)]
            return [interface.InterruptionMessage(mid, self._provider_id(iid), "Rebalance", when)]
        if source == "aws.health" and kind == HEALTH and detail.get("eventTypeCategory") == "scheduledChange" \
                and detail.get("service", "EC2") == "EC2":
            entities = [str(e.get("entityValue")) for e in detail.get("affectedEntities") or ()
                        if isinstance(e, Mapping) and str(e.get("entityValue", "")).startswith("i-")]
            return [interface.InterruptionMessage(f"{mid}/{i}" if len(entities) > 1 else mid, self._provider_id(iid),
                                                  "ScheduledChange", when)
                    for i, iid in enumerate(entities)]
        self.malformed += 1
        log.error("deleting interruption message %s of an unknown kind (%s / %s)", mid, source, kind)
        return []

    def _locate(self, iid: str) -> tuple[str, str]:
        with self._lock:
            known = self._where.get(iid)
        if known is not None:
            return known
        try:
            response = session.call(self.session.ec2, "describe_instances", InstanceIds=[iid])
        except errors.CloudProviderError:
            return ("", "")
        for r in response.get("Reservations") or ():
            for inst in r.get("Instances") or ():
                found = (str((inst.get("Placement") or {}).get("AvailabilityZone") or ""),
                         str(inst.get("InstanceType") or ""))
                with self._lock:
                    self._where[iid] = found
                return found
        return ("", "")

    def _provider_id(self, iid: str) -> str:
        zone, _ = self._locate(iid)
        return f"aws:///{zone}/{iid}"

    def send(self, provider_id: str, kind: str, detail: str = "") -> None:
        """Put an EventBridge-shaped notice for ``provider_id`` on the queue."""
        iid = provider_id.rstrip("/").rsplit("/", 1)[-1]
        stamp = datetime.datetime.fromtimestamp(self.clock.now(), tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        session.call(self.session.sqs, "send_message", QueueUrl=self.url,
                     MessageBody=json.dumps(event(iid, kind, stamp, detail)))


def event(instance_id: str, kind: str, time: str, detail: str = "") -> dict[str, Any]:
    """The EventBridge event body for one notice of ``kind`` (:data:`interface.INTERRUPTION_KINDS`)."""
    if kind == "ScheduledChange":
        return {"version": "0", "id": f"health-{instance_id}", "source": "aws.health", "detail-type": HEALTH,
                "time": time, "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange",
                                         "affectedEntities": [{"entityValue": instance_id}]}}
    if kind == "StateChange":
        return {"version": "0", "id": f"state-{instance_id}", "source": "aws.ec2", "detail-type": STATE_CHANGE,
                "time": time, "detail": {"instance-id": instance_id, "state": detail or "terminated"}}
    detail_type = SPOT_WARNING if kind == "SpotInterruption" else REBALANCE
    body: dict[str, Any] = {"instance-id": instance_id}
    if kind == "SpotInterruption":
        body["instance-action"] = "terminate"
    return {"version": "0", "id": f"{kind}-{instance_id}", "source": "aws.ec2", "detail-type": detail_type,
            "time": time, "detail": body}


def _time(value: Any, default: float) -> float:
    try:
        return datetime.datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
    except ValueError:
        return default
