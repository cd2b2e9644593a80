"""HTTP callbacks: resolves and checks the address, connects to it, no redirects, bounded I/O."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from hourglass.core.network import is_forbidden_address
from hourglass.core.urls import ascii_url
from hourglass.errors import DeliveryError, ValidationError

MAX_RESPONSE = 64 * 1024


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes


def resolve(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to; refuses private ones unless allowed (checked at every call)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValidationError("url", f"host {host!r} does not resolve") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not allow_private and any(is_forbidden_address(a) for a in addresses):
        raise ValidationError("url", f"host {host!r} resolves to a private or reserved address")
    return addresses[0]


def check_url(url: str, *, allow_private: bool) -> None:
    parts = urlsplit(_sendable(url))
    resolve(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80), allow_private=allow_private)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """Connects to a checked address while verifying the certificate for the URL's host name."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    allow_private: bool,
    connect_timeout: float = 5.0,
    read_timeout: float = 10.0,
) -> HttpReply:
    """POST once; raises OSError / ValidationError / http.client errors on transport failure.

    The whole exchange gets `connect_timeout + read_timeout`: per-read timeouts alone let a server
    that drips its answer hold the dispatcher for as long as it likes.
    """
    parts = urlsplit(_sendable(url))
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve(host, port, allow_private=allow_private)
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = _PinnedHTTPS(host, address, port, connect_timeout)
    else:
        connection = http.client.HTTPConnection(address, port, timeout=connect_timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    deadline = threading.Timer(connect_timeout + read_timeout, _cut, args=(connection,))
    deadline.daemon = True
    try:
        deadline.start()
        connection.connect()
        if connection.sock is not None:
            connection.sock.settimeout(read_timeout)
        try:
            connection.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", parts.netloc.rsplit("@", 1)[-1])
            connection.putheader("Content-Length", str(len(body)))
            connection.putheader("User-Agent", "Hourglass/1")
            for name, value in headers.items():
                connection.putheader(name, value)
        except (UnicodeError, ValueError) as exc:
            # Refused at create since the URL and header rules; a message stored before them ends here.
            raise DeliveryError(f"the request cannot be encoded: {exc}", retryable=False) from exc
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read(MAX_RESPONSE)
        return HttpReply(status=response.status, headers={k.lower(): v for k, v in response.getheaders()}, body=data)
    finally:
        deadline.cancel()
        connection.close()


def _sendable(url: str) -> str:
    """The URL as sent; one stored before URLs were normalised at create may still need encoding."""
    try:
        return ascii_url(url)
    except ValueError as exc:
        raise DeliveryError(f"the URL cannot be encoded: {exc}", retryable=False) from exc


def _cut(connection: http.client.HTTPConnection) -> None:
    """Ends an exchange that outlived its time: the blocked read returns and the call fails."""
    if connection.sock is not None:
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_RDWR)
