"""Property tests over validation, sort keys and backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hourglass.core import validation
from hourglass.core.model import NewMessage, QueueSettings, RetryPolicy
from hourglass.core.retry import backoff
from hourglass.core.schedule import sort_key
from hourglass.core.timestamps import to_ms
from hourglass.errors import ValidationError
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
message_keys = st.sampled_from(["body", "delay", "deliver_at", "ttl", "dedup_id", "target", "other"])
field_values = json_values | st.sampled_from(
    [
        "2026-11-21T10:00:00Z",
        "2030-01-01T00:00:00+02:00",
        {"type": "http", "url": "https://example.com"},
        {"type": "sqs", "queue_url": "https://sqs.x/1/q"},
        0,
        30.5,
        1e308,
        -1,
    ]
)
message_docs = st.dictionaries(message_keys, field_values, max_size=6) | json_values
batches = st.one_of(
    json_values,
    st.fixed_dictionaries({"messages": st.lists(message_docs, max_size=5)}),
    st.fixed_dictionaries({"messages": json_values}),
)


@given(batches)
def test_message_batch_returns_messages_or_raises_validation_error(doc):
    try:
        messages = validation.message_batch(doc, QueueSettings(), NOW)
    except ValidationError as err:
        assert err.message
    else:
        assert 1 <= len(messages) <= 100
        assert all(isinstance(m, NewMessage) for m in messages)


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_decode_json_returns_json_or_raises_validation_error(raw):
    try:
        validation.decode_json(raw)
    except ValidationError as err:
        assert err.field == "body"


ids = st.text(alphabet="0123456789abcdef-", min_size=1, max_size=36)
offsets = st.integers(min_value=0, max_value=10 * 365 * 86400 * 1000)


@given(offsets, ids, offsets, ids)
def test_sort_key_order_matches_due_time_order(a_ms, a_id, b_ms, b_id):
    a_due = to_ms(NOW + timedelta(milliseconds=a_ms))
    b_due = to_ms(NOW + timedelta(milliseconds=b_ms))
    if a_due < b_due:
        assert sort_key(a_due, a_id) < sort_key(b_due, b_id)
    elif a_due > b_due:
        assert sort_key(a_due, a_id) > sort_key(b_due, b_id)


policies = st.builds(
    RetryPolicy,
    max_attempts=st.integers(1, 100),
    backoff_base=st.floats(0, 86400),
    backoff_max=st.floats(0, 30 * 86400),
)


@given(policies, st.integers(1, 200), st.floats(0, 1))
def test_backoff_is_monotonic_and_bounded(policy, attempt, jitter):
    current = backoff(policy, attempt, jitter=jitter)
    following = backoff(policy, attempt + 1, jitter=jitter)
    assert 0 <= current <= following
    assert following <= policy.backoff_max * 1.1 * (1 + 1e-12)
