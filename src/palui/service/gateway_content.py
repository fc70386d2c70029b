"""Service part: the resources and prompts the gateway offers a client (spec §8.6, docs/gateway.md).

A client sees the resources and prompts of the MCP connectors it may call now: a connector given to it, enabled,
signed in, with at least one tool switched on (its switches hold its resources and prompts too: a connector whose
tools are all off offers nothing). Listing them starts the connectors' servers as a call would.

- **Resources** are listed with their URIs as their servers gave them; their names and descriptions as a model
  is sent a tool's (cut, hidden characters removed, spec §4.7). A session may read only a URI of its last
  listing (``resources/list``), and a read is a governed read of its connector
  (:meth:`GatewaySession.read <palui.runner.gateway_session.GatewaySession.read>`): refused by the brake, the
  connector's switches or the client's cap, counted by that cap, audited, and tainting the client as a tool's
  result would. Its contents pass as the server sent them (hidden characters listed in ``_meta``, by the front
  end).
- **Prompts** are listed as ``CONNECTOR__NAME`` (two servers may name a prompt alike), their descriptions cleaned
  as a tool's; a prompt is got as a governed read too, and its messages are text the client's model reads as its
  own instructions, so their hidden characters are removed (and listed in ``_meta``), as a tool's definition's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from palui.errors import PaluiError, UsageError
from palui.policy.input_schema import cut_description
from palui.text.display import named
from palui.text.escape import has_hidden, strip_hidden

if TYPE_CHECKING:
    from palui.connectors.mcp.connector import MCPConnector
    from palui.service.gateway import GatewayPart
    from palui.service.turns import TurnsPart
    from palui.store.db import Database

log = logging.getLogger(__name__)
#: The fields of a listed resource or prompt that are text a model reads (cleaned as a tool's description).
_TEXT = ("name", "title", "description")


class GatewayRefused(PaluiError):
    """A resource or prompt the client may not read now; the message says why."""


def _clean(entry: dict[str, Any]) -> dict[str, Any]:
    out = dict(entry)
    for k in _TEXT:
        if isinstance(out.get(k), str):
            out[k] = cut_description(strip_hidden(out[k]))
    if isinstance(out.get("arguments"), list):
        out["arguments"] = [_clean(a) if isinstance(a, dict) else a for a in out["arguments"]]
    return out


def _texts(value: Any) -> list[str]:
    """Every ``text`` string inside a read's answer (what taints the client, and what marks approvals later)."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in ([v] if k == "text" and isinstance(v, str) else _texts(v))]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def _stripped(value: Any, removed: list[str]) -> Any:
    """``value`` with hidden characters removed from every ``text`` string; ``removed`` collects the places."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "text" and isinstance(v, str) and has_hidden(v):
                removed.append(k)
                out[k] = strip_hidden(v)
            else:
                out[k] = _stripped(v, removed)
        return out
    if isinstance(value, list):
        return [_stripped(v, removed) for v in value]
    return value


class GatewayContentPart:
    """A client's resources and prompts.

    Args:
        db: the catalog.
        turns_part: the runner's dependencies (the connector hub).
        gateway_part: the sessions and their clients.
    """

    def __init__(self, db: Database, turns_part: TurnsPart, gateway_part: GatewayPart) -> None:
        self.db = db
        self.turns_part = turns_part
        self.gateway_part = gateway_part
        self._resources: dict[str, dict[str, str]] = {}  # session -> {URI: connector} of its last listing
        self._prompts: dict[str, dict[str, tuple[str, str]]] = {}  # session -> {listed name: (connector, name)}

    def _readable(self, session: str) -> list[str]:
        """The MCP connectors whose resources and prompts the session's client may read now."""
        from palui.runner.offer import gateway_offers
        from palui.store import catalog

        _, connectors = self.gateway_part.session_scope(session)
        snap = catalog.snapshot(self.db)
        return sorted({r.connector for r in snap.tools.values() if r.usable and r.enabled and not r.connector_signin
                       and r.connector.startswith("mcp-") and gateway_offers(r, connectors)})

    async def _connector(self, cid: str) -> MCPConnector:
        from palui.connectors.mcp.connector import MCPConnector

        conn = await self.turns_part.runner_deps().hub.get(cid)
        if not isinstance(conn, MCPConnector):
            raise GatewayRefused(f"{cid} is not an MCP connector")
        return conn

    async def _listing(self, session: str, kind: Any) -> list[tuple[str, dict[str, Any]]]:
        from palui.connectors.mcp import content

        out: list[tuple[str, dict[str, Any]]] = []
        for cid in self._readable(session):
            try:
                out += [(cid, e) for e in await content.listing(await self._connector(cid), kind)]
            except PaluiError as e:  # one connector down lists nothing; the others still do
                log.info("gateway: %s/list of %s: %s", kind, cid, e)
        return out

    async def resources(self, session: str) -> list[dict[str, Any]]:
        """``resources/list``: the resources of the connectors the client may read now (URIs as their servers
        gave them; a URI with hidden characters, or listed by two connectors, is left out). Raises NotFound."""
        listed = await self._listing(session, "resources")
        by_uri: dict[str, str | None] = {}
        for cid, e in listed:
            uri = e.get("uri")
            if isinstance(uri, str) and not has_hidden(uri):
                by_uri[uri] = cid if uri not in by_uri else None  # two connectors' alike URIs: neither is read
        self._resources[session] = {u: c for u, c in by_uri.items() if c is not None}
        return [_clean(e) for cid, e in listed if self._resources[session].get(e.get("uri") or "") == cid]

    async def read_resource(self, session: str, uri: str) -> dict[str, Any]:
        """``resources/read``: a governed read of a URI of the session's last listing. Raises UsageError (not in
        it), GatewayRefused (the brake, the connector's switches, the cap, the server's error)."""
        from palui.connectors.mcp import content
        from palui.runner.gateway_session import ReadRefused

        cid = self._resources.get(session, {}).get(uri)
        if cid is None:
            raise UsageError(f"{named(uri, 200)} is not a resource of this session's last resources/list: list the "
                             "resources first")

        async def fetch() -> tuple[dict[str, Any], list[str]]:
            got = await content.read_resource(await self._connector(cid), uri)
            return got, _texts(got.get("contents"))

        try:
            return await self.gateway_part.session_for(session).read(cid, "resources/read", uri, fetch)
        except ReadRefused as e:
            raise GatewayRefused(str(e)) from None

    async def prompts(self, session: str) -> list[dict[str, Any]]:
        """``prompts/list``: the prompts of the connectors the client may read now, named ``CONNECTOR__NAME``,
        their descriptions cleaned as a tool's. Raises NotFound."""
        listed = await self._listing(session, "prompts")
        names: dict[str, tuple[str, str]] = {}
        out = []
        for cid, e in listed:
            raw = e.get("name")
            if not isinstance(raw, str) or has_hidden(raw):
                continue
            names[f"{cid}__{raw}"] = (cid, raw)
            out.append({**_clean(e), "name": f"{cid}__{raw}"})
        self._prompts[session] = names
        return out

    async def get_prompt(self, session: str, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        """``prompts/get``: a governed read of a prompt of the session's last listing, its messages with hidden
        characters removed (listed in ``_meta``). Raises UsageError (not in it), GatewayRefused."""
        from palui.connectors.mcp import content
        from palui.runner.gateway_session import ReadRefused

        known = self._prompts.get(session, {}).get(name)
        if known is None:
            raise UsageError(f"{named(name)} is not a prompt of this session's last prompts/list: list the prompts "
                             "first")
        cid, raw = known

        async def fetch() -> tuple[dict[str, Any], list[str]]:
            got = await content.get_prompt(await self._connector(cid), raw, arguments)
            return got, _texts(got.get("messages"))

        try:
            got = await self.gateway_part.session_for(session).read(cid, "prompts/get", name, fetch)
        except ReadRefused as e:
            raise GatewayRefused(str(e)) from None
        removed: list[str] = []
        messages = _stripped(got.get("messages"), removed)
        out = {**got, "messages": messages}
        if isinstance(out.get("description"), str):
            out["description"] = cut_description(strip_hidden(out["description"]))
        if removed:  # what the client's model will read as its instructions holds nothing unseen
            out["_meta"] = {**(out.get("_meta") or {}), "palui/hidden-removed": len(removed)}
        return out
