"""Validation of every field of the REST contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hourglass.core import validation
from hourglass.core.model import HttpTarget, QueueSettings, RetryPolicy, SqsTarget, Status
from hourglass.errors import ValidationError

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
TEN_YEARS = 10 * 365 * 86400
SETTINGS = QueueSettings()


def batch(*messages: object, settings: QueueSettings = SETTINGS) -> list:
    return validation.message_batch({"messages": list(messages)}, settings, NOW)


def error_of(func, *args, **kwargs) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        func(*args, **kwargs)
    return info.value


# --- queue names -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["orders", "a", "A-b_9", "x" * 64])
def test_queue_name_accepts_valid_names(name):
    assert validation.queue_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 65, "has space", "a/b", "é", "@later", "a.b", "orders\n", None, 5])
def test_queue_name_rejects_invalid_names(name):
    assert error_of(validation.queue_name, name).field == "queue"


# --- queue settings --------------------------------------------------------------------------


def test_queue_settings_defaults_when_body_is_empty():
    assert validation.queue_settings({}) == QueueSettings()


def test_queue_settings_none_body_means_defaults():
    assert validation.queue_settings(None) == QueueSettings()


def test_queue_settings_reads_every_field():
    settings = validation.queue_settings(
        {
            "default_delay": 5,
            "max_delay": 3600,
            "ttl": 60,
            "target": {"type": "http", "url": "https://example.com/hook", "headers": {"X-Token": "t"}},
            "retry": {"max_attempts": 3, "backoff_base": 2, "backoff_max": 30},
            "signing_secret": "s3cret",
        }
    )
    assert settings == QueueSettings(
        default_delay=5.0,
        max_delay=3600.0,
        ttl=60.0,
        target=HttpTarget(url="https://example.com/hook", headers={"X-Token": "t"}),
        retry=RetryPolicy(max_attempts=3, backoff_base=2.0, backoff_max=30.0),
        signing_secret="s3cret",
    )


def test_queue_settings_reads_a_rotation():
    settings = validation.queue_settings({"signing_secret": "old", "signing_secret_next": "new"})
    assert settings.signing_secrets == ("old", "new")


def test_queue_settings_rejects_non_object():
    assert error_of(validation.queue_settings, [1]).field == "body"


def test_queue_settings_unknown_field_is_named():
    err = error_of(validation.queue_settings, {"max_delay": 10, "colour": "red"})
    assert err.field == "colour"
    assert "colour" in err.message


def test_queue_settings_unknown_retry_field_is_named():
    assert error_of(validation.queue_settings, {"retry": {"jitter": 1}}).field == "retry.jitter"


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"default_delay": -1}, "default_delay"),
        ({"default_delay": TEN_YEARS + 1}, "default_delay"),
        ({"default_delay": "5"}, "default_delay"),
        ({"max_delay": -0.5}, "max_delay"),
        ({"max_delay": TEN_YEARS + 1}, "max_delay"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": -1}, "ttl"),
        ({"ttl": TEN_YEARS + 1}, "ttl"),
        ({"signing_secret": ""}, "signing_secret"),
        ({"signing_secret": "x" * 257}, "signing_secret"),
        ({"signing_secret": 42}, "signing_secret"),
        ({"signing_secret": "s", "signing_secret_next": ""}, "signing_secret_next"),
        ({"signing_secret": "s", "signing_secret_next": "x" * 257}, "signing_secret_next"),
        ({"signing_secret": "s", "signing_secret_next": ["n"]}, "signing_secret_next"),
        ({"signing_secret_next": "n"}, "signing_secret_next"),
        ({"retry": 3}, "retry"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"retry": {"max_attempts": 101}}, "retry.max_attempts"),
        ({"retry": {"max_attempts": 2.5}}, "retry.max_attempts"),
        ({"retry": {"backoff_base": -1}}, "retry.backoff_base"),
        ({"retry": {"backoff_base": 86401}}, "retry.backoff_base"),
        ({"retry": {"backoff_max": -1}}, "retry.backoff_max"),
        ({"retry": {"backoff_max": 30 * 86400 + 1}}, "retry.backoff_max"),
        ({"target": "https://example.com"}, "target"),
    ],
)
def test_queue_settings_rejects_out_of_bounds(doc, field):
    assert error_of(validation.queue_settings, doc).field == field


def test_queue_settings_accepts_bounds():
    settings = validation.queue_settings(
        {"default_delay": TEN_YEARS, "max_delay": TEN_YEARS, "ttl": 0.001, "retry": {"max_attempts": 100}}
    )
    assert (settings.default_delay, settings.max_delay, settings.ttl, settings.retry.max_attempts) == (
        TEN_YEARS,
        TEN_YEARS,
        0.001,
        100,
    )


def test_queue_settings_null_ttl_means_no_expiry():
    assert validation.queue_settings({"ttl": None}).ttl is None


def test_queue_settings_default_delay_above_max_delay_is_rejected():
    assert error_of(validation.queue_settings, {"default_delay": 20, "max_delay": 10}).field == "default_delay"


@pytest.mark.parametrize("value", [True, False, float("nan"), float("inf"), float("-inf"), 10**400, 1e308])
def test_queue_settings_rejects_bools_nan_infinity_and_huge_numbers(value):
    assert error_of(validation.queue_settings, {"max_delay": value}).field == "max_delay"


# --- targets ---------------------------------------------------------------------------------


def test_http_target_is_parsed():
    assert validation.target({"type": "http", "url": "http://example.com:8080/x?y=1"}) == HttpTarget(
        url="http://example.com:8080/x?y=1"
    )


def test_sqs_target_is_parsed():
    queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/out"
    assert validation.target({"type": "sqs", "queue_url": queue_url}) == SqsTarget(queue_url=queue_url)


@pytest.mark.parametrize("kind", [None, "ftp", "later", 1, {}, ["sns"]])
def test_target_type_must_be_http_or_sqs(kind):
    assert error_of(validation.target, {"type": kind, "url": "https://example.com"}).field == "target.type"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "gopher://example.com",
        "example.com/hook",
        "/relative",
        "https://",
        "http://[::1",
        "http://example.com:0/",
        "http://example.com:70000/",
        "http://example.com:port/",
        "http://exa mple.com/",
        "http://example.com/\x01",
        "",
        "https://example.com/" + "x" * 2048,
        7,
    ],
)
def test_http_target_rejects_bad_urls(url):
    assert error_of(validation.target, {"type": "http", "url": url}).field == "target.url"


def test_http_target_requires_url():
    assert error_of(validation.target, {"type": "http"}).field == "target.url"


def test_sqs_target_rejects_non_http_queue_url():
    err = error_of(validation.target, {"type": "sqs", "queue_url": "arn:aws:sqs:eu-west-1:1:q"})
    assert err.field == "target.queue_url"


def test_target_unknown_field_is_named():
    err = error_of(validation.target, {"type": "sqs", "queue_url": "https://sqs.x/1/q", "url": "https://x"})
    assert err.field == "target.url"


@pytest.mark.parametrize(
    "name", ["Host", "content-length", "Content-Type", "Transfer-Encoding", "Connection", "Hourglass-Attempt"]
)
def test_http_target_rejects_reserved_headers(name):
    err = error_of(validation.target, {"type": "http", "url": "https://example.com", "headers": {name: "v"}})
    assert err.field == f"target.headers.{name}"


@pytest.mark.parametrize("name", ["", "Bad Header", "X:Y", "X-A\n", "x" * 129])
def test_http_target_rejects_invalid_header_names(name):
    err = error_of(validation.target, {"type": "http", "url": "https://example.com", "headers": {name: "v"}})
    assert err.field == f"target.headers.{name}"


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "a\0", 5, None, "x" * 4097])
def test_http_target_rejects_bad_header_values(value):
    err = error_of(validation.target, {"type": "http", "url": "https://example.com", "headers": {"X-A": value}})
    assert err.field == "target.headers.X-A"


def test_http_target_rejects_too_many_headers():
    headers = {f"X-{i}": "v" for i in range(33)}
    err = error_of(validation.target, {"type": "http", "url": "https://example.com", "headers": headers})
    assert err.field == "target.headers"


def test_http_target_rejects_non_object_headers():
    err = error_of(validation.target, {"type": "http", "url": "https://example.com", "headers": ["X-A"]})
    assert err.field == "target.headers"


# --- message batches -------------------------------------------------------------------------


def test_batch_returns_messages_in_request_order():
    messages = batch({"body": 1}, {"body": "two", "delay": 5}, {"body": {"three": 3}})
    assert [m.body for m in messages] == [1, "two", {"three": 3}]


def test_batch_reads_every_message_field():
    (message,) = batch(
        {
            "body": {"a": 1},
            "deliver_at": "2026-12-24T18:00:00+01:00",
            "ttl": 3600,
            "dedup_id": "order-42",
            "target": {"type": "sqs", "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q"},
        }
    )
    assert message.deliver_at == datetime(2026, 12, 24, 17, 0, tzinfo=UTC)
    assert (message.ttl, message.dedup_id, message.delay) == (3600.0, "order-42", None)
    assert message.target == SqsTarget(queue_url="https://sqs.eu-west-1.amazonaws.com/1/q")


@pytest.mark.parametrize("count", [1, 100])
def test_batch_accepts_one_to_a_hundred_messages(count):
    assert len(batch(*[{"body": i} for i in range(count)])) == count


@pytest.mark.parametrize("messages", [[], [{"body": i} for i in range(101)], {"body": 1}, None, "x"])
def test_batch_rejects_wrong_sizes_and_shapes(messages):
    err = error_of(validation.message_batch, {"messages": messages}, SETTINGS, NOW)
    assert err.field == "messages"


def test_batch_requires_messages_key():
    assert error_of(validation.message_batch, {}, SETTINGS, NOW).field == "messages"


def test_batch_rejects_unknown_top_level_field():
    err = error_of(validation.message_batch, {"messages": [{"body": 1}], "queue": "x"}, SETTINGS, NOW)
    assert err.field == "queue"


def test_batch_rejects_non_object_request():
    assert error_of(validation.message_batch, [{"body": 1}], SETTINGS, NOW).field == "body"


def test_message_must_be_an_object():
    assert error_of(batch, {"body": 1}, "text").field == "messages[1]"


def test_message_body_is_required():
    assert error_of(batch, {"delay": 5}).field == "messages[0].body"


def test_message_body_may_be_null():
    assert batch({"body": None})[0].body is None


def test_message_unknown_field_is_named():
    err = error_of(batch, {"body": 1}, {"body": 2, "urgency": 1})
    assert err.field == "messages[1].urgency"
    assert "messages[1].urgency" in err.message


def test_message_body_of_exactly_256_kib_is_accepted():
    body = "x" * (256 * 1024 - 2)  # the serialized string carries two quotes
    assert batch({"body": body})[0].body == body


def test_message_body_above_256_kib_is_too_large():
    err = error_of(batch, {"body": "x" * (256 * 1024 - 1)})
    assert (err.field, err.code) == ("messages[0].body", "too_large")


def test_message_body_size_counts_utf8_bytes():
    err = error_of(batch, {"body": "é" * (128 * 1024)})
    assert err.code == "too_large"


def test_delay_and_deliver_at_are_mutually_exclusive():
    err = error_of(batch, {"body": 1, "delay": 5, "deliver_at": "2026-11-21T10:05:00Z"})
    assert err.field == "messages[0].delay"


def test_null_delay_with_deliver_at_is_accepted():
    (message,) = batch({"body": 1, "delay": None, "deliver_at": "2026-11-21T10:05:00Z"})
    assert (message.delay, message.deliver_at) == (None, NOW + timedelta(minutes=5))


def test_fractional_delay_is_accepted():
    assert batch({"body": 1, "delay": 0.25})[0].delay == 0.25


@pytest.mark.parametrize("delay", [-1, -0.001, "5", True, [], float("nan"), float("inf"), 10**400])
def test_bad_delays_are_rejected(delay):
    assert error_of(batch, {"body": 1, "delay": delay}).field == "messages[0].delay"


def test_delay_beyond_ten_years_is_rejected_even_without_a_queue_limit():
    settings = QueueSettings(max_delay=float(TEN_YEARS))
    assert error_of(batch, {"body": 1, "delay": TEN_YEARS + 1}, settings=settings).field == "messages[0].delay"


@pytest.mark.parametrize(
    "value", ["2026-12-24T18:00:00", "2026-12-24", "tomorrow", "", 1700000000, "9999-12-31T23:59:59-01:00"]
)
def test_deliver_at_needs_an_rfc3339_time_with_offset(value):
    err = error_of(batch, {"body": 1, "deliver_at": value})
    assert err.field == "messages[0].deliver_at"


def test_deliver_at_in_the_past_is_accepted():
    (message,) = batch({"body": 1, "deliver_at": "2020-01-01T00:00:00Z"})
    assert message.deliver_at == datetime(2020, 1, 1, tzinfo=UTC)


def test_deliver_at_beyond_ten_years_is_rejected():
    settings = QueueSettings(max_delay=float(TEN_YEARS))
    when = (NOW + timedelta(seconds=TEN_YEARS + 1)).isoformat()
    assert error_of(batch, {"body": 1, "deliver_at": when}, settings=settings).field == "messages[0].deliver_at"


def test_delay_above_max_delay_names_the_delay_field():
    settings = QueueSettings(max_delay=60.0)
    err = error_of(batch, {"body": 1}, {"body": 2, "delay": 61}, settings=settings)
    assert err.field == "messages[1].delay"


def test_delay_equal_to_max_delay_is_accepted():
    settings = QueueSettings(max_delay=60.0)
    assert batch({"body": 1, "delay": 60}, settings=settings)[0].delay == 60.0


def test_deliver_at_above_max_delay_names_the_deliver_at_field():
    settings = QueueSettings(max_delay=60.0)
    err = error_of(batch, {"body": 1, "deliver_at": "2026-11-21T10:01:01Z"}, settings=settings)
    assert err.field == "messages[0].deliver_at"


@pytest.mark.parametrize("ttl", [0, -1, TEN_YEARS + 1, "60", False])
def test_bad_ttls_are_rejected(ttl):
    assert error_of(batch, {"body": 1, "ttl": ttl}).field == "messages[0].ttl"


def test_smallest_ttl_is_accepted():
    assert batch({"body": 1, "ttl": 0.001})[0].ttl == 0.001


def test_dedup_id_of_128_characters_is_accepted():
    assert batch({"body": 1, "dedup_id": "d" * 128})[0].dedup_id == "d" * 128


@pytest.mark.parametrize("dedup_id", ["", "d" * 129, 42])
def test_bad_dedup_ids_are_rejected(dedup_id):
    assert error_of(batch, {"body": 1, "dedup_id": dedup_id}).field == "messages[0].dedup_id"


def test_message_target_errors_name_the_message():
    err = error_of(batch, {"body": 1, "target": {"type": "http", "url": "ftp://example.com"}})
    assert err.field == "messages[0].target.url"


def test_message_target_reserved_header_is_rejected():
    target = {"type": "http", "url": "https://example.com", "headers": {"Host": "evil"}}
    assert error_of(batch, {"body": 1, "target": target}).field == "messages[0].target.headers.Host"


# --- patches ---------------------------------------------------------------------------------


def test_patch_reads_body_and_delay():
    patch = validation.message_patch({"body": None, "delay": 5}, SETTINGS, NOW)
    assert (patch.has_body, patch.body, patch.delay, patch.deliver_at) == (True, None, 5.0, None)


def test_patch_without_body_says_so():
    assert validation.message_patch({"delay": 5}, SETTINGS, NOW).has_body is False


def test_patch_must_not_be_empty():
    assert error_of(validation.message_patch, {}, SETTINGS, NOW).field == "body"


def test_patch_rejects_unknown_fields():
    assert error_of(validation.message_patch, {"ttl": 5}, SETTINGS, NOW).field == "ttl"


def test_patch_delay_and_deliver_at_are_mutually_exclusive():
    err = error_of(validation.message_patch, {"delay": 1, "deliver_at": "2026-11-21T10:00:00Z"}, SETTINGS, NOW)
    assert err.field == "delay"


def test_patch_delay_above_max_delay_is_rejected():
    err = error_of(validation.message_patch, {"delay": 61}, QueueSettings(max_delay=60.0), NOW)
    assert err.field == "delay"


def test_patch_body_too_large():
    err = error_of(validation.message_patch, {"body": "x" * (256 * 1024)}, SETTINGS, NOW)
    assert (err.field, err.code) == ("body", "too_large")


# --- decode_json -----------------------------------------------------------------------------


def test_decode_json_parses_bytes_and_text():
    assert validation.decode_json(b'{"a": [1, 2.5, "\xc3\xa9"]}') == {"a": [1, 2.5, "é"]}
    assert validation.decode_json('{"a": null}') == {"a": None}


@pytest.mark.parametrize("raw", [None, b"", ""])
def test_decode_json_requires_a_body(raw):
    assert error_of(validation.decode_json, raw).field == "body"


@pytest.mark.parametrize("raw", [b"not json", b"{", b"{'a': 1}", b'{"a": 1} trailing', b"\x00"])
def test_decode_json_rejects_non_json(raw):
    err = error_of(validation.decode_json, raw)
    assert (err.field, err.code) == ("body", "invalid_request")


@pytest.mark.parametrize("raw", [b"NaN", b"[Infinity]", b'{"a": -Infinity}'])
def test_decode_json_rejects_nan_and_infinity(raw):
    assert error_of(validation.decode_json, raw).field == "body"


def test_decode_json_rejects_invalid_utf8():
    assert "UTF-8" in error_of(validation.decode_json, b'{"a": "\xff\xfe"}').message


def test_decode_json_rejects_escaped_lone_surrogates():
    assert error_of(validation.decode_json, b'{"a": "\\ud800"}').field == "body"


def test_decode_json_accepts_escaped_surrogate_pairs():
    assert validation.decode_json(b'"\\ud83d\\ude00"') == "\U0001f600"


def test_decode_json_rejects_deep_nesting():
    assert error_of(validation.decode_json, b"[" * 100000).field == "body"


def test_decode_json_rejects_nesting_that_json_can_parse_but_not_re_encode_safely():
    assert error_of(validation.decode_json, b"[" * 500 + b"]" * 500).field == "body"


def test_decode_json_accepts_moderate_nesting():
    assert validation.decode_json(b"[" * 50 + b"]" * 50) is not None


def test_decode_json_rejects_huge_integers():
    assert error_of(validation.decode_json, b"1" * 5000).field == "body"


def test_decode_json_rejects_bodies_over_the_limit():
    err = error_of(validation.decode_json, b'"' + b"x" * 100 + b'"', limit=50)
    assert (err.field, err.code) == ("body", "too_large")


def test_decoded_deep_body_never_breaks_batch_validation():
    raw = json.dumps({"messages": [{"body": [[[[["deep"]]]]]}]}).encode()
    assert batch(*validation.decode_json(raw)["messages"])[0].body == [[[[["deep"]]]]]


# --- list query ------------------------------------------------------------------------------


def test_list_query_defaults():
    assert validation.list_query(None) == validation.ListQuery(status=None, limit=50, cursor=None)


def test_list_query_reads_every_parameter():
    query = validation.list_query({"status": "delivered", "limit": "1000", "cursor": "abc"})
    assert query == validation.ListQuery(status=Status.DELIVERED, limit=1000, cursor="abc")


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "ten", "", "1.5", "²", "٣", "9" * 5000])
def test_list_query_rejects_bad_limits(limit):
    assert error_of(validation.list_query, {"limit": limit}).field == "limit"


def test_list_query_accepts_limit_one():
    assert validation.list_query({"limit": "1"}).limit == 1


@pytest.mark.parametrize("status", ["PENDING", "done", "pending "])
def test_list_query_rejects_unknown_status(status):
    assert error_of(validation.list_query, {"status": status}).field == "status"


def test_list_query_rejects_unknown_parameters():
    assert error_of(validation.list_query, {"page": "2"}).field == "page"


def test_list_query_rejects_oversized_cursor():
    assert error_of(validation.list_query, {"cursor": "c" * 2049}).field == "cursor"


# --- later tasks -----------------------------------------------------------------------------

LATER = {"topic": "order", "delay": 15, "retry": 3, "callback": "http://example.com/cb", "content": "hello"}


def test_later_task_is_parsed():
    assert validation.later_task(LATER) == validation.LaterTask(
        topic="order", delay=15.0, retry=3, callback="http://example.com/cb", content="hello"
    )


def test_later_task_defaults_delay_and_retry_to_zero():
    task = validation.later_task({"topic": "t", "callback": "https://example.com"})
    assert (task.delay, task.retry, task.content) == (0.0, 0, None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("topic", ""),
        ("topic", "t" * 257),
        ("topic", 5),
        ("delay", -1),
        ("delay", "15"),
        ("delay", True),
        ("delay", TEN_YEARS + 1),
        ("retry", -1),
        ("retry", 100),
        ("retry", 1.5),
        ("retry", True),
        ("callback", "ftp://example.com"),
        ("callback", None),
    ],
)
def test_later_task_rejects_bad_fields(field, value):
    assert error_of(validation.later_task, {**LATER, field: value}).field == field


def test_later_task_rejects_unknown_fields():
    assert error_of(validation.later_task, {**LATER, "priority": 1}).field == "priority"


def test_later_task_requires_topic():
    doc = {k: v for k, v in LATER.items() if k != "topic"}
    assert error_of(validation.later_task, doc).field == "topic"


def test_later_id_is_read():
    assert validation.later_id({"id": "abc"}) == "abc"


@pytest.mark.parametrize("doc", [{}, {"id": ""}, {"id": 5}, {"id": "x" * 65}, {"id": "a", "x": 1}, []])
def test_later_id_rejects_bad_documents(doc):
    with pytest.raises(ValidationError):
        validation.later_id(doc)
