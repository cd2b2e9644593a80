"""The console's longer flows in headless Chromium against the local runtime (`make test-console`): editing
and deleting queues, status tabs and order, search, per-message actions, purge, auto-refresh, notices and
charts. `make test` runs the representative ones (tests/clients/test_console_browser.py); screenshots go to
tests/artifacts/console/."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hourglass_client import Client, NotFound

from tests.clients.conftest import RawReceiver, eventually, hold_a_key
from tests.clients.test_console_browser import (
    ARTIFACTS,
    browser,
    busy_queue,
    expect,
    fill_schedule_form,
    page,
    shot,
    sign_in,
    tab,
    when,
)

__all__ = ["browser", "busy_queue", "page"]  # fixtures used by name
pytestmark = pytest.mark.console


def statuses(client: Client, queue: str, ids: list[str]) -> set[str]:
    return {client.get_message(queue, mid).status for mid in ids}


def edit_queue_with_a_secret(page: Any, client: Client, receiver: RawReceiver) -> str:
    """A queue with a signing secret and a rate limit, its edit form open and the rate limit changed to 50."""
    name = f"ui-{uuid.uuid4().hex[:8]}"
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")}, signing_secret="old", rate_limit=5)
    sign_in(page, name)
    page.click(f'#queues-table tr[data-queue="{name}"] button.edit-queue')
    assert page.input_value("#qf-rate-limit") == "5" and page.is_visible("#qf-secret-note")
    page.fill("#qf-rate-limit", "50")
    return name


def test_editing_a_queue_with_a_secret_keeps_it_without_typing_it(
    page: Any, client: Client, receiver: RawReceiver
) -> None:
    # The API never returns the secret, and a PUT that leaves it out keeps it (docs/authentication.md).
    name = edit_queue_with_a_secret(page, client, receiver)
    shot(page, "queue-edit-secret")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {name}")
    stored = client.get_queue(name).raw
    assert (stored["rate_limit"], stored["signing_secret_set"], stored["target"]["url"]) == (
        50, True, receiver.url(f"/{name}"),
    )  # fmt: skip


def test_editing_a_queue_removes_its_secret_when_asked(page: Any, client: Client, receiver: RawReceiver) -> None:
    name = edit_queue_with_a_secret(page, client, receiver)
    page.check("#qf-remove-secret")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {name}")
    stored = client.get_queue(name).raw
    assert (stored["rate_limit"], stored["signing_secret_set"]) == (50, False)


def test_deleting_a_queue_says_what_it_cancels_and_asks_first(page: Any, client: Client, queue: str) -> None:
    client.send_batch(queue, [{"body": n, "delay": 3600} for n in range(2)])
    sign_in(page, queue)
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click(f'#queues-table tr[data-queue="{queue}"] button.delete-queue')
    expect(page.locator("#notice")).to_have_text(f"queue {queue} kept")
    assert asked[0].startswith(f"Delete queue {queue}? This cancels its 2 pending message(s)")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f'#queues-table tr[data-queue="{queue}"] button.delete-queue')
    expect(page.locator("#notice")).to_have_text(f"deleted queue {queue}: 2 pending message(s) cancelled")
    expect(page.locator(f'#queues-table tr[data-queue="{queue}"]')).to_have_count(0)
    with pytest.raises(NotFound):
        client.get_queue(queue)


def test_status_tabs_show_counts_and_pending_is_sorted_by_due(page: Any, client: Client, queue: str) -> None:
    made = {delay: client.send(queue, f"in {delay}", delay=delay).id for delay in (300, 100, 200)}
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    labels = page.eval_on_selector_all("#status-tabs button", "tabs => tabs.map(t => t.textContent)")
    assert labels[:3] == ["all (3)", "pending (3)", "delivering (0)"]
    shown = page.eval_on_selector_all("#messages-table tbody tr", "rows => rows.map(r => r.dataset.id)")
    assert shown == [made[100], made[200], made[300]]
    shot(page, "status-tabs")


def test_a_message_is_found_by_its_dedup_id(page: Any, client: Client, queue: str) -> None:
    client.send(queue, "other", delay=600)
    wanted = client.send(queue, "wanted", delay=600, dedup_id="order-42")
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    page.fill("#message-id", "order-42")
    page.click("#find-message")
    expect(page.locator("#timeline-id")).to_have_text(wanted.id)
    expect(page.locator("#notice")).to_have_text(f"dedup id order-42 is message {wanted.id}")


def test_row_actions_deliver_now_cancel_and_redeliver(page: Any, client: Client, busy_queue: dict[str, Any]) -> None:
    queue = busy_queue["name"]
    first, second = busy_queue["pending"][:2]
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    page.click(f'#messages-table tr[data-id="{first}"] button.deliver-now')
    expect(page.locator("#notice")).to_have_text(f"delivering now: {first}")
    eventually(lambda: client.get_message(queue, first).status == "delivered")
    page.click(f'#messages-table tr[data-id="{second}"] button.cancel')
    expect(page.locator("#notice")).to_have_text(f"cancelled {second}")
    assert client.get_message(queue, second).status == "cancelled"
    tab(page, "failed")
    page.click(f'#messages-table tr[data-id="{busy_queue["failed"]}"] button.redeliver')
    expect(page.locator("#notice")).to_have_text(f"redelivered {busy_queue['failed']}")
    assert client.get_message(queue, busy_queue["failed"]).status in ("pending", "delivering", "delivered")


def test_purge_cancels_every_pending_message_with_progress(page: Any, client: Client, queue: str) -> None:
    pending = [m.id for m in client.send_batch(queue, [{"body": n, "delay": 3600} for n in range(25)])]
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.click("#purge")
    expect(page.locator("#notice")).to_have_text("purge succeeded: cancelled 25 of 25 pending message(s)")
    assert asked == [f"Purge {queue}? This cancels all 25 pending message(s). This cannot be undone."]
    assert page.eval_on_selector("#purge-progress", "bar => [bar.value, bar.max, bar.hidden]") == [25, 25, False]
    assert page.inner_text("#purge-status") == "purge succeeded: 25 of 25 cancelled"
    assert statuses(client, queue, pending) == {"cancelled"}
    shot(page, "purge")


def test_a_views_notice_stays_on_its_view(page: Any, queue: str) -> None:
    sign_in(page, queue)
    page.click('nav button[data-view="schedules"]')
    expect(page.locator("#notice")).to_have_text("No schedules on this queue.")
    page.click('nav button[data-view="lateness"]')
    page.wait_for_selector("#lateness-summary:text('No delivered messages yet.')")
    assert page.inner_text("#notice") == ""


def test_auto_refresh_updates_counts_until_paused(page: Any, client: Client, queue: str) -> None:
    page.goto(page.url.split("?")[0])  # the console as a user opens it: refreshing
    assert page.inner_text("#auto-refresh") == "Pause auto-refresh"
    sign_in(page, queue)
    row = f'#queues-table tr[data-queue="{queue}"]'
    client.send(queue, "new", delay=3600)
    # Nothing clicked: the next refresh (every 5 s) counts the new message.
    expect(page.locator(f"{row} td.count-pending")).to_have_text("1", timeout=15_000)
    page.click("#auto-refresh")
    assert page.inner_text("#auto-refresh") == "Resume auto-refresh"
    client.send(queue, "unseen", delay=3600)
    page.wait_for_timeout(6_000)  # longer than a refresh period
    assert page.inner_text(f"{row} td.count-pending") == "1"
    assert page.inner_text("#refreshed-at") == "auto-refresh paused"


def test_charts_have_time_and_value_axes_for_the_hour_and_the_day(page: Any, busy_queue: dict[str, Any]) -> None:
    queue = busy_queue["name"]
    sign_in(page, queue)
    page.click('nav button[data-view="charts"]')
    page.wait_for_selector(f'#view-charts[data-drawn="{queue}:hour"]')
    axes = "c => [c.querySelector('.x-title').textContent, c.querySelector('.y-title').textContent]"
    titles = page.eval_on_selector_all("#view-charts svg", f"charts => charts.map({axes})")
    assert titles == [["time (UTC)", y] for y in ("per minute", "per minute", "ms", "messages")]
    ticks = page.eval_on_selector_all("#chart-deliveries .x-tick", "ts => ts.map(t => t.textContent)")
    assert len(ticks) >= 6 and all(len(t) == 5 and t[2] == ":" for t in ticks)
    assert page.get_attribute("#chart-deliveries path.series-delivered", "d").count("L") >= 1
    assert "from the local runtime" in page.inner_text("#chart-source")
    shot(page, "charts-hour")
    page.click('#chart-range button[data-range="day"]')
    page.wait_for_selector(f'#view-charts[data-drawn="{queue}:day"]')
    assert "per 10 minutes" in page.inner_text("#chart-source")
    shot(page, "charts-day")


def test_a_deferred_messages_detail_shows_its_next_attempt_and_its_own_window(
    page: Any, client: Client, queue: str
) -> None:
    # A window that opened a minute ago closes in one: the next opening is tomorrow at this minute.
    now = datetime.now(UTC)
    start, end = (now + timedelta(minutes=m) for m in (-1, 1))
    window = {"timezone": "UTC", "from": f"{start:%H:%M}", "to": f"{end:%H:%M}", "exclude_dates": [f"{now:%Y-%m-%d}"]}
    created = client.send(queue, {"n": 1}, window=window)
    shown = client.get_message(queue, created.id).raw
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    page.fill("#message-id", created.id)
    page.click("#find-message")
    page.wait_for_selector("#timeline:not([hidden])")
    assert page.inner_text('#timeline-doc dd[data-key="next_attempt_at"]') == shown["next_attempt_at"]
    assert page.inner_text('#timeline-doc dd[data-key="window"]') == (
        f"{start:%H:%M}\N{EN DASH}{end:%H:%M} UTC every day, not {now:%Y-%m-%d}"
    )
    shot(page, "message-window")


def edit_queue(page: Any, name: str) -> None:
    sign_in(page, name)
    page.click(f'#queues-table tr[data-queue="{name}"] button.edit-queue')


def test_the_queue_form_sets_a_circuit_breaker_and_the_row_shows_it(page: Any, client: Client, queue: str) -> None:
    edit_queue(page, queue)
    page.fill("#qf-breaker-ratio", "0.25")
    page.fill("#qf-breaker-min-attempts", "10")
    page.fill("#qf-breaker-window", "120")
    shot(page, "queue-form-breaker")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {queue}")
    assert client.get_queue(queue).raw["circuit_breaker"] == {"failure_ratio": 0.25, "min_attempts": 10, "window": 120}
    limits = page.inner_text(f'#queues-table tr[data-queue="{queue}"] td.limits')
    assert limits.endswith(
        "breaker pauses at \N{GREATER-THAN OR EQUAL TO}25% failed of \N{GREATER-THAN OR EQUAL TO}10 attempts in 120 s"
    )


def test_save_takes_a_mouse_click_after_a_screenshot_with_a_dozen_queues_listed(
    page: Any, client: Client, receiver: RawReceiver
) -> None:
    # A dozen queues make the page tall enough for Edit to scroll the form to the top of the window; a
    # full-page screenshot taken then, with a field focused, must leave Save where the mouse is aimed (`shot`).
    names = [f"ui-{uuid.uuid4().hex[:8]}" for _ in range(12)]
    for name in names:
        client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")})
    edit_queue(page, names[0])
    page.fill("#qf-rate-limit", "7")
    assert page.evaluate("window.scrollY") > 0
    shot(page, "queue-form-scrolled")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {names[0]}")
    assert client.get_queue(names[0]).raw["rate_limit"] == 7


def test_emptying_the_breaker_fields_removes_the_breaker(page: Any, client: Client, receiver: RawReceiver) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    breaker = {"failure_ratio": 0.5, "min_attempts": 20, "window": 300}
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")}, circuit_breaker=breaker)
    edit_queue(page, name)
    assert [page.input_value(f"#qf-breaker-{f}") for f in ("ratio", "min-attempts", "window")] == ["0.5", "20", "300"]
    for field in ("ratio", "min-attempts", "window"):
        page.fill(f"#qf-breaker-{field}", "")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {name}")
    assert client.get_queue(name).raw["circuit_breaker"] is None


def test_a_breaker_out_of_bounds_is_refused_before_saving_naming_the_field(
    page: Any, client: Client, queue: str
) -> None:
    edit_queue(page, queue)
    page.fill("#qf-breaker-ratio", "2")
    page.click("#save-queue")
    expect(page.locator("#qf-error")).to_have_text("Failure ratio (0.01\N{EN DASH}1): must be a number from 0.01 to 1")
    page.fill("#qf-breaker-ratio", "0.5")
    page.fill("#qf-breaker-min-attempts", "2.5")
    page.click("#save-queue")
    expect(page.locator("#qf-error")).to_have_text("Min attempts: must be a whole number from 1 to 100000")
    assert client.get_queue(queue).raw["circuit_breaker"] is None


def test_the_apis_refusal_of_a_queue_form_is_shown_on_its_field(page: Any, client: Client, queue: str) -> None:
    edit_queue(page, queue)
    page.fill("#qf-breaker-ratio", "0.5")
    # Only the API knows which SQS queues the stack allows.
    page.select_option("#qf-target-type", "sqs")
    page.fill("#qf-target-url", "https://sqs.us-east-1.amazonaws.com/123456789012/not-allowed")
    page.click("#save-queue")
    expect(page.locator("#qf-error li")).to_have_count(1)
    assert page.inner_text("#qf-error li").startswith("URL: ")
    assert page.eval_on_selector_all("#queue-form .invalid", "els => els.map(e => e.id)") == ["qf-target-url"]
    expect(page.locator("#notice")).to_contain_text("400 ")
    assert client.get_queue(queue).raw["circuit_breaker"] is None
    shot(page, "queue-form-api-refusal")


def test_editing_a_queue_keeps_what_the_form_does_not_show(page: Any, client: Client, receiver: RawReceiver) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    target = {"type": "http", "url": receiver.url(f"/{name}"), "headers": {"X-Tenant": "7"}}
    breaker = {"failure_ratio": 0.5, "min_attempts": 20, "window": 300}
    flow = {"flow_control": {"key_rate_limit": 2}}
    client.put_queue(name, target=target, ttl=7200, circuit_breaker=breaker, settings=flow)
    before = client.get_queue(name).raw
    edit_queue(page, name)
    page.fill("#qf-rate-limit", "9")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {name}")
    after = client.get_queue(name).raw
    kept = ("target", "ttl", "circuit_breaker", "flow_control")
    assert (after["rate_limit"], {k: after[k] for k in kept}) == (9, {k: before[k] for k in kept})


def test_a_queue_its_breaker_paused_says_why_above_the_table_and_resumes(
    page: Any, client: Client, receiver: RawReceiver
) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    receiver.script[f"/{name}"] = [500]
    breaker = {"failure_ratio": 0.5, "min_attempts": 1, "window": 60}
    target = {"type": "http", "url": receiver.url(f"/{name}")}
    client.put_queue(name, target=target, retry={"max_attempts": 1}, circuit_breaker=breaker)
    client.send(name, "x", delay=0)
    eventually(lambda: client.get_queue(name).paused)
    sign_in(page, name)
    alert = f'#tripped p[data-queue="{name}"]'
    assert page.inner_text(f"{alert} .reason") == (
        "paused itself (circuit_breaker): at least 50% of its attempts in 60 s (1 or more) failed or were retried."
        " Fix the target, then resume it: counting starts afresh."
    )
    shot(page, "queue-tripped")
    page.click(f"{alert} button.resume-tripped")
    expect(page.locator("#notice")).to_have_text(f"queue {name} resumed")
    resumed = client.get_queue(name).raw
    assert (resumed["paused"], resumed["paused_reason"]) == (False, None)
    expect(page.locator(alert)).to_have_count(0)


def test_the_schedule_form_sets_catch_up_jitter_and_a_window(page: Any, client: Client, queue: str) -> None:
    fill_schedule_form(page, queue, name="morning", when="0 7 * * *", timezone="Europe/Paris", body='{"wake": true}')
    page.select_option("#schedule-catch-up", "latest")
    page.fill("#schedule-jitter", "90")
    page.fill("#sf-window-timezone", "America/New_York")
    page.fill("#sf-window-from", "08:00")
    page.fill("#sf-window-to", "20:00")
    page.uncheck('input[name="sf-window-day"][value="sun"]')
    page.fill("#sf-window-exclude", "2026-12-25")
    shot(page, "schedule-form")
    page.click("#save-schedule")
    expect(page.locator("#notice")).to_have_text("saved schedule morning")
    stored = client.get_schedule(queue, "morning").raw
    assert (stored["catch_up"], stored["jitter"], stored["window"]) == ("latest", 90, {
        "timezone": "America/New_York", "days": ["mon", "tue", "wed", "thu", "fri", "sat"],
        "from": "08:00", "to": "20:00", "exclude_dates": ["2026-12-25"],
    })  # fmt: skip
    row = '#schedules-table tr[data-schedule="morning"]'
    assert page.inner_text(f"{row} td.policy") == "latest \N{MIDDLE DOT} up to 90 s"
    window = "08:00\N{EN DASH}20:00 America/New_York mon\N{EN DASH}sat, not 2026-12-25"
    assert page.inner_text(f"{row} td.window").splitlines()[0] == window
    next_due = client.get_schedule(queue, "morning").next_due_at
    assert page.inner_text(f"{row} td.next") == ", ".join(when(t) for t in next_due)
    shot(page, "schedule-policies")


def test_editing_a_schedule_changes_its_policies_and_keeps_the_rest(
    page: Any, client: Client, receiver: RawReceiver, queue: str
) -> None:
    target = {"type": "http", "url": receiver.url(f"/{queue}-report"), "headers": {"X-Report": "daily"}}
    end = datetime.now(UTC) + timedelta(days=30)
    client.put_schedule(queue, "report", every=3600, body={"r": 1}, target=target, end_at=end, catch_up="all", jitter=5)
    before = client.get_schedule(queue, "report").raw
    sign_in(page, queue)
    page.click('nav button[data-view="schedules"]')
    page.click('#schedules-table tr[data-schedule="report"] button.schedule-edit')
    assert (page.input_value("#schedule-when"), page.input_value("#schedule-jitter")) == ("3600", "5")
    assert page.input_value("#schedule-catch-up") == "all"
    page.select_option("#schedule-catch-up", "skip")
    page.fill("#schedule-jitter", "600")
    assert page.inner_text("#sf-kept") == f"Kept as they are (this form does not edit them): end_at {before['end_at']}"
    shot(page, "schedule-edit")
    page.click("#save-schedule")
    expect(page.locator("#notice")).to_have_text("saved schedule report")
    after = client.get_schedule(queue, "report").raw
    kept = ("target", "end_at", "body", "every", "window")
    assert (after["catch_up"], after["jitter"]) == ("skip", 600)
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}


def test_a_jitter_out_of_bounds_is_refused_before_saving_naming_the_field(
    page: Any, client: Client, queue: str
) -> None:
    fill_schedule_form(page, queue, name="spread", when="600", body="x", jitter="3601")
    page.click("#save-schedule")
    refused = "Jitter (s, 0\N{EN DASH}3600): must be a whole number from 0 to 3600"
    expect(page.locator("#sf-error")).to_have_text(refused)
    assert list(client.iter_schedules(queue)) == []


def open_timeline(page: Any, queue: str, message_id: str) -> None:
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    page.fill("#message-id", message_id)
    page.click("#find-message")
    page.wait_for_selector("#timeline:not([hidden])")


def test_a_cancel_in_the_timeline_is_dated_and_leaves_no_action(page: Any, client: Client, queue: str) -> None:
    created = client.send(queue, "x", delay=3600)
    open_timeline(page, queue, created.id)
    page.click("#cancel-message")
    expect(page.locator('#timeline-doc dd[data-key="status"]')).to_have_text("cancelled")
    last = page.locator("#timeline-events li").last.inner_text()
    shown = page.eval_on_selector_all("#timeline button", "bs => bs.filter(b => !b.hidden).map(b => b.textContent)")
    assert (last, shown) == (f"{shown_time(client, queue, created.id)} cancelled", ["Close"])
    shot(page, "timeline-cancelled")


def shown_time(client: Client, queue: str, message_id: str) -> str:
    """The message's `finished_at` as the timeline writes a time (`2026-11-21 10:00:00Z`)."""
    return re.sub(r"\.\d+Z$", "Z", client.get_message(queue, message_id).raw["finished_at"].replace("T", " "))


