"""Where a remote MCP server's HTTP client may connect: the check made at connect time (spec §7.9).

A server's metadata names the authorization server, and the authorization server's metadata names the
token, registration and revocation endpoints: the SDK's ``OAuthClientProvider`` fetches them all through
the HTTP client Palui gives it. Without a check, an MCP server on the internet could point Palui at
``http://127.0.0.1:…`` or a LAN address and have it send metadata requests and a client registration
there (server-side request forgery through the server's metadata).

The rule, for every connection of that client (the MCP requests, discovery, registration, token,
revocation): an address is allowed when it is public, or when it is in the same class as an address
of the MCP server's own host — loopback for a loopback server, private for a private one (a LAN server
with its LAN authorization server works). Nothing else that is private, loopback, link-local or
otherwise not public. The classes are those of ``web__fetch_page``
(:func:`palui.connectors.builtin.netguard.address_refusal`).

As for ``web__fetch_page``, a host name is resolved once per connection, every address must pass, and
the connection goes to a checked address, never to the name again (DNS rebinding cannot swap one in).
The check lives in the HTTP transport's network backend (httpcore's ``connect_tcp``), so redirects and
the SDK's own requests go through it too. A proxy from the environment makes its own connections:
requests sent through one are not checked (the proxy is the person's choice).

``PALUI_TEST_ADDRESS_CLASSES`` (tests only) gives addresses another class, e.g. ``127.0.0.2=public``:
a test runs a "public" MCP server on 127.0.0.2 whose authorization server is on 127.0.0.1 (loopback).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import httpcore2
import httpx2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream

from palui.connectors.builtin.netguard import IPAddress, Resolver, address_refusal, system_resolver

TEST_CLASSES_ENV = "PALUI_TEST_ADDRESS_CLASSES"
PUBLIC = "public"


def _test_classes() -> dict[str, str]:
    raw = os.environ.get(TEST_CLASSES_ENV, "")
    out = {}
    for part in raw.split(","):
        address, sep, kind = part.strip().partition("=")
        if sep and address and kind:
            out[str(ipaddress.ip_address(address))] = kind
    return out


def address_class(ip: IPAddress) -> str:
    """``public``, or why the address is not: ``loopback``, ``private``, ``link-local``, ``unspecified``,
    ``multicast``, ``reserved`` or ``not public`` (an IPv6 address that embeds an IPv4 one has the
    class of the embedded address)."""
    forced = _test_classes().get(str(ip))
    if forced:
        return forced
    reason = address_refusal(ip)
    return PUBLIC if reason is None else reason.split(" (inside ", 1)[0]


def connect_refusal(ip: IPAddress, server_classes: frozenset[str]) -> str | None:
    """None when ``ip`` may be connected to for an MCP server whose host has addresses of
    ``server_classes``; otherwise the address's class (why it is refused)."""
    kind = address_class(ip)
    return None if kind == PUBLIC or kind in server_classes else kind


class AddressRefused(httpcore2.ConnectError):
    """A connection to an address the rule refuses (``str(e)`` says which and why)."""


class CheckedBackend(AsyncNetworkBackend):
    """httpcore's network backend with the check above: resolves, checks every address, connects to one.

    Args:
        server_host: the MCP server's host (its addresses' classes are allowed too).
        on_refused: told the sentence of each refusal (the session explains a failed start with it).
        resolver: ``(host, port) -> [addresses]`` (tests may give their own).
    """

    def __init__(self, server_host: str, on_refused: Callable[[str], None] | None = None,
                 resolver: Resolver = system_resolver) -> None:
        self.server_host = server_host
        self.on_refused = on_refused
        self.resolver = resolver
        self._server_classes: frozenset[str] | None = None
        self._inner = httpcore2.AnyIOBackend()

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            pass
        try:
            raw = await self.resolver(host, port)
        except (OSError, UnicodeError) as e:
            raise httpcore2.ConnectError(f"cannot resolve host {host!r}: {e}") from None
        if not raw:
            raise httpcore2.ConnectError(f"host {host!r} resolves to no address")
        return [ipaddress.ip_address(a) for a in raw]

    async def server_classes(self, port: int) -> frozenset[str]:
        """The classes of the MCP server's own addresses (resolved once)."""
        if self._server_classes is None:
            self._server_classes = frozenset(address_class(ip) for ip in await self._addresses(self.server_host, port))
        return self._server_classes

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None) -> AsyncNetworkStream:
        allowed = await self.server_classes(port)
        addresses = await self._addresses(host, port)
        for ip in addresses:
            kind = connect_refusal(ip, allowed)
            if kind is not None:
                shown = host if str(ip) == host.strip("[]") else f"{host} ({ip})"
                why = (f"Palui refused to connect to {shown}: the address is {kind}, and the MCP server "
                       f"{self.server_host} is not ({', '.join(sorted(allowed))}); a server's sign-in may use its "
                       "own class of address or public ones only")
                if self.on_refused is not None:
                    self.on_refused(why)
                raise AddressRefused(why)
        last: Exception | None = None
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(str(ip), port, timeout=timeout, local_address=local_address,
                                                     socket_options=socket_options)
            except httpcore2.ConnectError as e:
                last = e
        raise last or httpcore2.ConnectError(f"could not connect to {host}")

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None
                                  ) -> AsyncNetworkStream:
        raise httpcore2.ConnectError("Unix sockets are not used for remote MCP servers")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def checked_transport(server_url: str, on_refused: Callable[[str], None] | None = None) -> httpx2.AsyncHTTPTransport:
    """An httpx transport whose every connection passes :class:`CheckedBackend` for ``server_url``'s host."""
    transport = httpx2.AsyncHTTPTransport()
    # httpx does not take a network backend; its connection pool reads this attribute for each new connection.
    transport._pool._network_backend = CheckedBackend(urlsplit(server_url).hostname or "", on_refused)
    return transport
