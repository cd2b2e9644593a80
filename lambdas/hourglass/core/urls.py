"""Callback URLs in the form HTTP carries: IDNA host names and percent-encoded path, query and fragment."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

# What RFC 3986 lets stand unescaped in a path, query or fragment; `%` is kept so that existing
# escapes stay as written (a `%` not followed by two hex digits is escaped below).
_SAFE = "/?:@!$&'()*+,;=-._~%"
_HEX = frozenset("0123456789abcdefABCDEF")


def _quote(part: str) -> str:
    fixed = []
    for index, char in enumerate(part):
        escape_ok = char == "%" and len(part) >= index + 3 and set(part[index + 1 : index + 3]) <= _HEX
        fixed.append(char if char != "%" or escape_ok else "%25")
    return quote("".join(fixed), safe=_SAFE)


def idna_host(host: str) -> str:
    """The host as ASCII: IP literals and ASCII names as they are, other names IDNA-encoded.

    Raises ValueError when a name cannot be encoded (empty or over-long labels, forbidden characters).
    """
    if host.isascii():
        return host
    return host.encode("idna").decode("ascii")


def ascii_url(url: str) -> str:
    """`url` with a non-ASCII host IDNA-encoded and non-ASCII or unsafe characters percent-encoded.

    ASCII URLs with valid escapes come back unchanged. Raises ValueError for a host IDNA cannot encode.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if not netloc.isascii():
        userinfo, at, hostport = netloc.rpartition("@")
        host, port = hostport, ""
        if not hostport.startswith("[") and ":" in hostport:
            host, _, port = hostport.rpartition(":")
        netloc = (quote(userinfo, safe=":%") + at if at else "") + idna_host(host) + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, _quote(parts.path), _quote(parts.query), _quote(parts.fragment)))
