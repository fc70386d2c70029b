"""Scope step-up (spec §7.11): a tool the server refuses with ``403 insufficient_scope``; and the server's
protected-resource metadata (RFC 9728) it is checked against, which also says whether the issuer moved (§7.9).

MCP's authorization (2025-11-25, "Scope challenge handling") lets a server answer one request with
``WWW-Authenticate: Bearer error="insufficient_scope", scope="…"`` when the token lacks a scope that request
needs. The SDK's client answers it by a new authorization for the union of the scopes; inside a turn nobody
can sign in, so Palui lets the 403 through to that one call and records a :class:`StepUp` for it, and the
connector asks the person (:mod:`palui.connectors.mcp.scope_request`).

A scope the server's protected-resource metadata (RFC 9728 ``scopes_supported``) does not list is never
asked for: a challenge is hostile text from the server, the metadata is what the server publishes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import httpx2
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    handle_protected_resource_response,
    issuers_match,
)
from mcp.shared.auth import ProtectedResourceMetadata


@dataclass(frozen=True)
class StepUp:
    """One call refused for a scope. ``tool``: the raw name the call named; ``needed``: scopes the challenge
    names beyond ``granted`` (the held token's) and the metadata lists; ``unlisted``: those it names that the
    metadata does not list (never asked for)."""

    tool: str
    needed: tuple[str, ...]
    granted: tuple[str, ...]
    unlisted: tuple[str, ...] = ()


def scopes(text: str | None) -> tuple[str, ...]:
    """A space-separated scope string as a tuple, in order, without repeats (empty for None)."""
    out: list[str] = []
    for s in (text or "").split():
        if s not in out:
            out.append(s)
    return tuple(out)


def union(*groups: Iterable[str]) -> tuple[str, ...]:
    """Every scope of ``groups``, in the order first seen."""
    out: list[str] = []
    for g in groups:
        out.extend(s for s in g if s not in out)
    return tuple(out)


def called_tool(request: httpx2.Request) -> str | None:
    """The tool a ``tools/call`` request names, or None (another request, or a body that is not JSON-RPC)."""
    try:
        msg = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if not isinstance(msg, dict) or msg.get("method") != "tools/call":
        return None
    name = (msg.get("params") or {}).get("name") if isinstance(msg.get("params"), dict) else None
    return name if isinstance(name, str) else None


def step_up(tool: str, challenged: str | None, granted: str | None, listed: list[str] | None) -> StepUp:
    """The :class:`StepUp` of a call of ``tool`` refused with scope ``challenged``, the token holding
    ``granted``, the metadata listing ``listed`` (None: it lists none, so nothing is asked for)."""
    held = scopes(granted)
    beyond = [s for s in scopes(challenged) if s not in held]
    allowed = set(listed or ())
    return StepUp(tool, tuple(s for s in beyond if s in allowed), held, tuple(s for s in beyond if s not in allowed))


async def read_metadata(http: Callable[[], httpx2.AsyncClient], server_url: str) -> ProtectedResourceMetadata | None:
    """The MCP server's protected-resource metadata as it publishes it now, from the URLs the SDK would try,
    through clients made by ``http`` (the checked transport); None when none answers with it."""
    for url in build_protected_resource_metadata_discovery_urls(None, server_url):
        try:
            async with http() as client:
                prm = await handle_protected_resource_response(await client.get(url))
        except (httpx2.HTTPError, ValueError):
            return None
        if prm is not None:
            return prm
    return None


def issuer_moved(prm: ProtectedResourceMetadata | None, issuer: str | None) -> str | None:
    """The authorization server ``prm`` names now when it no longer names ``issuer`` (the one that issued the
    held tokens); None when it still does, or when there is no metadata or issuer (no evidence of a move)."""
    if prm is None or not issuer:
        return None
    named = [str(a) for a in prm.authorization_servers]
    return None if any(issuers_match(issuer, a) for a in named) else (named[0] if named else "none")
