"""The CLI tells a newcomer what to do: errors with a next step, help with units, every queue setting as a flag
and in the table, plain wording for re-sent files, and lists in due order by default."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hourglass_client import Client
from hourglass_client.cli import main

from tests.clients.conftest import API_KEY, RawReceiver, scripted
from tests.loopback import QuietHandler, base_url, serve, shut

STATUSES = ["pending", "delivering", "delivered", "failed", "cancelled", "expired"]
WIDE = {"COLUMNS": "250", "HOURGLASS_CONFIG": "/nonexistent/hourglass.toml"}


def lines(result: Result) -> list[Any]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was just free)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def invoke(*args: str, **env: str | None) -> Result:
    return CliRunner(env={"HOURGLASS_URL": None, "HOURGLASS_API_KEY": None, **WIDE, **env}).invoke(main, list(args))


# --- errors with a next step ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "source"),
    [
        (["--url", "{url}"], {}, "--url"),
        ([], {"HOURGLASS_URL": "{url}"}, "HOURGLASS_URL"),
    ],
)
def test_a_refused_connection_suggests_make_dev_and_names_the_url_setting(
    args: list[str], env: dict[str, str], source: str
) -> None:
    url = closed_port_url()
    result = invoke(
        *(a.format(url=url) for a in args), "queues", "list", **{k: v.format(url=url) for k, v in env.items()}
    )
    assert result.exit_code == 1
    assert "make dev" in result.output and f"{url} (from {source})" in result.output


def test_a_refused_connection_from_a_profile_names_the_profile(tmp_path: Path) -> None:
    url = closed_port_url()
    config = tmp_path / "config.toml"
    config.write_text(f'[local]\nurl = "{url}"\n')
    result = invoke("--profile", "local", "queues", "list", HOURGLASS_CONFIG=str(config))
    assert result.exit_code == 1
    assert f"{url} (from profile local)" in result.output and "--url" not in result.output.split("Check")[0]


def test_a_profiles_bad_url_is_blamed_on_the_profile(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[local]\nurl = "localhost:8080"\n')
    result = invoke("--profile", "local", "queues", "list", HOURGLASS_CONFIG=str(config))
    assert result.exit_code == 2
    assert "profile local 'localhost:8080' is not an http:// or https:// URL" in result.output
    assert "--url" not in result.output


def test_a_refused_key_mentions_HOURGLASS_API_KEY_and_the_flag(api_url: str) -> None:
    missing = invoke("--url", api_url, "queues", "list")
    wrong = invoke("--url", api_url, "queues", "list", HOURGLASS_API_KEY="not-the-key")
    assert missing.exit_code == wrong.exit_code == 1
    assert "no API key was given: set HOURGLASS_API_KEY or pass --api-key" in missing.output
    assert "the key from HOURGLASS_API_KEY was refused" in wrong.output


PAGE = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n" + "<p>filler</p>\n" * 200 + "</html>\n"


@pytest.mark.parametrize("status", [200, 404, 502])
def test_a_web_page_answer_is_summed_up_in_a_line(status: int) -> None:
    class WebServer(QuietHandler):
        def do_GET(self) -> None:
            self.answer(status, PAGE.encode(), {"Content-Type": "text/html; charset=utf-8"})

    server = serve(WebServer)
    try:
        result = invoke("--url", base_url(server), "queues", "list")
    finally:
        shut(server)
    assert result.exit_code == 1
    assert "text/html" in result.output and "<!DOCTYPE html>" in result.output
    assert "filler" not in result.output and len(result.output.splitlines()) <= 4
    assert "is it the API's base URL?" in result.output


# --- help ---------------------------------------------------------------------------------------------


def every_command(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += every_command(sub, (*path, name))
    return found


def test_every_option_of_every_command_has_help() -> None:
    bare = [
        (path, param.opts)
        for path, command in every_command(main)
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert bare == []


@pytest.mark.parametrize(
    ("command", "option", "unit"),
    [
        (["queues", "put"], "--max-attempts", "attempts"),
        (["queues", "put"], "--ttl", "seconds"),
        (["queues", "put"], "--timeout", "seconds"),
        (["queues", "put"], "--max-delay", "seconds"),
        (["queues", "put"], "--rate-limit", "per second"),
        (["queues", "put"], "--key-rate-limit", "per second"),
        (["send"], "--delay", "seconds"),
        (["send"], "--ttl", "seconds"),
        (["tail"], "--timeout", "seconds"),
        (["operations", "start"], "--poll", "seconds"),
    ],
)
def test_option_help_says_the_unit(command: list[str], option: str, unit: str) -> None:
    target: click.Command = main
    for name in command:
        assert isinstance(target, click.Group)
        target = target.commands[name]
    [param] = [p for p in target.params if option in p.opts]
    assert isinstance(param, click.Option) and param.help is not None
    assert unit in param.help, (option, param.help)


@pytest.mark.parametrize("group", [[], ["queues"], ["schedules"], ["operations"]])
def test_command_lists_never_cut_a_description(group: list[str]) -> None:
    result = CliRunner(env={"COLUMNS": "80"}).invoke(main, [*group, "--help"])
    commands = result.output.split("Commands:")[1].splitlines()
    assert result.exit_code == 0 and not [line for line in commands if line.rstrip().endswith("...")]


# --- queue settings as flags, and in the table ----------------------------------------------------------


def test_flow_control_and_limits_are_flags_of_queues_put(run: Any, receiver: RawReceiver) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    put = run(
        "--json", "queues", "put", name, "--target-url", receiver.url("/cli"),
        "--rate-limit", "20", "--max-concurrency", "5",
        "--key-rate-limit", "2.5", "--key-max-concurrency", "1",
        "--failure-destination", "http:" + receiver.url("/failed"),
    )  # fmt: skip
    assert put.exit_code == 0, put.output
    doc = json.loads(run("--json", "queues", "get", name).stdout)
    assert doc["flow_control"] == {"key_rate_limit": 2.5, "key_max_concurrency": 1}
    assert (doc["rate_limit"], doc["max_concurrency"]) == (20, 5)
    assert doc["failure_destination"]["url"] == receiver.url("/failed")


def test_the_queue_table_shows_window_flow_control_and_the_target_type(run: Any) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    sqs = f"http://127.0.0.1:1/123456789012/target-{name}"
    put = run(
        "queues", "put", name, "--target-sqs", sqs, "--window", "09:00-18:00 mon-fri Europe/Paris",
        "--key-rate-limit", "3", "--rate-limit", "10",
    )  # fmt: skip
    assert put.exit_code == 0, put.output
    table = run("queues", "get", name).stdout
    assert f"sqs:target-{name}" in table
    assert "09:00-18:00 mon,tue,wed,thu,fri Europe/Paris" in table
    assert "3/s" in table and "10/s" in table and "per key" in table


def test_a_bad_flag_value_names_the_flag(run: Any) -> None:
    result = run("queues", "put", "cli-bad-breaker", "--breaker", "half")
    assert result.exit_code == 2 and "--breaker" in result.output and "RATIO,MIN_ATTEMPTS,WINDOW" in result.output


# --- files sent twice, lists in due order ---------------------------------------------------------------


def test_a_file_sent_twice_says_already_stored_and_new(run: Any, queue: str, tmp_path: Path) -> None:
    path = tmp_path / "four.jsonl"
    path.write_text("".join(json.dumps({"body": {"n": n}, "delay": 600}) + "\n" for n in range(4)))
    first = run("send", queue, "--file", str(path))
    again = run("send", queue, "--file", str(path))
    assert "0 already stored, 4 new" in first.stdout
    assert "4 already stored, 0 new" in again.stdout


def test_list_without_order_is_in_due_order(run: Any, client: Client, queue: str) -> None:
    delays = [900, 300, 1200, 600, 60]
    created = {client.send(queue, n, delay=delay).id: delay for n, delay in enumerate(delays)}
    listed = [m["id"] for m in lines(run("--json", "list", queue))]
    assert listed == sorted(created, key=created.__getitem__)


def test_list_without_order_falls_back_to_unordered_on_a_stack_without_the_due_index(
    client: Client, queue: str
) -> None:
    stored = client.send(queue, "x", delay=600)
    refused = "order: due is not kept by this stack (its hourglass:order_due is false)"
    raw = client.get_message(queue, stored.id).raw
    fake = scripted(
        (400, {}, {"error": {"code": "bad_request", "message": refused}}),
        (200, {}, {"messages": [raw], "next_cursor": None}),
    )
    result = CliRunner(env={"HOURGLASS_URL": fake.url, "COLUMNS": "250"}).invoke(main, ["--json", "list", queue])
    assert result.exit_code == 0, result.output
    assert [m["id"] for m in lines(result)] == [stored.id]
    assert "listing unordered (--order any)" in result.stderr
    assert ["order=due" in path for _, path, _ in fake.requests] == [True, False]


def test_list_with_order_due_asked_keeps_the_refusal(client: Client, queue: str) -> None:
    refused = "order: due is not kept by this stack (its hourglass:order_due is false)"
    fake = scripted((400, {}, {"error": {"code": "bad_request", "message": refused}}))
    result = CliRunner(env={"HOURGLASS_URL": fake.url}).invoke(main, ["list", queue, "--order", "due"])
    assert result.exit_code != 0
    assert "hourglass:order_due" in result.output + result.stderr
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", STATUSES)
def test_list_in_due_order_works_for_every_status(run: Any, client: Client, queue: str, status: str) -> None:
    client.send(queue, "x", delay=600)
    result = run("--json", "list", queue, "--status", status)
    assert result.exit_code == 0, result.output
    assert all(m["status"] == status for m in lines(result))


def test_list_in_due_order_works_with_a_flow_key_and_a_schedule(run: Any, client: Client, queue: str) -> None:
    late = client.send(queue, "late", delay=900, flow_key="k")
    early = client.send(queue, "early", delay=600, flow_key="k")
    client.put_schedule(queue, "hourly", every=3600, body="h")
    by_key = run("--json", "list", queue, "--flow-key", "k")
    by_schedule = run("--json", "list", queue, "--schedule", "hourly")
    assert [m["id"] for m in lines(by_key)] == [early.id, late.id]
    assert by_schedule.exit_code == 0 and [m["schedule"] for m in lines(by_schedule)] == ["hourly"]


def test_the_key_from_a_flag_is_named_when_refused(api_url: str) -> None:
    result = invoke("--url", api_url, "--api-key", "wrong", "queues", "list")
    assert "the key from --api-key was refused" in result.output
    assert API_KEY not in result.output


def test_a_file_send_without_an_answer_gives_the_next_step_too(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text('{"body": 1}\n')
    url = closed_port_url()
    result = invoke("send", "q", "--file", str(path), HOURGLASS_URL=url)
    assert result.exit_code == 1
    assert "stored 0 of 1 messages" in result.output and f"{url} (from HOURGLASS_URL)" in result.output
