"""The console's longer flows in headless Chromium against the local runtime (`make test-console`): editing
and deleting queues, status tabs and order, search, per-message actions, purge, auto-refresh, notices and
charts. `make test` runs the representative ones (tests/clients/test_console_browser.py); screenshots go to
tests/artifacts/console/."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hourglass_client import Client, NotFound

from tests.clients.conftest import RawReceiver, eventually
from tests.clients.test_console_browser import browser, busy_queue, expect, page, shot, sign_in, tab

__all__ = ["browser", "busy_queue", "page"]  # fixtures used by name
pytestmark = pytest.mark.console


def statuses(client: Client, queue: str, ids: list[str]) -> set[str]:
    return {client.get_message(queue, mid).status for mid in ids}


def test_editing_a_queue_with_a_secret_asks_for_it_again(page: Any, client: Client, receiver: RawReceiver) -> None:
    name = f"ui-{uuid.uuid4().hex[:8]}"
    client.put_queue(name, target={"type": "http", "url": receiver.url(f"/{name}")}, signing_secret="old", rate_limit=5)
    sign_in(page, name)
    page.click(f'#queues-table tr[data-queue="{name}"] button.edit-queue')
    assert page.input_value("#qf-rate-limit") == "5" and page.is_visible("#qf-secret-note")
    page.fill("#qf-rate-limit", "50")
    page.click("#save-queue")
    expect(page.locator("#notice.error")).to_contain_text("signing_secret: type the secret again")
    expect(page.locator("#qf-error")).to_contain_text("signing_secret: type the secret again")
    assert client.get_queue(name).raw["rate_limit"] == 5
    shot(page, "queue-edit-secret")
    page.check("#qf-remove-secret")
    page.click("#save-queue")
    expect(page.locator("#notice")).to_have_text(f"saved queue {name}")
    stored = client.get_queue(name).raw
    assert (stored["rate_limit"], stored["signing_secret_set"], stored["target"]["url"]) == (
        50, False, receiver.url(f"/{name}"),
    )  # fmt: skip


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
