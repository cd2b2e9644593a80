"""The web console in headless Chromium (Debian's `chromium`, driven by Playwright) against the local
runtime: key entry, queues (counts, limits, pause), message list and timeline with attempts, bulk
cancel/shift/redeliver, failed messages, schedules (create, next occurrences, pause, delete), lateness
chart. Screenshots go to tests/artifacts/console/."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hourglass_client import Client

from tests.clients.conftest import API_KEY, RawReceiver, eventually

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
expect = sync_api.expect
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is missing: install it with `apt-get update && apt-get install -y chromium` "
    "(browser downloads do not work here; the tests use the system's /usr/bin/chromium)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, api_url: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(20_000)
    # Held still (`?refresh=off`): a test reads what its own clicks drew; auto-refresh has a test of its own.
    opened.goto(f"{api_url}/console?refresh=off")
    yield opened
    context.close()


def shot(page: Any, name: str) -> None:
    """A full-page screenshot that leaves the page scrolled where it was. Chromium captures beyond the viewport
    by resizing it; with a text field focused and the page scrolled far enough (the queue form brought into view
    above a dozen queues), scroll anchoring moves the page's scroll offset while the browser keeps the old one,
    and the next mouse press puts it back: a click aimed at the page as it was drawn lands ~108 px away."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    scrolled = page.evaluate("[window.scrollX, window.scrollY]")
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.evaluate("([x, y]) => window.scrollTo(x, y)", scrolled)


def sign_in(page: Any, queue: str) -> None:
    page.fill("#key", API_KEY)
    page.click("#save-key")
    page.fill("#add-queue-name", queue)
    page.click("#add-queue")
    page.wait_for_selector(f'#queues-table tr[data-queue="{queue}"][data-counted]')


def fill_schedule_form(page: Any, queue: str, **fields: str) -> None:
    """Opens `queue`'s schedules view and types each of `fields` into the schedule form's input of that name
    (`jitter` -> `#schedule-jitter`), in the order given; saving is left to the test."""
    sign_in(page, queue)
    page.click('nav button[data-view="schedules"]')
    for field, value in fields.items():
        page.fill(f"#schedule-{field}", value)


@pytest.fixture
def busy_queue(client: Client, receiver: RawReceiver) -> dict[str, Any]:
    """A queue with 3 pending, 1 delivered and 1 failed message."""
    name = f"ui-{uuid.uuid4().hex[:8]}"
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")}, retry={"max_attempts": 1})
    receiver.script[f"/{name}"] = [200, 400]
    delivered = client.send(name, {"order": "delivered"})
    eventually(lambda: client.get_message(name, delivered.id).status == "delivered")
    failed = client.send(name, {"order": "failed"})
    eventually(lambda: client.get_message(name, failed.id).status == "failed")
    pending = client.send_batch(name, [{"body": {"n": n}, "delay": 3600} for n in range(3)])
    # Counts are added up per batch of status changes, a few seconds behind them (`counts_as_of`).
    settled = {"pending": 3, "delivered": 1, "failed": 1}
    eventually(lambda: all(client.get_queue(name).counts.get(k) == v for k, v in settled.items()))
    return {"name": name, "delivered": delivered.id, "failed": failed.id, "pending": [p.id for p in pending]}