def test_a_cancel_made_elsewhere_is_dated_in_the_timeline(page: Any, client: Client, queue: str) -> None:
    created = client.send(queue, "x", delay=3600)
    client.cancel(queue, created.id)
    open_timeline(page, queue, created.id)
    last = page.locator("#timeline-events li").last.inner_text()
    assert last == f"{shown_time(client, queue, created.id)} cancelled"


def test_the_due_entry_of_a_waiting_message_says_it_is_not_handed_off_yet(
    page: Any, client: Client, queue: str
) -> None:
    created = client.send(queue, "later", delay=3600)
    open_timeline(page, queue, created.id)
    due = page.locator("#timeline-events li").nth(1).locator("span").nth(1).inner_text()
    assert due == "due in 1 h (waiting: a sweep hands it to the timer queue shortly before)"


def test_edit_on_a_lower_row_opens_the_form_in_view(page: Any, client: Client, receiver: RawReceiver) -> None:
    names = [f"zz-{uuid.uuid4().hex[:6]}-{n:02}" for n in range(12)]
    for name in names:
        client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")})
    page.set_viewport_size({"width": 1400, "height": 480})
    sign_in(page, names[-1])
    page.click(f'#queues-table tr[data-queue="{names[-1]}"] button.edit-queue')
    expect(page.locator("#queue-form-title")).to_have_text(f"Edit queue {names[-1]}")
    expect(page.locator("#queue-form-title")).to_be_in_viewport()
    assert page.evaluate("document.activeElement.id") == "qf-target-url"
    page.screenshot(path=str(ARTIFACTS / "queue-edit-lower-row.png"))


