"""The `hourglass` CLI against the local runtime, configured from HOURGLASS_URL / HOURGLASS_API_KEY."""

from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hourglass.version import __version__
from hourglass_client import Client
from hourglass_client.cli import main

from tests.clients.conftest import API_KEY, RawReceiver, eventually
from tests.loopback import QuietHandler, base_url, serve


def lines(result: Result) -> list[Any]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_queues_put_then_get_shows_settings_and_counts(run: Any, receiver: RawReceiver) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    put = run("queues", "put", name, "--target-url", receiver.url("/cli"), "--max-attempts", "4", "--ttl", "90")
    assert put.exit_code == 0, put.output
    got = run("--json", "queues", "get", name)
    doc = json.loads(got.stdout)
    assert (doc["name"], doc["ttl"], doc["retry"]["max_attempts"]) == (name, 90, 4)
    assert doc["counts"] == dict.fromkeys(["pending", "delivering", "delivered", "failed", "cancelled", "expired"], 0)


def test_send_with_arguments_stores_a_json_body(run: Any, client: Client, queue: str) -> None:
    result = run("--json", "send", queue, '{"order": 1}', "--delay", "600", "--dedup-id", "cli-1")
    created = json.loads(result.stdout)
    stored = client.get_message(queue, created["id"])
    assert (stored.body, stored.dedup_id, stored.status) == ({"order": 1}, "cli-1", "pending")


def test_send_with_a_flow_key_and_priority_lists_by_key(run: Any, client: Client, queue: str) -> None:
    sent = run("--json", "send", queue, "1", "--delay", "600", "--flow-key", "t1", "--priority", "8")
    created = json.loads(sent.stdout)
    run("send", queue, "2", "--delay", "600", "--flow-key", "t2")
    listed = lines(run("--json", "list", queue, "--flow-key", "t1"))
    assert [(m["id"], m["flow_key"], m["priority"]) for m in listed] == [(created["id"], "t1", 8)]


def test_a_window_is_set_on_a_queue_and_defers_a_send(run: Any, receiver: RawReceiver) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    spec = "03:00-03:01 Pacific/Chatham except=2099-01-01"
    put = run("--json", "queues", "put", name, "--target-url", receiver.url("/cli"), "--window", spec)
    assert put.exit_code == 0, put.output
    assert json.loads(put.stdout)["window"]["timezone"] == "Pacific/Chatham"
    sent = run("--json", "send", name, '{"a": 1}', "--window", "00:00-00:00 sun")
    created = json.loads(sent.stdout)
    got = run("--json", "get", name, created["id"])
    assert json.loads(got.stdout)["window"]["days"] == ["sun"]


def test_send_body_text_is_kept_as_text(run: Any, client: Client, queue: str) -> None:
    created = json.loads(run("--json", "send", queue, "--body-text", "hello there", "--delay", "600").stdout)
    assert client.get_message(queue, created["id"]).body == "hello there"


def test_a_mistyped_json_body_is_an_error_and_sends_nothing(run: Any, client: Client, queue: str) -> None:
    result = run("send", queue, "{oops", "--delay", "600")
    assert (result.exit_code, "--body-text" in result.output) == (2, True)
    assert list(client.iter_messages(queue)) == []


def test_send_a_jsonl_file_in_batches(run: Any, client: Client, queue: str, tmp_path: Path) -> None:
    path = tmp_path / "messages.jsonl"
    path.write_text("".join(json.dumps({"body": {"n": n}, "delay": 600}) + "\n" for n in range(250)))
    result = run("send", queue, "--file", str(path))
    assert result.exit_code == 0, result.output
    assert "sent 250 messages" in result.stdout
    assert sorted(m.body["n"] for m in client.iter_messages(queue, page_size=1000)) == list(range(250))


