"""Cancel, PATCH and queue deletion landing in the middle of a sweep, a hand-off and a delivery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hourglass.adapters.http_target import HttpReply

from tests.faults.conftest import Faults
from tests.integration.conftest import Harness
from tests.integration.test_flow import get, make_queue, post

Answer = tuple[int, Any]


def during_sleep(h: Harness, action: Callable[[], Answer]) -> list[Answer]:
    """Runs `action` while the dispatcher waits out the last second before starting the delivery."""
    answers: list[Answer] = []
    real = h.ctx.sleep

    def sleep(seconds: float) -> None:
        if not answers:
            answers.append(action())
        real(seconds)

    h.ctx.sleep = sleep
    return answers


def during_delivery(h: Harness, action: Callable[[], Answer]) -> list[Answer]:
    """Runs `action` while the callback is being called."""
    answers: list[Answer] = []
    real = h.ctx.post

    def post_(url: str, body: bytes, headers: dict[str, str], **kwargs: Any) -> HttpReply:
        if not answers:
            answers.append(action())
        return real(url, body, headers, **kwargs)

    h.ctx.post = post_
    return answers


def between_claim_and_send(faults: Faults, action: Callable[[], Answer]) -> list[Answer]:
    answers: list[Answer] = []
    faults.sqs.before("send_message_batch", lambda: answers.append(action()))
    return answers


def delivered(h: Harness) -> list[tuple[str, str]]:
    return [(r["headers"]["Hourglass-Message-Id"], r["headers"]["Hourglass-Due-At"]) for r in h.receiver.requests]


def cancel(h: Harness, message_id: str) -> Callable[[], Answer]:
    return lambda: h.call("DELETE", f"/v1/queues/orders/messages/{message_id}")


def patch(h: Harness, message_id: str, doc: dict[str, Any]) -> Callable[[], Answer]:
    return lambda: h.call("PATCH", f"/v1/queues/orders/messages/{message_id}", doc)


def swept(h: Harness, delay: float = 600) -> dict[str, Any]:
    make_queue(h)
    [created] = post(h, {"body": 1, "delay": delay})
    h.clock.advance(delay - 200)
    return created


def run_until_quiet(h: Harness, rounds: int = 8) -> None:
    for _ in range(rounds):
        h.sweep()
        h.dispatch(h.timers())
        h.clock.advance(60)


# cancel ------------------------------------------------------------------------------------


def test_cancel_between_claim_and_send_is_never_delivered(harness: Harness, faults: Faults) -> None:
    created = swept(harness)
    answers = between_claim_and_send(faults, cancel(harness, created["id"]))
    run_until_quiet(harness)
    assert answers[0][0] == 204
    assert (get(harness, created["id"])["status"], delivered(harness)) == ("cancelled", [])


def test_cancel_while_the_dispatcher_waits_is_never_delivered(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5.5})
    answers = during_sleep(harness, cancel(harness, created["id"]))
    run_until_quiet(harness)
    assert answers[0][0] == 204
    assert (get(harness, created["id"])["status"], delivered(harness)) == ("cancelled", [])


def test_cancel_during_the_delivery_is_refused_and_the_delivery_stands(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    answers = during_delivery(harness, cancel(harness, created["id"]))
    run_until_quiet(harness)
    assert answers[0][0] == 409
    assert get(harness, created["id"])["status"] == "delivered" and len(delivered(harness)) == 1


def test_cancel_of_a_retry_waiting_in_the_timer_queue_is_never_delivered(harness: Harness) -> None:
    make_queue(harness)
    harness.receiver.answers = [503]
    [created] = post(harness, {"body": 1, "delay": 5})
    harness.dispatch(harness.timers())
    status, _ = cancel(harness, created["id"])()
    run_until_quiet(harness)
    assert status == 204 and len(delivered(harness)) == 1  # the failed first attempt only
    assert get(harness, created["id"])["status"] == "cancelled"


# reschedule -------------------------------------------------------------------------------


def test_patch_between_claim_and_send_delivers_once_at_the_new_time(harness: Harness, faults: Faults) -> None:
    created = swept(harness)
    answers = between_claim_and_send(faults, patch(harness, created["id"], {"delay": 900}))
    run_until_quiet(harness, rounds=20)
    status, doc = answers[0]
    assert status == 200 and doc["due_at"] != created["due_at"]
    assert delivered(harness) == [(created["id"], doc["due_at"])]


def test_patch_while_the_dispatcher_waits_delivers_once_at_the_new_time(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5.5})
    answers = during_sleep(harness, patch(harness, created["id"], {"delay": 30}))
    run_until_quiet(harness)
    status, doc = answers[0]
    assert status == 200
    assert delivered(harness) == [(created["id"], doc["due_at"])]


def test_patch_to_an_earlier_time_delivers_once_at_the_new_time(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 600})
    harness.clock.advance(300)
    harness.sweep()  # handed off for the original due time
    status, doc = patch(harness, created["id"], {"delay": 10})()
    run_until_quiet(harness)
    assert status == 200
    assert delivered(harness) == [(created["id"], doc["due_at"])]


def test_patch_during_the_delivery_is_refused(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    answers = during_delivery(harness, patch(harness, created["id"], {"delay": 30}))
    run_until_quiet(harness)
    assert answers[0][0] == 409
    assert delivered(harness) == [(created["id"], created["due_at"])]


# queue deletion ---------------------------------------------------------------------------


def test_queue_deleted_between_claim_and_send_cancels_the_message(harness: Harness, faults: Faults) -> None:
    created = swept(harness)
    answers = between_claim_and_send(faults, lambda: harness.call("DELETE", "/v1/queues/orders"))
    run_until_quiet(harness)
    assert answers[0][0] == 204
    message = harness.ctx.store.get_message("orders", created["id"])
    assert message is not None and (message.status.value, delivered(harness)) == ("cancelled", [])


def test_queue_deleted_and_recreated_while_the_dispatcher_waits_cancels_the_message(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5.5})

    def recreate() -> Answer:
        harness.call("DELETE", "/v1/queues/orders")
        return harness.call("PUT", "/v1/queues/orders", {"target": {"type": "http", "url": "http://127.0.0.1:9/"}})

    answers = during_sleep(harness, recreate)
    run_until_quiet(harness)
    assert answers[0][0] == 201
    assert (get(harness, created["id"])["status"], delivered(harness)) == ("cancelled", [])


def test_queue_deleted_during_the_delivery_lets_the_delivery_finish(harness: Harness) -> None:
    make_queue(harness)
    [created] = post(harness, {"body": 1, "delay": 5})
    answers = during_delivery(harness, lambda: harness.call("DELETE", "/v1/queues/orders"))
    run_until_quiet(harness)
    message = harness.ctx.store.get_message("orders", created["id"])
    assert answers[0][0] == 204
    assert message is not None and message.status.value == "delivered" and len(delivered(harness)) == 1
