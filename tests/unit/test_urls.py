"""Callback URLs in ASCII: IDNA host names, percent-encoded paths and queries."""

from __future__ import annotations

import pytest
from hourglass.core.urls import ascii_url


def test_a_unicode_host_is_idna_encoded():
    assert ascii_url("https://bücher.example/") == "https://xn--bcher-kva.example/"


def test_a_unicode_host_keeps_its_port_and_user():
    assert ascii_url("http://u:p@exämple.com:8443/x") == "http://u:p@xn--exmple-cua.com:8443/x"


def test_unicode_path_and_query_are_percent_encoded_as_utf8():
    assert ascii_url("http://example.com/café/€?q=é&x=1") == "http://example.com/caf%C3%A9/%E2%82%AC?q=%C3%A9&x=1"


def test_existing_escapes_are_kept_and_a_stray_percent_is_escaped():
    assert ascii_url("http://example.com/a%2Fb%C3%A9?x=100%") == "http://example.com/a%2Fb%C3%A9?x=100%25"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook?a=b&c=d", "https://[::1]/x", "http://example.com"])
def test_plain_ascii_urls_are_unchanged(url):
    assert ascii_url(url) == url


def test_a_host_idna_cannot_encode_is_a_value_error():
    with pytest.raises(ValueError):
        ascii_url("http://" + "é" * 70 + ".com/")