def test_limits_show_flow_control_and_due_shows_the_next_attempt_from_now(
    page: Any, client: Client, receiver: RawReceiver
) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    # A window that opened a minute ago closes in one and skips today: the next opening is tomorrow.
    now = datetime.now(UTC)
    start, end = (now + timedelta(minutes=m) for m in (-1, 1))
    window = {"timezone": "UTC", "from": f"{start:%H:%M}", "to": f"{end:%H:%M}", "exclude_dates": [f"{now:%Y-%m-%d}"]}
    flow = {"flow_control": {"key_rate_limit": 2, "key_max_concurrency": 1}}
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")}, settings=flow, window=window)
    created = client.send(name, "deferred")
    shown = client.get_message(name, created.id).raw
    sign_in(page, name)
    limits = page.inner_text(f'#queues-table tr[data-queue="{name}"] td.limits')
    assert "per flow_key key_rate_limit=2, key_max_concurrency=1" in limits
    page.click('nav button[data-view="messages"]')
    tab(page, "pending")
    due = page.locator(f'#messages-table tr[data-id="{created.id}"] td.due div')
    expect(due).to_have_count(2)
    assert re.fullmatch(re.escape(when_iso(shown["due_at"])) + r" \((\d+ s ago|now)\)", due.nth(0).inner_text())
    next_attempt = re.escape(f"next attempt {when_iso(shown['next_attempt_at'])}")
    assert re.fullmatch(next_attempt + r" \(in 2[34] h\)", due.nth(1).inner_text())
    shot(page, "due-next-attempt")


