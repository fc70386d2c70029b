"""Is an address this machine? (``palui serve`` listens elsewhere only once a token exists, spec §8;
a chat channel's plain-http URL is allowed only on loopback.)

Pure: it reads the address, never the network (no name is resolved; ``localhost`` is the one name
taken as loopback).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """``localhost``, an address in 127.0.0.0/8, or ``::1`` (no brackets); any other name is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """Does ``url`` point at this machine (127.0.0.0/8, ::1, localhost)?"""
    return is_loopback(urlsplit(url).hostname or "")