def test_send_a_csv_file(run: Any, client: Client, queue: str, tmp_path: Path) -> None:
    path = tmp_path / "messages.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["body", "delay", "dedup_id"])
        writer.writerows([['{"n": 1}', "600", "csv-1"], ["plain text", "600", "csv-2"]])
    created = lines(run("--json", "send", queue, "--file", str(path)))
    bodies = [client.get_message(queue, c["id"]).body for c in created]
    assert bodies == [{"n": 1}, "plain text"]


def test_a_bad_file_line_is_a_usage_error_and_sends_nothing(
    run: Any, client: Client, queue: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"body": 1}\nnot json\n')
    result = run("send", queue, "--file", str(path))
    assert result.exit_code == 2
    assert "bad.jsonl:2" in result.output
    assert list(client.iter_messages(queue)) == []


def test_list_json_pages_through_every_message(run: Any, client: Client, queue: str) -> None:
    client.send_batch(queue, [{"body": n, "delay": 600} for n in range(30)])
    listed = lines(run("--json", "list", queue, "--status", "pending", "--limit", "0"))
    assert sorted(m["body"] for m in listed) == list(range(30))


def test_get_and_cancel(run: Any, client: Client, queue: str) -> None:
    created = client.send(queue, "x", delay=600)
    assert run("cancel", queue, created.id).exit_code == 0
    assert json.loads(run("--json", "get", queue, created.id).stdout)["status"] == "cancelled"


def test_api_errors_exit_1_with_the_code(run: Any) -> None:
    result = run("queues", "get", "missing-queue-xyz")
    assert result.exit_code == 1
    assert "404 not_found" in result.output


def test_without_a_url_the_cli_says_how_to_configure_it() -> None:
    result = CliRunner(env={"HOURGLASS_URL": ""}).invoke(main, ["queues", "get", "q"])
    assert result.exit_code == 2
    assert "HOURGLASS_URL" in result.output


def test_tail_prints_deliveries_and_failures_as_they_happen(
    run: Any, client: Client, receiver: RawReceiver, queue: str
) -> None:
    receiver.script[f"/{queue}"] = [200, 400]
    ok = client.send(queue, "ok", delay=2)
    bad = client.send(queue, "bad", delay=2.5)
    events = lines(run("--json", "tail", queue, "--interval", "0.3", "--count", "2", "--timeout", "30"))
    assert {(e["id"], e["event"]) for e in events} == {(ok.id, "delivered"), (bad.id, "failed")}


def test_tail_shows_retries(run: Any, client: Client, receiver: RawReceiver, queue: str) -> None:
    # A 3 s backoff: the message stays `pending` with one attempt long enough for a poll to see it.
    client.put_queue(queue, target={"type": "http", "url": receiver.url(f"/{queue}")}, retry={"backoff_base": 3})
    receiver.script[f"/{queue}"] = [503, 200]
    created = client.send(queue, "flaky", delay=2)
    events = lines(run("--json", "tail", queue, "--interval", "0.2", "--count", "2", "--timeout", "30"))
    assert [(e["id"], e["event"]) for e in events] == [(created.id, "retrying"), (created.id, "delivered")]
    eventually(lambda: client.get_message(queue, created.id).status == "delivered")


# --- v1.1 commands --------------------------------------------------------------------------------


def test_queues_list_shows_every_queue(run: Any, client: Client, queue: str) -> None:
    listed = lines(run("--json", "queues", "list"))
    assert [q["name"] for q in listed] == sorted(q.name for q in client.iter_queues())
    assert queue in [q["name"] for q in listed]


def test_queues_delete(run: Any, client: Client, queue: str) -> None:
    assert run("queues", "delete", queue, "--yes").exit_code == 0
    assert run("queues", "get", queue).exit_code == 1
    assert queue not in [q.name for q in client.iter_queues()]


def test_queues_pause_and_resume(run: Any, client: Client, queue: str) -> None:
    assert run("queues", "pause", queue).exit_code == 0
    assert client.get_queue(queue).paused is True
    assert run("queues", "resume", queue).exit_code == 0
    assert client.get_queue(queue).paused is False


