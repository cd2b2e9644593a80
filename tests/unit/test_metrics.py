"""The EMF metrics adapter: data points gathered per invocation, one document per queue per flush."""

from __future__ import annotations

import io
import json

from hourglass.adapters.metrics import MAX_VALUES, Metrics


def documents(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_nothing_is_written_before_flush() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    metrics.count("Delivered", queue="q")
    metrics.lateness(12.0, queue="q")
    assert out.getvalue() == ""


def test_a_flush_writes_one_document_per_queue_with_counters_summed() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    for _ in range(10):
        metrics.count("Delivered", queue="a")
    metrics.count("Delivered", 2, queue="b")
    metrics.flush()
    docs = {d.get("Queue"): d for d in documents(out)}
    assert (docs["a"]["Delivered"], docs["b"]["Delivered"], len(docs)) == (10, 2, 2)


def test_lateness_is_one_values_array() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    for ms in (1.0, 2.5, 40.0):
        metrics.lateness(ms, queue="q")
    metrics.count("Delivered", 3, queue="q")
    metrics.flush()
    (doc,) = documents(out)
    assert doc["LatenessMs"] == [1.0, 2.5, 40.0] and doc["Delivered"] == 3


def test_the_document_declares_every_metric_it_carries() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    metrics.count("Delivered", queue="q")
    metrics.lateness(5.0, queue="q")
    metrics.flush()
    (doc,) = documents(out)
    declared = doc["_aws"]["CloudWatchMetrics"][0]  # type: ignore[index]
    names = {m["Name"]: m["Unit"] for m in declared["Metrics"]}
    assert names == {"Delivered": "Count", "LatenessMs": "Milliseconds"} and declared["Dimensions"] == [["Queue"], []]


def test_metrics_without_a_queue_have_no_dimension() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    metrics.count("HandedOff", 7)
    metrics.flush()
    (doc,) = documents(out)
    assert doc["HandedOff"] == 7 and "Queue" not in doc and doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]]  # type: ignore[index]


def test_a_second_flush_writes_only_what_came_since() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    metrics.count("Delivered", queue="q")
    metrics.flush()
    metrics.flush()
    metrics.count("Delivered", 4, queue="q")
    metrics.flush()
    assert [d["Delivered"] for d in documents(out)] == [1, 4]


def test_more_values_than_one_document_holds_are_split() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    for ms in range(MAX_VALUES + 5):
        metrics.lateness(float(ms), queue="q")
    metrics.flush()
    assert [len(d["LatenessMs"]) for d in documents(out)] == [MAX_VALUES, 5]  # type: ignore[arg-type]


def test_counts_stay_cumulative_across_flushes() -> None:
    metrics = Metrics(stream=io.StringIO())
    metrics.count("Skipped", queue="q")
    metrics.flush()
    metrics.count("Skipped", queue="q")
    assert metrics.counts["Skipped"] == 2


def test_a_metrics_object_that_does_not_emit_writes_nothing() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out, emit=False)
    metrics.count("Delivered", queue="q")
    assert metrics.flush() == 0 and out.getvalue() == ""


def test_a_batch_of_a_hundred_deliveries_costs_under_five_kilobytes() -> None:
    out = io.StringIO()
    metrics = Metrics(stream=out)
    for i in range(100):
        metrics.count("Delivered", queue="orders")
        metrics.lateness(float(i % 50), queue="orders")
    metrics.flush()
    assert len(out.getvalue().encode()) < 5 * 1024