def when(value: datetime) -> str:
    """A time as the console shows it: `2026-11-21 10:00:00Z`."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def time_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def tab(page: Any, status: str) -> None:
    """Opens a status tab of the message list and waits until it is the one shown."""
    page.click(f'#status-tabs button[data-status="{status}"]')
    page.wait_for_selector(f'#status-tabs button.active[data-status="{status}"]')


def counts(page: Any, queue: str) -> dict[str, str]:
    row = f'#queues-table tr[data-queue="{queue}"]'
    statuses = ["pending", "delivering", "delivered", "failed", "cancelled", "expired"]
    return {s: page.inner_text(f"{row} td.count-{s}") for s in statuses}


def test_the_page_is_served_without_a_key_and_api_calls_need_one(page: Any) -> None:
    assert page.title() == "Hourglass console"
    page.fill("#add-queue-name", "anything")
    page.click("#add-queue")
    page.wait_for_selector("#notice.error")
    assert "401 unauthorized" in page.inner_text("#notice")


def test_queues_view_shows_counts_by_status(page: Any, busy_queue: dict[str, Any]) -> None:
    sign_in(page, busy_queue["name"])
    assert counts(page, busy_queue["name"]) == {
        "pending": "3", "delivering": "0", "delivered": "1", "failed": "1", "cancelled": "0", "expired": "0",
    }  # fmt: skip
    assert page.evaluate("sessionStorage.getItem('hourglass.key')") == API_KEY
    shot(page, "queues")


def test_queues_view_lists_every_queue_without_typing_its_name(page: Any, client: Client, queue: str) -> None:
    page.fill("#key", API_KEY)
    page.click("#save-key")
    page.wait_for_selector(f'#queues-table tr[data-queue="{queue}"]')
    shown = page.eval_on_selector_all("#queues-table tbody tr", "rows => rows.map(r => r.dataset.queue)")
    assert shown == sorted(q.name for q in client.iter_queues())
    assert queue in page.eval_on_selector_all("#queue-select option", "options => options.map(o => o.value)")


def test_selecting_an_unknown_queue_says_so(page: Any, queue: str) -> None:
    sign_in(page, queue)
    page.fill("#add-queue-name", "no-such-queue-here")
    page.click("#add-queue")
    page.wait_for_selector("#notice.error")
    assert page.inner_text("#notice") == "queue no-such-queue-here does not exist"


def test_message_list_filters_by_status(page: Any, busy_queue: dict[str, Any]) -> None:
    sign_in(page, busy_queue["name"])
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    expect(page.locator("#messages-table tbody tr")).to_have_count(3)
    shown = page.eval_on_selector_all("#messages-table tbody tr", "rows => rows.map(r => r.dataset.id)")
    assert sorted(shown) == sorted(busy_queue["pending"])
    statuses = page.eval_on_selector_all("#messages-table td.status", "cells => cells.map(c => c.textContent)")
    assert statuses == ["pending"] * 3
    shot(page, "messages")


def test_timeline_shows_creation_attempts_and_delivery(page: Any, busy_queue: dict[str, Any]) -> None:
    sign_in(page, busy_queue["name"])
    page.click('nav button[data-view="messages"]')
    page.fill("#message-id", busy_queue["delivered"])
    page.click("#find-message")
    page.wait_for_selector("#timeline:not([hidden]) #timeline-events li")
    events = page.inner_text("#timeline-events")
    assert events.splitlines()[0].endswith(" created")
    assert "attempt 1: delivered HTTP 200" in events
    assert events.splitlines()[-1].endswith(" delivered")
    assert page.inner_text("#timeline-id") == busy_queue["delivered"]
    assert page.is_disabled("#cancel-message") and page.is_enabled("#redeliver-message")
    shot(page, "timeline")


def test_timeline_of_a_retried_message_shows_each_attempt(
    page: Any, client: Client, receiver: RawReceiver, queue: str
) -> None:
    receiver.script[f"/{queue}"] = [503]
    created = client.send(queue, "flaky")
    eventually(lambda: client.get_message(queue, created.id).status == "delivered")
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    page.fill("#message-id", created.id)
    page.click("#find-message")
    page.wait_for_selector("#timeline:not([hidden]) #timeline-events li")
    attempts = page.eval_on_selector_all(
        "#timeline-events li", "items => items.map(i => i.lastChild.textContent).filter(t => t.startsWith('attempt'))"
    )
    assert attempts[0].startswith("attempt 1: retry HTTP 503, retry at ")
    assert attempts[1:] == ["attempt 2: delivered HTTP 200"]
    shot(page, "timeline-retried")


def test_queues_view_shows_limits_and_paused_state(page: Any, client: Client, receiver: RawReceiver) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    target = {"type": "http", "url": receiver.url(f"/{name}")}
    client.put_queue(name, target=target, retry={"max_attempts": 3}, rate_limit=5, max_concurrency=2, timeout=10)
    client.pause_queue(name)
    sign_in(page, name)
    row = f'#queues-table tr[data-queue="{name}"]'
    assert page.inner_text(f"{row} td.limits") == "rate_limit=5, max_concurrency=2, timeout=10, retry 3x"
    assert page.inner_text(f"{row} td.state") == "paused"
    assert page.inner_text(f"{row} button.pause-toggle") == "Resume"


def test_a_queue_its_breaker_paused_says_why(page: Any, client: Client, receiver: RawReceiver) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    receiver.script[f"/{name}"] = [500]
    client.put_queue(
        name,
        target={"type": "http", "url": receiver.url(f"/{name}")},
        retry={"max_attempts": 1},
        circuit_breaker={"failure_ratio": 0.5, "min_attempts": 1, "window": 60},
    )
    client.send(name, "x", delay=0)
    eventually(lambda: client.get_queue(name).paused)
    sign_in(page, name)
    assert page.inner_text(f'#queues-table tr[data-queue="{name}"] td.state') == "paused (circuit_breaker)"


def test_bulk_cancel_cancels_the_selected_messages(page: Any, client: Client, busy_queue: dict[str, Any]) -> None:
    queue = busy_queue["name"]
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    expect(page.locator("#messages-table tbody tr")).to_have_count(3)
    page.check("#view-messages .select-all")
    page.click("#cancel-selected")
    expect(page.locator("#notice")).to_have_text("cancelled 3 of 3")
    assert {client.get_message(queue, mid).status for mid in busy_queue["pending"]} == {"cancelled"}
    shot(page, "bulk-cancel")


def test_failed_view_lists_failed_messages_with_their_error(page: Any, busy_queue: dict[str, Any]) -> None:
    sign_in(page, busy_queue["name"])
    page.click('nav button[data-view="failed"]')
    page.wait_for_selector(f'#failed-table tr[data-id="{busy_queue["failed"]}"]')
    row = page.inner_text(f'#failed-table tr[data-id="{busy_queue["failed"]}"]')
    assert "failed" in row and "400" in row
    shot(page, "failed")


def test_redeliver_selected_makes_failed_messages_pending(
    page: Any, client: Client, busy_queue: dict[str, Any]
) -> None:
    queue = busy_queue["name"]
    sign_in(page, queue)
    page.click('nav button[data-view="failed"]')
    page.wait_for_selector(f'#failed-table tr[data-id="{busy_queue["failed"]}"]')
    page.check(f'#failed-table tr[data-id="{busy_queue["failed"]}"] input.pick')
    page.click("#redeliver-selected")
    expect(page.locator("#notice")).to_have_text("redelivered 1 of 1")
    assert client.get_message(queue, busy_queue["failed"]).status in ("pending", "delivering", "delivered")


def test_redeliver_all_failed_runs_a_bulk_operation(page: Any, client: Client, busy_queue: dict[str, Any]) -> None:
    queue = busy_queue["name"]
    sign_in(page, queue)
    page.click('nav button[data-view="failed"]')
    page.wait_for_selector(f'#failed-table tr[data-id="{busy_queue["failed"]}"]')
    page.click("#redeliver-all")
    expect(page.locator("#notice")).to_have_text("redeliver succeeded: matched 1, applied 1, skipped 0")
    assert client.get_message(queue, busy_queue["failed"]).status in ("pending", "delivering", "delivered")
    expect(page.locator(f'#failed-table tr[data-id="{busy_queue["failed"]}"]')).to_have_count(0)
    shot(page, "redeliver-all")


def test_bulk_shift_moves_the_matching_messages_due_times(
    page: Any, client: Client, busy_queue: dict[str, Any]
) -> None:
    queue = busy_queue["name"]
    before = {mid: client.get_message(queue, mid).due_at for mid in busy_queue["pending"]}
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    page.select_option("#op-action", "shift")
    page.fill("#op-seconds", "600")
    page.click("#start-operation")
    expect(page.locator("#notice")).to_have_text("shift succeeded: matched 3, applied 3, skipped 0")
    after = {mid: client.get_message(queue, mid).due_at for mid in busy_queue["pending"]}
    assert {mid: (after[mid] - due).total_seconds() for mid, due in before.items()} == dict.fromkeys(before, 600.0)
    assert client.get_message(queue, busy_queue["delivered"]).status == "delivered"
    expect(page.locator("#messages-table tbody tr")).to_have_count(3)
    shot(page, "bulk-shift")


def test_bulk_cancel_with_a_due_window_leaves_the_others(page: Any, client: Client, queue: str) -> None:
    soon = client.send(queue, "soon", delay=600)
    late = client.send(queue, "late", delay=7200)
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    page.fill("#op-due-before", time_text(datetime.now(UTC) + timedelta(hours=1)))
    page.select_option("#op-action", "cancel")
    page.click("#start-operation")
    expect(page.locator("#notice")).to_have_text("cancel succeeded: matched 1, applied 1, skipped 0")
    assert (client.get_message(queue, soon.id).status, client.get_message(queue, late.id).status) == (
        "cancelled",
        "pending",
    )
    shown = page.eval_on_selector_all("#messages-table tbody tr", "rows => rows.map(r => r.dataset.id)")
    assert shown == [late.id]


def test_schedules_view_lists_next_occurrences(page: Any, client: Client, queue: str) -> None:
    made = client.put_schedule(queue, "nightly", cron="30 2 * * *", timezone="Europe/London", body={"job": "x"})
    sign_in(page, queue)
    page.click('nav button[data-view="schedules"]')
    row = '#schedules-table tr[data-schedule="nightly"]'
    page.wait_for_selector(row)
    assert page.inner_text(f"{row} td.next") == ", ".join(when(t) for t in made.next_due_at)
    assert page.inner_text(row).split("\t")[1:4] == ["30 2 * * *", "Europe/London", "active"]
    shot(page, "schedules")


def test_schedule_form_creates_a_schedule(page: Any, client: Client, queue: str) -> None:
    fill_schedule_form(page, queue, name="hourly", when="3600", body='{"tick": 1}')
    page.click("#save-schedule")
    expect(page.locator("#notice")).to_have_text("saved schedule hourly")
    stored = client.get_schedule(queue, "hourly")
    assert (stored.every, stored.cron, stored.timezone, stored.body) == (3600, None, "UTC", {"tick": 1})
    next_cell = '#schedules-table tr[data-schedule="hourly"] td.next'
    assert page.inner_text(next_cell) == ", ".join(when(t) for t in stored.next_due_at)


def test_schedule_form_shows_the_error_for_a_bad_cron(page: Any, client: Client, queue: str) -> None:
    fill_schedule_form(page, queue, name="broken", when="61 * * * *")
    page.click("#save-schedule")
    page.wait_for_selector("#notice.error")
    assert page.inner_text("#notice").startswith("400 ")
    assert "cron" in page.inner_text("#notice")
    assert list(client.iter_schedules(queue)) == []


def test_schedule_pause_and_resume_buttons(page: Any, client: Client, queue: str) -> None:
    client.put_schedule(queue, "daily", cron="0 9 * * *", body="d")
    sign_in(page, queue)
    page.click('nav button[data-view="schedules"]')
    row = '#schedules-table tr[data-schedule="daily"]'
    page.click(f"{row} button.schedule-toggle")
    expect(page.locator("#notice")).to_have_text("schedule daily paused")
    assert client.get_schedule(queue, "daily").paused is True
    assert page.inner_text(f"{row} button.schedule-toggle") == "Resume"
    shot(page, "schedule-paused")
    page.click(f"{row} button.schedule-toggle")
    expect(page.locator("#notice")).to_have_text("schedule daily resumed")
    assert client.get_schedule(queue, "daily").paused is False


def test_schedule_delete_button_deletes_it_after_confirming(page: Any, client: Client, queue: str) -> None:
    from hourglass_client import NotFound

    client.put_schedule(queue, "gone", every=600, body="g")
    sign_in(page, queue)
    page.click('nav button[data-view="schedules"]')
    page.once("dialog", lambda dialog: dialog.accept())
    page.click('#schedules-table tr[data-schedule="gone"] button.schedule-delete')
    expect(page.locator("#notice")).to_have_text("deleted schedule gone")
    expect(page.locator('#schedules-table tr[data-schedule="gone"]')).to_have_count(0)
    with pytest.raises(NotFound):
        client.get_schedule(queue, "gone")


def test_schedule_occurrences_button_lists_its_messages(page: Any, client: Client, queue: str) -> None:
    client.put_schedule(queue, "weekly", cron="0 8 * * MON", body="w")
    client.send(queue, "not an occurrence", delay=600)
    occurrences = [m.id for m in client.iter_messages(queue, schedule="weekly")]
    sign_in(page, queue)
    page.click('nav button[data-view="schedules"]')
    page.click('#schedules-table tr[data-schedule="weekly"] button.schedule-messages')
    expect(page.locator("#messages-table tbody tr")).to_have_count(len(occurrences))
    shown = page.eval_on_selector_all("#messages-table tbody tr", "rows => rows.map(r => r.dataset.id)")
    assert len(occurrences) == 1 and shown == occurrences
    assert page.input_value("#schedule-filter") == "weekly"


def test_lateness_chart_plots_each_delivered_message(page: Any, busy_queue: dict[str, Any]) -> None:
    sign_in(page, busy_queue["name"])
    page.click('nav button[data-view="lateness"]')
    page.wait_for_selector("#lateness-chart circle.point")
    assert page.locator("#lateness-chart circle.point").count() == 1
    assert page.inner_text("#lateness-summary").startswith("1 delivered: p50 ")
    assert page.locator("#lateness-chart .label-p99").count() == 1
    shot(page, "lateness")


def test_message_bodies_are_shown_as_text_never_as_html(page: Any, client: Client, queue: str) -> None:
    client.send(queue, "<img src=x onerror=\"document.title='owned'\">", delay=3600)
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    page.click("#apply-filter")
    page.wait_for_selector("#messages-table td.body")
    assert "<img" in page.inner_text("#messages-table td.body")
    assert page.locator("#messages-table img").count() == 0
    assert page.title() == "Hourglass console"


def test_pause_button_pauses_the_queue(page: Any, client: Client, queue: str) -> None:
    sign_in(page, queue)
    row = f'#queues-table tr[data-queue="{queue}"]'
    page.click(f"{row} button.pause-toggle")
    page.wait_for_selector(f'{row} button.pause-toggle:text("Resume")')
    assert client.get_queue(queue).paused is True
    assert page.inner_text(f"{row} td.state") == "paused"
    shot(page, "paused")


def test_new_queue_form_creates_a_queue_with_its_settings(page: Any, client: Client, receiver: RawReceiver) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    page.fill("#key", API_KEY)
    page.click("#save-key")
    page.click("#new-queue")
    page.fill("#qf-name", name)
    page.fill("#qf-target-url", receiver.url(f"/{name}"))
    page.fill("#qf-max-attempts", "4")
    page.fill("#qf-rate-limit", "10")
    page.fill("#qf-max-concurrency", "3")
    page.fill("#qf-failure-url", receiver.url(f"/{name}-failed"))
    page.fill("#qf-secret", "s3cret")
    page.fill("#qf-window-timezone", "Europe/Paris")
    page.fill("#qf-window-from", "09:00")
    page.fill("#qf-window-to", "18:00")
    for day in ("sat", "sun"):
        page.uncheck(f'input[name="qf-window-day"][value="{day}"]')
    page.fill("#qf-window-exclude", "2026-12-25, 2027-01-01")
    shot(page, "queue-form")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {name}")
    stored = client.get_queue(name).raw
    got = {k: stored[k] for k in ("rate_limit", "max_concurrency", "signing_secret_set", "failure_destination")}
    assert (stored["retry"]["max_attempts"], got) == (4, {
        "rate_limit": 10, "max_concurrency": 3, "signing_secret_set": True,
        "failure_destination": {"type": "http", "url": receiver.url(f"/{name}-failed"), "headers": {}},
    })  # fmt: skip
    assert stored["window"] == {
        "timezone": "Europe/Paris", "days": ["mon", "tue", "wed", "thu", "fri"], "from": "09:00", "to": "18:00",
        "exclude_dates": ["2026-12-25", "2027-01-01"],
    }  # fmt: skip
    row = f'#queues-table tr[data-queue="{name}"]'
    assert page.inner_text(f"{row} td.limits") == (
        "rate_limit=10, max_concurrency=3, timeout=15, retry 4x, "
        "window 09:00\N{EN DASH}18:00 Europe/Paris mon\N{EN DASH}fri, not 2026-12-25 2027-01-01"
    )
    assert page.is_hidden("#queue-form")


def test_timeline_shows_each_attempts_status_code_and_response_body(page: Any, client: Client) -> None:
    replying = RawReceiver(reply=b'{"error": "out of stock"}').start()
    try:
        name = f"ui-{uuid.uuid4().hex[:8]}"
        target = {"type": "http", "url": replying.url(f"/{name}")}
        client.put_queue(name, target=target, retry={"max_attempts": 2, "backoff_base": 0.2, "backoff_max": 1})
        replying.script[f"/{name}"] = [503]
        created = client.send(name, {"sku": 7})
        eventually(lambda: client.get_message(name, created.id).status == "delivered")
    finally:
        replying.stop()
    sign_in(page, name)
    page.click('nav button[data-view="messages"]')
    page.fill("#message-id", created.id)
    page.click("#find-message")
    page.wait_for_selector("#timeline:not([hidden]) li.attempt pre.response")
    attempts = page.locator("#timeline-events li.attempt")
    expect(attempts).to_have_count(2)
    assert attempts.nth(0).locator("span").nth(1).inner_text().startswith("attempt 1: retry HTTP 503")
    assert attempts.nth(1).locator("span").nth(1).inner_text() == "attempt 2: delivered HTTP 200"
    bodies = page.eval_on_selector_all("#timeline-events pre.response", "els => els.map(e => e.textContent)")
    assert bodies == ['{"error": "out of stock"}'] * 2
    shot(page, "timeline-response")


def test_deliver_now_in_the_timeline_ends_showing_the_message_delivered(page: Any, client: Client, queue: str) -> None:
    created = client.send(queue, {"n": 1}, delay=3600)
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    page.click(f'#messages-table tr[data-id="{created.id}"] button.open-timeline')
    page.wait_for_selector("#timeline:not([hidden])")
    page.click("#deliver-now-message")
    # The panel and the row follow the message until its attempt ends, with no refresh.
    expect(page.locator('#timeline-doc dd[data-key="status"]')).to_have_text("delivered")
    assert page.inner_text('#timeline-doc dd[data-key="attempts"]') == "1"
    row = f'#messages-table tr[data-id="{created.id}"]'
    expect(page.locator(f"{row} td.status")).to_have_text("delivered")
    expect(page.locator('#status-tabs button[data-status="delivered"]')).to_have_text("delivered (1)")
    assert page.eval_on_selector_all(f"{row} td.actions button", "bs => bs.map(b => b.textContent)") == ["Redeliver"]
    shown = page.eval_on_selector_all("#timeline button", "bs => bs.filter(b => !b.hidden).map(b => b.textContent)")
    assert shown == ["Redeliver", "Close"]
    shot(page, "deliver-now-followed")


def test_the_queue_form_names_every_bad_field_at_once_in_words(page: Any) -> None:
    page.fill("#key", API_KEY)
    page.click("#save-key")
    page.click("#new-queue")
    page.fill("#qf-name", "my queue!")
    page.fill("#qf-target-url", "example.com/hook")
    page.fill("#qf-max-attempts", "0")
    page.fill("#qf-window-from", "9am")
    page.click("#save-queue")
    expect(page.locator("#qf-error li")).to_have_text([
        "Name: must be 1 to 64 letters, digits, hyphens (-) or underscores (_), with no spaces",
        "URL: must be a web address starting with http:// or https://",
        "Max attempts: must be a whole number from 1 to 100",
        "From (HH:MM): must be a 24-hour time such as 09:00",
        "To (HH:MM): is needed for a window",
    ])  # fmt: skip
    marked = page.eval_on_selector_all("#queue-form .invalid", "els => els.map(e => e.id)")
    assert marked == ["qf-name", "qf-target-url", "qf-max-attempts", "qf-window-from", "qf-window-to"]
    notice = "Not saved: 5 fields need a fix: Name, URL, Max attempts, From (HH:MM), To (HH:MM)."
    assert page.inner_text("#notice") == notice
    shot(page, "queue-form-problems")
