"""Private/loopback/link-local callback addresses are forbidden."""

from __future__ import annotations

import pytest
from hourglass.core.network import is_forbidden_address


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "::",
        "fe80::1",
        "fe80::1%eth0",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "100.64.0.1",
        "198.18.0.1",
        "2001:db8::1",
    ],
)
def test_forbidden_addresses(address):
    assert is_forbidden_address(address) is True


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "172.32.0.1", "2606:2800:220:1:248:1893:25c8:1946", "::ffff:93.184.216.34"]
)
def test_public_addresses_are_allowed(address):
    assert is_forbidden_address(address) is False