def test_patch_reschedules_a_pending_message(run: Any, client: Client, queue: str) -> None:
    created = client.send(queue, "x", delay=600)
    patched = json.loads(run("--json", "patch", queue, created.id, "--delay", "1200", "--body", '{"v": 2}').stdout)
    stored = client.get_message(queue, created.id)
    assert (stored.body, patched["due_at"]) == ({"v": 2}, stored.raw["due_at"])
    assert created.due_at is not None and stored.due_at is not None and stored.due_at > created.due_at


def test_attempts_and_redeliver(run: Any, client: Client, receiver: RawReceiver, queue: str) -> None:
    receiver.script[f"/{queue}"] = [400, 200]
    created = client.send(queue, "once")
    eventually(lambda: client.get_message(queue, created.id).status == "failed")
    history = lines(run("--json", "attempts", queue, created.id))
    assert [(a["outcome"], a["status_code"]) for a in history] == [("failed", 400)]
    table = run("attempts", queue, created.id).stdout
    assert "failed" in table and "400" in table
    assert run("redeliver", queue, created.id).exit_code == 0
    eventually(lambda: client.get_message(queue, created.id).status == "delivered")


def test_redeliver_of_a_pending_message_is_a_409(run: Any, client: Client, queue: str) -> None:
    created = client.send(queue, "x", delay=600)
    result = run("redeliver", queue, created.id)
    assert result.exit_code == 1
    assert "409 conflict" in result.output


def test_operations_start_follow_cancels_pending(run: Any, client: Client, queue: str) -> None:
    created = client.send_batch(queue, [{"body": n, "delay": 600} for n in range(5)])
    result = run(
        "--json", "operations", "start", queue, "cancel", "--status", "pending", "--follow", "--poll", "0.2", "--yes"
    )
    op = json.loads(result.stdout)
    assert (op["status"], op["applied"]) == ("succeeded", 5)
    assert {client.get_message(queue, c.id).status for c in created} == {"cancelled"}


def test_operations_shift_then_get_follow(run: Any, client: Client, queue: str) -> None:
    created = client.send(queue, "x", delay=600)
    started = json.loads(run("--json", "operations", "start", queue, "shift", "--seconds", "300").stdout)
    followed = run("operations", "get", queue, started["id"], "--follow", "--poll", "0.2")
    assert f"{started['id']} shift succeeded: matched 1, applied 1, skipped 0" in followed.stdout
    moved = client.get_message(queue, created.id).due_at
    assert created.due_at is not None and moved is not None
    assert (moved - created.due_at).total_seconds() == 300


def test_operations_shift_without_seconds_is_a_usage_error(run: Any) -> None:
    result = run("operations", "start", "q", "shift")
    assert result.exit_code == 2
    assert "--seconds" in result.output


def test_schedules_put_list_delete(run: Any, client: Client, queue: str) -> None:
    made = run("--json", "schedules", "put", queue, "hourly", "--every", "3600", "--body", '{"tick": 1}')
    assert json.loads(made.stdout)["name"] == "hourly"
    listed = lines(run("--json", "schedules", "list", queue))
    assert [s["name"] for s in listed] == ["hourly"]
    assert run("schedules", "delete", queue, "hourly").exit_code == 0
    assert list(client.iter_schedules(queue)) == []


def test_schedules_get_shows_the_next_occurrences(run: Any, client: Client, queue: str) -> None:
    made = client.put_schedule(queue, "nightly", cron="30 2 * * *", timezone="Europe/London", body="n")
    assert (
        json.loads(run("--json", "schedules", "get", queue, "nightly").stdout)["next_due_at"] == made.raw["next_due_at"]
    )
    table = run("schedules", "get", queue, "nightly").stdout
    for due in made.next_due_at:
        assert due.strftime("%Y-%m-%d %H:%M:%S.000Z") in table
    assert "30 2 * * *" in table and "Europe/London" in table


