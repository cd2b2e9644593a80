"""What the handlers print for delivered messages at INFO: one line per outcome and one EMF document
per invocation, under 1 KB for a message on its own."""

from __future__ import annotations

import json

from bench.log_bytes import measure


def test_one_delivered_message_writes_under_a_kilobyte() -> None:
    captured = measure(1)
    assert captured.bytes <= 1024


def test_each_invocation_writes_one_emf_document_whatever_the_batch() -> None:
    captured = measure(10)
    assert captured.emf_documents == 3  # ingest, sweeper, dispatcher


def test_the_info_lines_are_the_outcomes() -> None:
    captured = measure(10)
    events = [json.loads(line)["event"] for line in captured.lines if '"_aws"' not in line]
    assert events == ["finished"] * 10


def test_the_dispatcher_document_carries_every_lateness_and_the_delivered_count() -> None:
    captured = measure(10)
    docs = [json.loads(line) for line in captured.lines if '"_aws"' in line]
    dispatcher = next(d for d in docs if "Delivered" in d)
    assert (dispatcher["Delivered"], len(dispatcher["LatenessMs"])) == (10, 10)
