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
A message that is not JSON or not one of these shapes (a body that is not an object, an
``instance-id`` that is not a string naming an instance, ``affectedEntities`` that is not a list, a
body too deep to parse...) is counted (:attr:`SQSQueue.malformed`), logged and deleted at once, as
Karpenter does; whatever a message holds, it never stops the queue. The background poller survives
any exception: it logs it, waits (:data:`BACKOFF`, doubling) and receives again;
:meth:`SQSQueue.queue_health` says whether it runs (the interruption controller exports it as
metrics), and :meth:`SQSQueue.pending_interruptions` starts it again should its thread have died.
A message stays pending until :meth:`SQSQueue.ack` deletes it (``DeleteMessage`` with its
receipt handle); SQS's visibility timeout brings back messages nobody acknowledged.
:meth:`SQSQueue.send` writes a notice in EventBridge's shape (for rehearsals and tests).
"""

from __future__ import annotations

import builtins
import datetime
import json
import logging
import re
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
INSTANCE_ID = re.compile(r"i-[0-9a-zA-Z]{1,64}")
"""What an ``instance-id`` must look like; anything else makes the message malformed."""
MAX_BODY = 262_144
"""SQS's largest message (256 KiB); a longer body is malformed."""
BACKOFF = (1.0, 60.0)
"""The poller waits this long after a failed receive, doubling up to the second value."""


class SQSQueue:
    """See the module docstring."""

    def __init__(self, sess: session.Session, queue: str, clock: clock_mod.Clock,
                 ice: unavailable.UnavailableOfferings | None = None, *, wait_seconds: int = 20,
                 backoff: tuple[float, float] = BACKOFF) -> None:
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
        self.restarts = 0
        self.last_receive: float | None = None
        self.backoff = backoff
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
        """One ``ReceiveMessage`` (long-polling ``wait_seconds``); returns the number of notices added.
        A message that cannot be parsed, whatever is wrong with it, is counted, logged and deleted."""
        response = session.call(self.session.sqs, "receive_message", QueueUrl=self.url, MaxNumberOfMessages=10,
                                WaitTimeSeconds=self.wait_seconds, AttributeNames=["SentTimestamp"])
        added = 0
        messages = response.get("Messages") if isinstance(response, Mapping) else None
        for m in messages if isinstance(messages, list) else ():
            receipt = m.get("ReceiptHandle") if isinstance(m, Mapping) else None
            if not isinstance(receipt, str) or not receipt:
                self._malformed(m.get("MessageId") if isinstance(m, Mapping) else None, "no receipt handle")
                continue
            try:
                parsed = self._parse(m)
            except Exception as exc:
                self._malformed(m.get("MessageId"), f"{type(exc).__name__}: {_short(exc)}")
                parsed = []
            if not parsed:
                self._delete(receipt)
                continue
            with self._lock:
                for p in parsed:
                    self._receipts[p.id] = receipt
                    if p.id not in self._pending:
                        self._pending[p.id] = p
                        added += 1
        return added

    def _malformed(self, message_id: Any, why: str) -> None:
        with self._lock:
            self.malformed += 1
        log.error("deleting a malformed interruption message %s: %s", _short(message_id), why)

    def _start_poller(self) -> None:
        with self._lock:
            if self._poller is not None and (self._poller.is_alive() or self._stop.is_set()):
                return
            if self._poller is not None:  # it died of something _poll could not catch: start it again
                self.restarts += 1
                log.error("the interruption queue poller had stopped; starting it again")
            self._poller = threading.Thread(target=self._poll, name="karpy-sqs-interruption", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        delay = self.backoff[0]
        while not self._stop.is_set():
            try:
                self.receive()
            except Exception as exc:
                with self._lock:
                    self.restarts += 1
                if isinstance(exc, errors.CloudProviderError):
                    log.warning("receiving interruption messages failed (again in %.0fs): %s", delay, exc)
                else:
                    log.exception("the interruption queue poller failed; receiving again in %.0fs", delay)
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
            else:
                with self._lock:
                    self.last_receive = self.clock.now()
                delay = self.backoff[0]

    def queue_health(self) -> interface.QueueHealth:
        """Whether the poller runs, how many messages were malformed, how often receiving failed."""
        with self._lock:
            alive = self.wait_seconds <= 0 or (self._poller is not None and self._poller.is_alive())
            return interface.QueueHealth(alive, self.malformed, self.restarts, self.last_receive)

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
        """The notices of one message; ``[]`` (after counting and logging it) when it is malformed or of
        a kind karpy does not act on. Raises nothing it can check for; :meth:`receive` catches the rest."""
        mid = m.get("MessageId")
        raw = m.get("Body")
        if not isinstance(raw, str) or len(raw) > MAX_BODY:
            self._malformed(mid, f"the body is not text of at most {MAX_BODY} characters")
            return []
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            self._malformed(mid, f"the body is not JSON ({_short(exc)})")
            return []
        if not isinstance(body, Mapping):
            self._malformed(mid, f"the body is not a JSON object (found {type(body).__name__})")
            return []
        source, kind, detail = body.get("source"), body.get("detail-type"), body.get("detail")
        detail = {} if detail is None else detail
        if not isinstance(source, str) or not isinstance(kind, str) or not isinstance(detail, Mapping):
            self._malformed(mid, "source and detail-type must be strings and detail an object")
            return []
        when = _time(body.get("time"), self.clock.now())
        mid = mid if isinstance(mid, str) and mid else body.get("id")
        mid = mid if isinstance(mid, str) else ""
        if source == "aws.ec2" and kind in (SPOT_WARNING, REBALANCE, STATE_CHANGE):
            iid = detail.get("instance-id")
            if not isinstance(iid, str) or not INSTANCE_ID.fullmatch(iid):
                self._malformed(mid, f"detail.instance-id is not an instance id (found {_short(iid)})")
                return []
            if kind == STATE_CHANGE:
                state = detail.get("state")
                if not isinstance(state, str) or state not in ACTED_STATES:
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
            affected = detail.get("affectedEntities")
            affected = [] if affected is None else affected
            if not isinstance(affected, list):
                self._malformed(mid, f"detail.affectedEntities is not a list (found {type(affected).__name__})")
                return []
            entities = [e["entityValue"] for e in affected
                        if isinstance(e, Mapping) and isinstance(e.get("entityValue"), str)
                        and INSTANCE_ID.fullmatch(e["entityValue"])]
            return [interface.InterruptionMessage(f"{mid}/{i}" if len(entities) > 1 else mid, self._provider_id(iid),
                                                  "ScheduledChange", when)
                    for i, iid in enumerate(entities)]
        self._malformed(mid, f"a message of an unknown kind ({_short(source)} / {_short(kind)})")
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
    if not isinstance(value, str) or len(value) > 64:
        return default
    try:
        return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
    except (ValueError, OverflowError):
        return default


def _short(value: Any) -> str:
    """At most 120 characters of ``value`` for a log line (a hostile message may be huge)."""
    if isinstance(value, BaseException):
        value = str(value) or type(value).__name__
    text = value if isinstance(value, str) else repr(value) if isinstance(value, int | float | None) \
        else f"({type(value).__name__})"
    return text if len(text) <= 120 else text[:117] + "..."
