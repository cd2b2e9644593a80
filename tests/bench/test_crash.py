"""The crash section's arithmetic on made-up runs: what counts as affected, late and duplicated."""

from __future__ import annotations

from bench.crash import CrashConfig, PhaseRun, _section

KILL = 1000.0
READY = 1010.0


def run(**overrides: object) -> PhaseRun:
    fields: dict[str, object] = {
        "phase": "begun",
        "due": {"a": 990.0, "b": 1005.0, "c": 980.0, "d": 1020.0},
        "at_kill": {"a": "delivering", "b": "pending", "c": "delivered", "d": "pending"},
        "killed_at": KILL,
        "ready_at": READY,
        "arrived": {"a": 1036.0, "b": 1012.0, "c": 980.1, "d": 1020.1},
        "times": {"a": 1, "b": 1, "c": 1, "d": 1},
        "final": dict.fromkeys("abcd", "delivered"),
    }
    return PhaseRun(**{**fields, **overrides})  # type: ignore[arg-type]


def figures(*runs: PhaseRun) -> dict[str, float | str]:
    return {c.name: c.measured for c in _section(CrashConfig(), list(runs)).checks}


def test_lateness_counts_from_the_due_time_or_from_the_restart_for_what_fell_due_while_down() -> None:
    measured = figures(run())
    assert measured["affected: lateness max"] == 46.0  # a: due before the kill
    assert measured["affected: lateness p50"] == 2.0  # b: due during the downtime, 2 s after the restart


def test_only_undelivered_messages_due_before_the_restart_are_affected() -> None:
    assert run().affected == ["a", "b"]


def test_a_second_request_for_a_message_delivered_before_the_kill_is_the_documented_takeover() -> None:
    takeover = run(arrived={"a": 995.0, "b": 1012.0, "c": 980.1, "d": 1020.1}, times={"a": 2, "b": 1, "c": 1, "d": 1})
    measured = figures(takeover)
    assert (
        measured["duplicates beyond the documented takeover"],
        measured["takeover duplicates (delivered, outcome not written at the kill)"],
    ) == (0, 1)


def test_any_other_duplicate_fails_the_section() -> None:
    section = _section(CrashConfig(), [run(times={"a": 1, "b": 2, "c": 1, "d": 1})])
    assert not section.passed
