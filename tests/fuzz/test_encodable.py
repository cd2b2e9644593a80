"""Whatever target validation accepts, HTTP can carry: property tests over unicode URLs and header values."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

from hourglass.core import validation
from hourglass.errors import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

label = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
hosts = st.one_of(
    st.sampled_from(["example.com", "127.0.0.1", "[::1]", "bücher.example", "例え.jp"]),
    st.lists(label, min_size=1, max_size=3).map(".".join),
)
paths = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


class Recorder(http.client.HTTPConnection):
    """Builds the request line and headers exactly as http.client sends them, without a socket."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1", 9)
        self.sent: list[bytes] = []

    def send(self, data: object) -> None:
        if isinstance(data, bytes):
            self.sent.append(data)


@settings(max_examples=400, deadline=None)
@given(host=hosts, path=paths, query=paths)
def test_an_accepted_url_is_ascii_and_http_client_sends_it(host: str, path: str, query: str) -> None:
    raw = f"https://{host}/{path}?{query}"
    try:
        url = validation.url(raw, "url")
    except ValidationError:
        return
    assert url.isascii()
    connection = Recorder()
    parts = urlsplit(url)
    connection.putrequest("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), skip_host=True)
    connection.putheader("Host", parts.netloc)
    connection.endheaders()
    assert connection.sent


@settings(max_examples=400, deadline=None)
@given(value=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=50))
def test_an_accepted_header_value_is_one_http_client_sends(value: str) -> None:
    target = {"type": "http", "url": "https://example.com/", "headers": {"X-Any": value}}
    try:
        validation.target(target)
    except ValidationError:
        return
    connection = Recorder()
    connection.putrequest("POST", "/", skip_host=True)
    connection.putheader("X-Any", value)
    connection.endheaders()
    assert connection.sent
