"""Which network addresses ``web__fetch_page`` may connect to (spec §7).

The policy is a pure function of one IP address (:func:`address_refusal`): only
globally routable unicast addresses pass. Loopback, private, link-local, unspecified,
multicast, reserved and other non-global ranges (carrier-grade NAT, documentation,
benchmarking…) are refused, including when they hide inside IPv6 (IPv4-mapped,
NAT64, 6to4, Teredo).

A host name is resolved first and **every** address it resolves to must pass
(:func:`checked_addresses`); the fetcher then connects to one of those checked
addresses, never to the name again, so a DNS answer that changes between the check
and the connection (rebinding) cannot swap in a private address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``policy(ip) -> None`` (allowed) or a short reason ("loopback", "private", …).
AddressPolicy = Callable[[IPAddress], str | None]
#: ``resolver(host, port) -> [address strings]``; raises OSError when the name does not resolve.
Resolver = Callable[[str, int], Awaitable[list[str]]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(Exception):
    """A URL's host is, or resolves to, an address the policy refuses. The message is for the model."""


def address_refusal(ip: IPAddress) -> str | None:
    """None when ``ip`` is a public unicast address; otherwise why it is refused.

    Reasons, checked in this order: ``unspecified``, ``loopback``, ``link-local``,
    ``multicast``, ``reserved``, ``private``, ``not a public address``. An IPv6
    address that embeds an IPv4 one (mapped, NAT64, 6to4, Teredo client) is refused
    when the embedded address is.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        embedded: list[ipaddress.IPv4Address] = []
        # A mapped or NAT64 address reaches exactly the embedded IPv4 host: judge that host alone
        # (DNS64 networks give every IPv4-only site such an address).
        if ip.ipv4_mapped is not None:
            return address_refusal(ip.ipv4_mapped)
        if ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
            reason = address_refusal(inner)
            return f"{reason} (inside {ip})" if reason else None
        if ip.sixtofour is not None:
            embedded.append(ip.sixtofour)
        if ip.teredo is not None:
            embedded.extend(ip.teredo)
        for inner in embedded:
            reason = address_refusal(inner)
            if reason:
                return f"{reason} (inside {ip})"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "not public"
    return None


def allow_all(ip: IPAddress) -> None:
    """The policy when ``web.allow_private`` is true: every address may be fetched."""
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the system resolver (``getaddrinfo``); address strings in its order."""
    import asyncio
    import socket

    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for *_, sockaddr in infos:
        addr = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 scope id ("fe80::1%eth0")
        if addr not in out:
            out.append(addr)
    return out


async def checked_addresses(host: str, port: int, policy: AddressPolicy,
                            resolver: Resolver = system_resolver) -> list[IPAddress]:
    """The addresses to connect to for ``host``: all of them pass ``policy``.

    ``host`` is an IP literal or an ASCII (IDNA) name. A name is resolved once; if
    any of its addresses is refused the whole host is refused (fail closed: the
    resolver's order, not Palui, would otherwise pick which one is used).

    Raises:
        AddressRefused: an address is refused, or the name does not resolve.
    """
    try:
        addrs: list[IPAddress] = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            raw = await resolver(host, port)
        except (OSError, UnicodeError) as e:
            raise AddressRefused(f"cannot resolve host {host!r}: {e}") from None
        addrs = []
        for a in raw:
            try:
                addrs.append(ipaddress.ip_address(a))
            except ValueError:
                raise AddressRefused(f"host {host!r} resolved to something that is not an IP address") from None
        if not addrs:
            raise AddressRefused(f"host {host!r} resolves to no address") from None
    for ip in addrs:
        reason = policy(ip)
        if reason:
            shown = host if str(ip) == host else f"{host} ({ip})"
            raise AddressRefused(
                f"refused to fetch from {shown}: the address is {reason}; private, loopback and link-local "
                "addresses are refused unless web.allow_private = true is set in palui.toml"
            )
    return addrs
