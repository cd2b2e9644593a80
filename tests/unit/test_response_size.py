"""Every REST response fits Lambda's 6 MB as AWS measures it: the serialized proxy response, its body escaped as
a JSON string (quotes, backslashes, non-ASCII and control characters count as what they become), whatever the
content. Properties over body content against the handler's own formatting (`service.rest`)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hourglass.core import attempts, delivery, limits, validation
from hourglass.core.document import later_doc, message_doc
from hourglass.core.model import Message
from hourglass.service import rest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_limits import FINAL, worst_message

# Any character a JSON body can carry (lone surrogates are refused at create), weighted to the costly ones.
COSTLY = st.sampled_from(['"', "\\", "\x00", "\x01", "\x1f", "\x7f", "\n", "é", "€", "\u2028", "😀", "\ufeff"])
CHARS = st.one_of(COSTLY, st.characters(blacklist_categories=("Cs",)))
CONTENT = st.text(CHARS, min_size=1, max_size=16)
FAST = settings(max_examples=15, deadline=None)


def largest_body(sample: str) -> str:
    """`sample` repeated to the largest body a message may have (validation.MAX_BODY_BYTES, as stored)."""
    return sample * ((validation.MAX_BODY_BYTES - 2) // (limits.json_bytes(sample) - 2))


def message(body: Any, n: int = 0) -> Message:
    return replace(worst_message(body, None), id=f"{n:064d}")


def fits(response: dict[str, Any]) -> bool:
    """Within 6 MB both as Python runtimes before 3.12 serialize it (ASCII escapes) and as 3.12+ do (UTF-8)."""
    escaped = len(json.dumps(response).encode())
    utf8 = len(json.dumps(response, ensure_ascii=False).encode("utf-8"))
    return max(escaped, utf8) <= limits.LAMBDA_RESPONSE_BYTES and escaped == limits.proxy_response_bytes(response)


@FAST
@given(CONTENT, st.integers(min_value=2, max_value=40))
def test_a_list_page_of_any_content_fits(sample: str, count: int) -> None:
    body = largest_body(sample)
    found = [message(body, n) for n in range(count)]
    docs, cursor = rest.fit_page([message_doc(m) for m in found], found, None, lambda m: f"after {m.id}")
    response = rest.respond(200, {"messages": docs, "next_cursor": cursor})
    assert fits(response)
    assert cursor is None if len(docs) == count else cursor == f"after {found[len(docs) - 1].id}"


@FAST
@given(CONTENT)
def test_a_page_is_cut_only_when_the_next_document_would_not_fit(sample: str) -> None:
    found = [message(largest_body(sample), n) for n in range(30)]
    docs = [message_doc(m) for m in found]
    kept, _ = rest.fit_page(docs, found, None, lambda m: m.id)
    longer = rest.respond(200, {"messages": docs[: len(kept) + 1], "next_cursor": "c" * 200})
    assert len(kept) == 30 or limits.proxy_response_bytes(longer) > limits.MAX_PAGE_BYTES


@FAST
@given(CONTENT)
def test_a_single_message_of_any_content_fits(sample: str) -> None:
    response = rest.respond(200, message_doc(message(largest_body(sample))))
    assert fits(response)


@FAST
@given(CONTENT)
def test_a_later_query_of_any_content_fits(sample: str) -> None:
    response = rest.respond(200, later_doc(message(largest_body(sample))))
    assert fits(response)


@FAST
@given(CONTENT)
def test_an_error_of_any_content_fits(sample: str) -> None:
    field = sample * (validation.MAX_BODY_BYTES // len(sample) * 8)  # a field name taken from a 6 MB request
    response = rest.error(400, "invalid_request", f"{field}: is not a known field")
    assert fits(response)


@FAST
@given(CONTENT, st.integers(min_value=1, max_value=800))
def test_an_attempt_history_of_any_content_keeps_the_latest_that_fit(sample: str, count: int) -> None:
    error = (sample * delivery.MAX_ERROR)[: delivery.MAX_ERROR]
    history = [replace(FINAL, attempt=n, error=error) for n in range(1, count + 1)]
    kept = rest.latest_that_fit(attempts.history_doc(history)["attempts"])
    assert fits(rest.respond(200, {"attempts": kept}))
    assert [a["attempt"] for a in kept] == list(range(count - len(kept) + 1, count + 1))


def test_a_response_over_the_limit_is_an_error_not_awss_502() -> None:
    request = rest.Request("GET", "/v1/queues/q/messages/m", {}, {}, None)
    response = rest.within_limit(rest.respond(200, {"body": "\x01" * limits.LAMBDA_RESPONSE_BYTES}), request)
    assert (response["statusCode"], fits(response)) == (500, True)