def when_iso(text: str) -> str:
    return when(datetime.fromisoformat(text.replace("Z", "+00:00")))


# --- ordered queues (v1.3) ------------------------------------------------------------------------------


def save_queue_form(page: Any, name: str) -> None:
    """Saves the open queue form from the keyboard (see the breaker's test for why not a click)."""
    page.focus("#save-queue")
    page.keyboard.press("Enter")
    expect(page.locator("#notice")).to_have_text(f"saved queue {name}")


def test_the_queue_form_sets_ordering_and_the_row_shows_it(page: Any, client: Client, queue: str) -> None:
    edit_queue(page, queue)
    assert page.is_disabled("#qf-ordering-on-failure")
    page.select_option("#qf-ordering", "flow_key")
    page.select_option("#qf-ordering-on-failure", "hold")
    shot(page, "queue-form-ordering")
    save_queue_form(page, queue)
    assert client.get_queue(queue).ordering == {"by": "flow_key", "on_failure": "hold"}
    limits = page.inner_text(f'#queues-table tr[data-queue="{queue}"] td.limits')
    assert limits.endswith("ordered by flow_key, hold on failure")


def test_editing_an_ordered_queue_keeps_its_ordering_and_none_removes_it(
    page: Any, client: Client, receiver: RawReceiver
) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    target = {"type": "http", "url": receiver.url(f"/{name}")}
    client.put_queue(name, target=target, ordering={"by": "flow_key", "on_failure": "hold"})
    edit_queue(page, name)
    assert (page.input_value("#qf-ordering"), page.input_value("#qf-ordering-on-failure")) == ("flow_key", "hold")
    page.fill("#qf-rate-limit", "9")
    save_queue_form(page, name)
    assert client.get_queue(name).ordering == {"by": "flow_key", "on_failure": "hold"}
    page.click(f'#queues-table tr[data-queue="{name}"] button.edit-queue')
    page.select_option("#qf-ordering", "")
    save_queue_form(page, name)
    assert client.get_queue(name).ordering is None