def test_schedules_pause_and_resume(run: Any, client: Client, queue: str) -> None:
    client.put_schedule(queue, "daily", cron="0 9 * * *", body="d")
    assert json.loads(run("--json", "schedules", "pause", queue, "daily").stdout)["paused"] is True
    assert client.get_schedule(queue, "daily").paused is True
    assert run("schedules", "resume", queue, "daily").exit_code == 0
    assert client.get_schedule(queue, "daily").paused is False


def test_schedules_put_needs_exactly_one_of_cron_and_every(run: Any, client: Client, queue: str) -> None:
    result = run("schedules", "put", queue, "both", "--cron", "0 9 * * *", "--every", "3600", "--body", '"x"')
    assert result.exit_code == 2
    assert "--cron / --every: give exactly one" in result.output
    assert list(client.iter_schedules(queue)) == []


def test_schedule_occurrences_are_listed_with_schedule(run: Any, client: Client, queue: str) -> None:
    client.put_schedule(queue, "weekly", cron="0 8 * * MON", body="w")
    client.send(queue, "not an occurrence", delay=600)
    listed = lines(run("--json", "list", queue, "--schedule", "weekly"))
    assert [(m["schedule"], m["status"]) for m in listed] == [("weekly", "pending")]


# --- re-runnable files and plain output (issue 23, rule 7) -----------------------------------------


