"""The chaos layer's DynamoDB faults at the HTTP layer (tests/faults/chaos.py): a throttled transaction and
connection errors, against a client built like production's, end as the design says."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import botocore.endpoint
import pytest
from hourglass.adapters import aws

from tests.faults.proxies import Disconnect, Throttle
from tests.integration.conftest import Harness
from tests.integration.test_flow import make_queue


@dataclass
class Production:
    """The harness store on a client built like production's (`adapters.aws`), botocore's sleeps recorded."""

    client: Any
    sleeps: list[float] = field(default_factory=list)

    def hook(self, handler: Any) -> None:
        self.client.meta.events.register_first("before-send.dynamodb", handler)


@pytest.fixture
def production(harness: Harness, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Production:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_endpoint)
    client = aws.client("dynamodb")
    harness.ctx.store.client = client
    state = Production(client)
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=state.sleeps.append))
    return state


def post_dedup(h: Harness) -> tuple[int, Any]:
    return h.call("POST", "/v1/queues/orders/messages", {"messages": [{"body": 1, "dedup_id": "d-1", "delay": 60}]})


def stored(h: Harness) -> list[str]:
    return [m["id"] for m in h.call("GET", "/v1/queues/orders/messages")[1]["messages"]]


def test_a_transaction_throttled_on_the_wire_is_retried_and_stores_the_message(
    harness: Harness, production: Production
) -> None:
    make_queue(harness)
    throttle = Throttle(
        "TransactWriteItems", "TransactionCanceledException", times=2, reasons=["ThrottlingError", "None"]
    )
    production.hook(throttle)
    status, doc = post_dedup(harness)
    [message] = doc["messages"]
    assert (throttle.answered, status, message["duplicate"], stored(harness)) == (2, 201, False, [message["id"]])


def test_a_transaction_that_stays_throttled_answers_503_and_stores_nothing(
    harness: Harness, production: Production
) -> None:
    make_queue(harness)
    production.hook(
        Throttle("TransactWriteItems", "TransactionCanceledException", times=None, reasons=["ThrottlingError", "None"])
    )
    status, _ = post_dedup(harness)
    assert (status, stored(harness)) == (503, [])


@pytest.mark.parametrize("kind", ["connect", "read_timeout"])
def test_connection_errors_on_the_wire_are_retried_by_botocore(
    harness: Harness, production: Production, kind: str
) -> None:
    disconnect = Disconnect("PutItem", kind, times=2)
    production.hook(disconnect)
    make_queue(harness)
    assert (disconnect.raised, len(production.sleeps)) == (2, 2)
    assert harness.ctx.store.get_queue("orders") is not None


def test_connection_errors_past_botocores_retries_answer_503_and_change_nothing(
    harness: Harness, production: Production
) -> None:
    production.hook(Disconnect("PutItem", "connect", times=100))
    status, _ = harness.call("PUT", "/v1/queues/orders", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}})
    assert (status, harness.ctx.store.get_queue("orders")) == (503, None)
