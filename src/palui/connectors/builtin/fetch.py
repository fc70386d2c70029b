"""One guarded HTTP GET for ``web__fetch_page`` (spec §7): address checks, redirects, limits.

How the address check is made to hold (DNS rebinding included): for every hop the
host is resolved once (:func:`netguard.checked_addresses`), every address is checked,
and the request is sent to the **checked IP literal** with the original ``Host``
header and, for https, the original name as TLS SNI and certificate name (httpx's
``sni_hostname`` extension). Redirects are followed here, never by httpx, so each hop
goes through the same check; at most :data:`MAX_REDIRECTS`. Proxies from the
environment are ignored (``trust_env=False``): a proxy would connect on our behalf to
an address we never checked.

The time limit covers the whole fetch (every hop, resolution and body); the size
limit counts decoded body bytes, so a compressed bomb stops at the limit too.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import httpx

from palui import __version__
from palui.connectors.builtin.netguard import (
    AddressPolicy,
    AddressRefused,
    Resolver,
    checked_addresses,
    system_resolver,
)

MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}
_HEADERS = {
    "User-Agent": f"Palui/{__version__} (personal agent; fetch_page)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5",
}


class FetchError(Exception):
    """The page could not be fetched (refused address, bad URL, timeout, network error, HTTP status).

    ``str(e)`` is a message for the model; ``status`` is the HTTP status when one was received.
    """

    def __init__(self, message: str, status: int | None = None, page: Page | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.page = page


@dataclass
class Page:
    """A fetched response: ``url`` after redirects, ``media_type`` lower case without parameters
    (``""`` when absent), ``body`` at most ``max_bytes`` bytes, ``truncated`` when more was sent."""

    url: str
    status: int
    reason: str
    media_type: str
    charset: str | None
    body: bytes
    truncated: bool


async def fetch(url: str, *, max_bytes: int, timeout: float, policy: AddressPolicy,
                resolver: Resolver = system_resolver, verify: ssl.SSLContext | bool = True) -> Page:
    """GET ``url`` following at most 5 redirects, every hop checked by ``policy``.

    Args:
        max_bytes: body size limit in bytes; reading stops past it (``truncated``).
        timeout: seconds for the whole fetch, redirects included.
        policy: the address policy (:func:`netguard.address_refusal`, or allow-all).
        resolver, verify: injectable for tests (a fake DNS, a test CA).

    Raises:
        FetchError: any failure, including an HTTP status of 400 or more (``page`` is
            then set, with the start of the body).
    """
    try:
        async with asyncio.timeout(timeout):
            async with httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=timeout,
                                         verify=verify) as client:
                return await _follow(client, url, max_bytes, policy, resolver)
    except TimeoutError:
        raise FetchError(f"timed out after {timeout:g} s (web.timeout_seconds)") from None
    except AddressRefused as e:
        raise FetchError(str(e)) from None
    except httpx.TimeoutException:
        raise FetchError(f"timed out after {timeout:g} s (web.timeout_seconds)") from None
    except httpx.HTTPError as e:
        raise FetchError(f"could not fetch {url}: {type(e).__name__}: {e}") from None


async def _follow(client: httpx.AsyncClient, url: str, max_bytes: int, policy: AddressPolicy,
                  resolver: Resolver) -> Page:
    current = _parse(url)
    for hop in range(MAX_REDIRECTS + 1):
        resp = await _send(client, current, policy, resolver)
        try:
            location = resp.headers.get("location")
            if resp.status_code in _REDIRECTS and location:
                if hop == MAX_REDIRECTS:
                    raise FetchError(f"too many redirects (more than {MAX_REDIRECTS}), last to {location}")
                try:
                    current = _parse(str(current.join(location)))
                except httpx.InvalidURL as e:
                    raise FetchError(f"bad redirect location {location!r}: {e}") from None
                continue
            body, truncated = await _read(resp, max_bytes)
        finally:
            await resp.aclose()
        media_type, _, params = resp.headers.get("content-type", "").partition(";")
        page = Page(url=str(current), status=resp.status_code, reason=resp.reason_phrase,
                    media_type=media_type.strip().lower(), charset=resp.charset_encoding, body=body,
                    truncated=truncated)
        if resp.status_code >= 400:
            raise FetchError(f"HTTP {resp.status_code} {resp.reason_phrase} from {current}",
                             status=resp.status_code, page=page)
        return page
    raise AssertionError("unreachable")


def _parse(url: str) -> httpx.URL:
    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as e:
        raise FetchError(f"not a valid URL: {url!r} ({e})") from None
    if u.scheme not in ("http", "https"):
        raise FetchError(f"only http and https URLs can be fetched, not {u.scheme or 'a URL without scheme'!r}")
    if not u.raw_host:
        raise FetchError(f"the URL has no host: {url!r}")
    return u


async def _send(client: httpx.AsyncClient, u: httpx.URL, policy: AddressPolicy,
                resolver: Resolver) -> httpx.Response:
    """Send GET ``u`` to one of its checked addresses (the next one if a connection fails)."""
    host = u.raw_host.decode("ascii")  # IDNA form; IPv6 literal without brackets
    port = u.port or (443 if u.scheme == "https" else 80)
    addrs = await checked_addresses(host, port, policy, resolver)
    headers = {**_HEADERS, "Host": u.netloc.decode("ascii")}
    extensions = {"sni_hostname": host} if u.scheme == "https" else {}
    last: Exception | None = None
    for ip in addrs:
        request = client.build_request("GET", u.copy_with(host=str(ip)), headers=headers, extensions=extensions)
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as e:
            last = e
    raise FetchError(f"could not connect to {host}: {last}")


async def _read(resp: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    body = bytearray()
    async for chunk in resp.aiter_bytes():
        room = max_bytes - len(body)
        if len(chunk) > room:
            body += chunk[:room]
            return bytes(body), True
        body += chunk
    return bytes(body), False