def write_rows(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def small_rows(count: int = 150) -> list[Any]:
    return [{"body": {"n": n}, "delay": 600} for n in range(count)]


TOO_FAR = {"body": {"n": 139}, "delay": 40_000_000}  # beyond the queue's max_delay: only the server knows


def test_send_a_file_of_large_rows_splits_requests_by_size(
    run: Any, client: Client, queue: str, tmp_path: Path
) -> None:
    pad = "x" * 110_000
    path = write_rows(tmp_path / "large.jsonl", [{"body": {"n": n, "pad": pad}, "delay": 600} for n in range(150)])
    result = run("send", queue, "--file", str(path))
    assert result.exit_code == 0, result.output
    assert sorted(m.body["n"] for m in client.iter_messages(queue, page_size=1000)) == list(range(150))


def test_a_bad_line_late_in_the_file_stores_nothing(run: Any, client: Client, queue: str, tmp_path: Path) -> None:
    rows = small_rows()
    rows[139] = "not json"
    result = run("send", queue, "--file", str(write_rows(tmp_path / "bad.jsonl", rows)))
    assert result.exit_code == 2
    assert "bad.jsonl:140" in result.output
    assert list(client.iter_messages(queue)) == []


def test_a_refused_row_is_named_by_its_file_line(run: Any, queue: str, tmp_path: Path) -> None:
    rows = small_rows()
    rows[139] = TOO_FAR
    result = run("send", queue, "--file", str(write_rows(tmp_path / "rows.jsonl", rows)))
    assert result.exit_code == 1
    assert "rows.jsonl:140: 400 invalid_request: delay:" in result.output
    assert "messages[39]" not in result.output


def test_a_stopped_run_says_what_was_stored(run: Any, client: Client, queue: str, tmp_path: Path) -> None:
    rows = small_rows()
    rows[139] = TOO_FAR
    result = run("send", queue, "--file", str(write_rows(tmp_path / "rows.jsonl", rows)))
    assert "stored 100 of 150 messages (lines 1-100); lines 101-150 were not stored" in result.output
    assert len(list(client.iter_messages(queue, page_size=1000))) == 100


def test_a_rerun_of_the_corrected_file_stores_each_row_once(
    run: Any, client: Client, queue: str, tmp_path: Path
) -> None:
    rows = small_rows()
    rows[139] = TOO_FAR
    path = write_rows(tmp_path / "rows.jsonl", rows)
    run("send", queue, "--file", str(path))
    write_rows(path, small_rows())
    again = run("send", queue, "--file", str(path))
    assert again.exit_code == 0, again.output
    assert "sent 150 messages" in again.stdout and "100 already stored, 50 new" in again.stdout
    pending = [m.body["n"] for m in client.iter_messages(queue, status="pending", page_size=1000)]
    assert sorted(pending) == list(range(150))


def test_rerunning_the_same_file_stores_nothing_new(run: Any, client: Client, queue: str, tmp_path: Path) -> None:
    path = write_rows(tmp_path / "twice.jsonl", [*small_rows(3), small_rows(1)[0]])
    run("send", queue, "--file", str(path))
    run("send", queue, "--file", str(path))
    assert sorted(m.body["n"] for m in client.iter_messages(queue)) == [0, 0, 1, 2]


def test_list_shows_a_markup_like_body_as_text(run: Any, client: Client, queue: str) -> None:
    client.send(queue, "[/x] [bold]not bold[/bold]", delay=600)
    result = run("list", queue)
    assert result.exit_code == 0, result.output
    assert "[/x] [bold]not bold[/bold]" in result.stdout


def test_list_strips_terminal_control_sequences_from_bodies(run: Any, client: Client, queue: str) -> None:
    client.send(queue, "a\x1b]0;owned\x07b\x1b[2Jc\x9b31md\x07e", delay=600)
    result = run("list", queue)
    assert "abc31mde" in result.stdout
    assert not set("\x1b\x07\x9b") & set(result.stdout)


def test_get_shows_markup_like_values_as_text(run: Any, client: Client, queue: str) -> None:
    created = client.send(queue, "[/x]", delay=600, dedup_id="[red]id[/red]")
    result = run("get", queue, created.id)
    assert result.exit_code == 0, result.output
    assert "[/x]" in result.stdout and "[red]id[/red]" in result.stdout


def test_json_output_escapes_c1_controls(run: Any, client: Client, queue: str) -> None:
    client.send(queue, "a\x9b2Jb\x7fc", delay=600)
    result = run("--json", "list", queue)
    assert not set("\x9b\x7f") & set(result.stdout)
    assert [m["body"] for m in lines(result)] == ["a\x9b2Jb\x7fc"]


def test_an_error_message_is_printed_as_text(run: Any, queue: str) -> None:
    result = run("queues", "put", queue, "--settings", '{"[/x]\\u001b[2J": 1}')
    assert result.exit_code == 1
    assert "400 invalid_request: [/x]: is not a known field" in result.output


def test_a_bad_status_line_from_a_callback_is_shown_without_control_codes(run: Any, client: Client, queue: str) -> None:
    class BadStatusLine(QuietHandler):
        def do_POST(self) -> None:
            self.body()
            self.wfile.write(b"\x1b]0;t\x07[/x]\r\n\r\n")

    server = serve(BadStatusLine)
    try:
        client.put_queue(queue, target={"type": "http", "url": base_url(server) + "/hook"})
        created = client.send(queue, "x")
        eventually(lambda: client.get_message(queue, created.id).last_error)
        listed = run("list", queue)
        attempts = run("attempts", queue, created.id)
    finally:
        server.shutdown()
        server.server_close()
    assert listed.exit_code == attempts.exit_code == 0
    assert "[/x]" in listed.stdout and "[/x]" in attempts.stdout
    assert not set("\x1b\x07") & set(listed.stdout + attempts.stdout)


def test_a_bad_csv_row_is_named_by_its_line_after_a_multi_line_field(
    run: Any, client: Client, queue: str, tmp_path: Path
) -> None:
    path = tmp_path / "multi.csv"
    path.write_text('body,delay\n"first\nsecond",600\nthird,soon\n')
    result = run("send", queue, "--file", str(path))
    assert result.exit_code == 2
    assert "multi.csv:4: delay must be a number" in result.output
    assert list(client.iter_messages(queue)) == []


ARN_HEAD = "arn:aws:{}:us-east-1:123456789012:"


@pytest.mark.parametrize(
    ("option", "where", "target"),
    [
        ("--target-lambda", ARN_HEAD.format("lambda") + "function:target-cli", {"type": "lambda"}),
        ("--target-sns", ARN_HEAD.format("sns") + "target-cli", {"type": "sns"}),
        ("--target-sfn", ARN_HEAD.format("states") + "stateMachine:target-cli", {"type": "stepfunctions"}),
    ],
)
def test_queues_put_with_an_aws_target_delivers_there(run: Any, option: str, where: str, target: Any) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    put = run("--json", "queues", "put", name, option, where)
    assert put.exit_code == 0, put.output
    doc = json.loads(run("--json", "queues", "get", name).stdout)
    assert doc["target"]["type"] == target["type"] and where in doc["target"].values()


def test_queues_put_with_an_eventbridge_target_keeps_source_and_detail_type(run: Any) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    bus = ARN_HEAD.format("events") + "event-bus/target-cli"
    args = ("--target-eventbridge", bus, "--event-source", "my.app", "--event-detail-type", "Reminder")
    assert run("--json", "queues", "put", name, *args).exit_code == 0
    doc = json.loads(run("--json", "queues", "get", name).stdout)
    assert doc["target"] == {"type": "eventbridge", "event_bus_arn": bus, "source": "my.app", "detail_type": "Reminder"}


def test_two_target_options_are_a_usage_error(run: Any) -> None:
    sns = ARN_HEAD.format("sns") + "target-cli"
    result = run("queues", "put", "cli-two-targets", "--target-sqs", "http://q/target-x", "--target-sns", sns)
    assert result.exit_code == 2 and "mutually exclusive" in result.output


def test_schedules_put_with_a_lambda_target_overrides_the_queue_target(run: Any, client: Client, queue: str) -> None:
    function = ARN_HEAD.format("lambda") + "function:target-cli"
    made = run(
        "--json", "schedules", "put", queue, "hourly", "--every", "3600", "--body", "{}", "--target-lambda", function
    )
    assert made.exit_code == 0, made.output
    assert client.get_schedule(queue, "hourly").raw["target"] == {"type": "lambda", "function_arn": function}


# --- issue 25: a CLI that fits the shell -----------------------------------------------------------


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert (result.exit_code, result.output) == (0, f"hourglass {__version__}\n")


def test_a_profile_of_the_config_file_gives_url_and_key(api_url: str, queue: str, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[default]\nurl = "http://127.0.0.1:9"\n\n[local]\nurl = "{api_url}"\nkey = "{API_KEY}"\n')
    runner = CliRunner(env={"HOURGLASS_CONFIG": str(config), "HOURGLASS_URL": None, "HOURGLASS_API_KEY": None})
    result = runner.invoke(main, ["--profile", "local", "-o", "json", "queues", "get", queue])
    assert (result.exit_code, json.loads(result.stdout)["name"]) == (0, queue)


def test_the_environment_overrides_the_profile(api_url: str, queue: str, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[prod]\nurl = "http://127.0.0.1:9"\nkey = "{API_KEY}"\n')
    env = {"HOURGLASS_CONFIG": str(config), "HOURGLASS_PROFILE": "prod", "HOURGLASS_URL": api_url}
    result = CliRunner(env=env).invoke(main, ["queues", "get", queue, "-o", "json"])
    assert (result.exit_code, json.loads(result.stdout)["name"]) == (0, queue)


def test_an_unknown_profile_is_named_with_the_known_ones(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[dev]\nurl = "http://127.0.0.1:9"\n')
    result = CliRunner(env={"HOURGLASS_CONFIG": str(config)}).invoke(main, ["--profile", "prod", "queues", "list"])
    assert result.exit_code == 2
    assert "no profile 'prod' (profiles: dev)" in result.output


@pytest.mark.parametrize("output", ["json", "jsonl"])
def test_every_list_command_prints_the_same_shape(run: Any, client: Client, queue: str, output: str) -> None:
    """json: one array; jsonl: one document per line, for messages, queues and schedules alike."""
    client.send(queue, "x", delay=600)
    client.put_schedule(queue, "hourly", every=3600, body="h")
    for args in (["list", queue], ["queues", "list"], ["schedules", "list", queue]):
        result = run(*args, "--output", output)
        parsed = lines(result)
        docs = parsed[0] if output == "json" else parsed
        assert (output == "json") == (len(parsed) == 1 and isinstance(parsed[0], list)), args
        assert all(isinstance(doc, dict) for doc in docs), args


def test_a_piped_table_is_not_cut_at_80_columns(api_url: str, client: Client, queue: str) -> None:
    runner = CliRunner(env={"HOURGLASS_URL": api_url, "HOURGLASS_API_KEY": API_KEY, "COLUMNS": None})
    result = runner.invoke(main, ["queues", "get", queue])
    target = client.get_queue(queue).target or {}
    assert target["url"] in result.stdout


def test_no_color_and_NO_COLOR_print_no_escape_codes(api_url: str, queue: str) -> None:
    env = {"HOURGLASS_URL": api_url, "HOURGLASS_API_KEY": API_KEY, "FORCE_COLOR": "1", "NO_COLOR": None}
    coloured = CliRunner(env=env).invoke(main, ["queues", "get", queue])
    assert "\x1b[" in coloured.stdout  # FORCE_COLOR paints even a pipe
    assert "\x1b[" not in CliRunner(env=env).invoke(main, ["--no-color", "queues", "get", queue]).stdout
    assert "\x1b[" not in CliRunner(env={**env, "NO_COLOR": "1"}).invoke(main, ["queues", "get", queue]).stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--url", "not-a-url", "queues", "list"],
        ["--url", "http://127.0.0.1:1", "queues", "list"],
        ["--url", "http://[::1", "queues", "list"],
    ],
)
def test_no_input_prints_a_traceback(args: list[str]) -> None:
    result = CliRunner(env={"HOURGLASS_URL": None}).invoke(main, args)
    assert result.exit_code in (1, 2) and isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def test_schedules_put_reports_every_bad_field(run: Any, client: Client, queue: str) -> None:
    result = run("schedules", "put", queue, "s", "--every", "3600", "--timezone", "Mars/Base")
    assert result.exit_code == 2
    assert "--body: is required" in result.output and "--timezone: 'Mars/Base'" in result.output
    assert list(client.iter_schedules(queue)) == []


def test_queues_delete_says_what_it_cancels_and_asks(api_url: str, client: Client, queue: str) -> None:
    client.send_batch(queue, [{"body": n, "delay": 600} for n in range(3)])
    runner = CliRunner(env={"HOURGLASS_URL": api_url, "HOURGLASS_API_KEY": API_KEY})
    refused = runner.invoke(main, ["queues", "delete", queue], input="n\n")
    assert "cancels its 3 pending messages" in refused.output and refused.exit_code == 1
    assert client.get_queue(queue).name == queue


def test_purge_cancels_every_pending_message_after_a_yes(api_url: str, client: Client, queue: str) -> None:
    created = client.send_batch(queue, [{"body": n, "delay": 600} for n in range(4)])
    runner = CliRunner(env={"HOURGLASS_URL": api_url, "HOURGLASS_API_KEY": API_KEY})
    result = runner.invoke(main, ["purge", queue, "--poll", "0.2"], input="y\n")
    assert result.exit_code == 0, result.output
    assert {client.get_message(queue, c.id).status for c in created} == {"cancelled"}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_for_each_shell(shell: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert (result.exit_code, "_HOURGLASS_COMPLETE" in result.output) == (0, True)


def test_help_says_how_to_install_completion() -> None:
    assert 'eval "$(hourglass completion bash)"' in CliRunner().invoke(main, ["--help"]).output


def test_list_order_due_and_deliver_now(run: Any, client: Client, queue: str) -> None:
    late = client.send(queue, "late", delay=900)
    early = client.send(queue, "early", delay=600)
    listed = lines(run("list", queue, "--order", "due", "-o", "jsonl"))
    assert [m["id"] for m in listed] == [early.id, late.id]
    assert run("deliver-now", queue, late.id).exit_code == 0
    eventually(lambda: client.get_message(queue, late.id).status == "delivered")
