"""Which callback addresses are private: loopback, private, link-local, multicast, unspecified, and
anything else not globally routable (shared address space, protocol assignments, documentation)."""

from __future__ import annotations

import ipaddress


def is_forbidden_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_unspecified
        or ip.is_reserved
        or not ip.is_global
    )
