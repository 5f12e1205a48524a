"""A small in-process stand-in for the SQS and EC2 calls :class:`SQSQueue` makes (receive, delete,
describe_instances), keeping state so tests see what was deleted; ``fail_next`` queues exceptions
``receive_message`` raises first."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeSQS:
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    """receipt handle -> message, every message not deleted yet."""
    deleted: list[str] = field(default_factory=list)
    fail_next: list[BaseException] = field(default_factory=list)
    received: int = 0
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def put(self, body: Any) -> str:
        n = next(self._ids)
        receipt = f"rh-{n}"
        self.messages[receipt] = {"MessageId": f"m-{n}", "ReceiptHandle": receipt, "Body": body}
        return receipt

    def receive_message(self, **_: Any) -> dict[str, Any]:
        if self.fail_next:
            raise self.fail_next.pop(0)
        self.received += 1
        return {"Messages": list(self.messages.values())[:10]}

    def delete_message(self, *, QueueUrl: str, ReceiptHandle: str) -> dict[str, Any]:
        self.messages.pop(ReceiptHandle, None)
        self.deleted.append(ReceiptHandle)
        return {}


class FakeEC2:
    def describe_instances(self, *, InstanceIds: list[str]) -> dict[str, Any]:
        return {"Reservations": [{"Instances": [{"InstanceId": i, "InstanceType": "m5.large",
                                                 "Placement": {"AvailabilityZone": "us-east-1a"}}
                                                for i in InstanceIds]}]}


@dataclass
class FakeSession:
    sqs: FakeSQS = field(default_factory=FakeSQS)
    ec2: FakeEC2 = field(default_factory=FakeEC2)