def open_message(page: Any, queue: str, message_id: str) -> None:
    sign_in(page, queue)
    page.click('nav button[data-view="messages"]')
    page.fill("#message-id", message_id)
    page.click("#find-message")
    expect(page.locator("#timeline-id")).to_have_text(message_id)


def test_a_waiting_messages_detail_links_what_blocks_it(page: Any, client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, "tenant 7")
    open_message(page, held.queue, held.waiting)
    assert page.inner_text('#timeline-doc dd[data-key="blocked_by"]') == held.failed
    row = f'#messages-table tr[data-id="{held.waiting}"] td.due .blocked-by'
    expect(page.locator(row)).to_have_text(f"waits behind {held.failed}")
    shot(page, "message-blocked-by")
    page.click('#timeline-doc dd[data-key="blocked_by"] button.open-message')
    expect(page.locator("#timeline-id")).to_have_text(held.failed)


def test_a_held_key_is_released_from_the_message_detail(page: Any, client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, "tenant 7")
    open_message(page, held.queue, held.waiting)
    state = page.locator("#timeline-key .key-state")
    expect(state.locator(".key-waiting")).to_have_text("1 waiting")
    expect(state.locator(".key-held")).to_have_text("held after a failure")
    assert page.inner_text("#timeline-key .key-head button.open-message") == held.failed
    shot(page, "timeline-key-held")
    page.click("#timeline-key button.release-key")
    expect(page.locator("#notice")).to_have_text(f'released flow key "tenant 7" of {held.queue}')
    assert client.key(held.queue, "tenant 7").held is False
    eventually(lambda: client.get_message(held.queue, held.waiting).status == "delivered")


def test_a_key_looked_up_by_name_shows_its_state_and_releases(page: Any, client: Client, receiver: RawReceiver) -> None:
    held = hold_a_key(client, receiver, "tenant 7")
    sign_in(page, held.queue)
    page.click('nav button[data-view="messages"]')
    page.fill("#key-lookup", "tenant 7")
    page.click("#show-key")
    expect(page.locator("#key-view .key-held")).to_have_text("held after a failure")
    assert page.inner_text("#key-view-name") == '"tenant 7"'
    page.click("#key-view button.release-key")
    expect(page.locator("#notice")).to_have_text(f'released flow key "tenant 7" of {held.queue}')
    expect(page.locator("#key-view .key-held")).to_have_text("not held")
    expect(page.locator("#key-view button.release-key")).to_have_count(0)
    assert client.key(held.queue, "tenant 7").held is False
