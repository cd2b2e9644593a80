"""EventBridge targets: one PutEvents entry per delivery, the envelope as the event's `detail`."""

from __future__ import annotations

from hourglass.adapters import aws
from hourglass.core import delivery
from hourglass.core.model import EventBridgeTarget


class EventBridgeTargets(aws.LazyClient):
    service = "events"

    def put(self, target: EventBridgeTarget, text: str) -> None:
        """Delivered once the bus accepted the entry; PutEvents answers 200 with a refused entry's own error."""
        entry = {
            "EventBusName": target.event_bus_arn,
            "Source": target.source,
            "DetailType": target.detail_type,
            "Detail": text,
        }
        with aws.target_call("EventBridge"):
            reply = self.client.put_events(Entries=[entry])
        if reply.get("FailedEntryCount"):
            [result] = reply.get("Entries") or [{}]
            code = str(result.get("ErrorCode", "InternalFailure"))
            raise delivery.service_refusal("EventBridge", code, None, str(result.get("ErrorMessage", "")))
