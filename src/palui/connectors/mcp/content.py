"""An MCP server's resources and prompts, read for a gateway client (spec §8.6).

Palui's own turns use tools only; the gateway offers a client the resources and prompts of its connectors. Each
function here reaches the server through the connector's live session (started if needed, within the connector's
timeout) and returns the server's answer as JSON, as it was sent:

- :func:`listing` — ``resources/list`` or ``prompts/list``, every page (at most :data:`MAX_PAGES`, and
  :data:`MAX_ITEMS` entries), ``[]`` when the server does not offer them (its capabilities);
- :func:`read_resource` — ``resources/read``, its contents within the connector's output limit (a text cut with
  a marker, a blob that does not fit left out with a text saying so);
- :func:`get_prompt` — ``prompts/get``, within the same limit.

Every error is a :class:`~palui.errors.ConnectorError` whose message is fit for the client (secrets redacted).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from palui.connectors.mcp.calling import short_error
from palui.connectors.mcp.config import redact
from palui.connectors.mcp.results import cap_text
from palui.errors import ConnectorError

if TYPE_CHECKING:
    from palui.connectors.mcp.client import MCPSession
    from palui.connectors.mcp.connector import MCPConnector

#: Pages of one listing read at most, and entries kept at most (a hostile server's endless cursor).
MAX_PAGES = 20
MAX_ITEMS = 1_000


def _offers(session: MCPSession, kind: Literal["resources", "prompts"]) -> bool:
    caps = session.sdk.server_capabilities
    return getattr(caps, kind, None) is not None


async def _bounded(conn: MCPConnector, what: str, work: Any) -> Any:
    try:
        async with asyncio.timeout(conn.timeout):
            return await work
    except TimeoutError:
        raise ConnectorError(f"{conn.id}: {what} did not answer within {conn.timeout:g} s") from None
    except MCPError as e:
        raise ConnectorError(redact(f"{conn.id}: {what}: the server answered: {e.message} (code {e.code})",
                                    conn.config.secret_values)) from None
    except ValidationError:
        raise ConnectorError(f"{conn.id}: {what}: the server sent a malformed answer") from None
    except ConnectorError:
        raise
    except Exception as e:
        raise ConnectorError(redact(f"{conn.id}: {what} failed: {short_error(e)}", conn.config.secret_values)) from None


async def listing(conn: MCPConnector, kind: Literal["resources", "prompts"]) -> list[dict[str, Any]]:
    """The server's resources or prompts as it lists them (JSON entries), ``[]`` when it offers none.
    Raises ConnectorError."""
    session = await conn.session_now()
    if not _offers(session, kind):
        return []

    async def pages() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            if kind == "resources":
                page: Any = await session.sdk.list_resources(cursor=cursor, cache_mode="bypass")
                items = page.resources
            else:
                page = await session.sdk.list_prompts(cursor=cursor, cache_mode="bypass")
                items = page.prompts
            out += [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]
            cursor = page.next_cursor
            if not cursor or len(out) >= MAX_ITEMS:
                break
        return out[:MAX_ITEMS]

    return await _bounded(conn, f"{kind}/list", pages())


def _within(result: dict[str, Any], field: str, max_bytes: int) -> dict[str, Any]:
    """``result`` with the entries of ``field`` (``contents``, ``messages``) kept while they fit in ``max_bytes``:
    a text cut with a marker, anything else left out with a text saying so."""

    def size(v: Any) -> int:
        return len(json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8"))

    if size(result) <= max_bytes:
        return result
    room = max_bytes - size({k: v for k, v in result.items() if k != field})
    kept: list[Any] = []
    for entry in result.get(field) or []:
        holder = entry.get("content", entry) if field == "messages" else entry
        if size(entry) <= room:
            kept.append(entry)
            room -= size(entry)
            continue
        note = f"[left out by Palui: over the limit of {max_bytes} bytes]"
        if isinstance(holder.get("text"), str) and room > 300:
            cut = {**holder, "text": cap_text(holder["text"], room - 100)}
        else:
            cut = {k: v for k, v in holder.items() if k not in ("blob", "data")}
            cut["text"] = note
            if field == "messages":
                cut = {"type": "text", "text": note}
        entry = {**entry, "content": cut} if field == "messages" else cut
        kept.append(entry)
        room -= size(entry)
    return {**result, field: kept}


async def read_resource(conn: MCPConnector, uri: str) -> dict[str, Any]:
    """The server's ``resources/read`` answer for ``uri`` (JSON), within the connector's output limit.
    Raises ConnectorError."""
    session = await conn.session_now()
    got: types.ReadResourceResult = await _bounded(conn, "resources/read",
                                                   session.sdk.read_resource(uri, cache_mode="bypass"))
    return _within(got.model_dump(mode="json", by_alias=True, exclude_none=True), "contents", conn.max_output)


async def get_prompt(conn: MCPConnector, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    """The server's ``prompts/get`` answer for its prompt ``name`` (JSON), within the connector's output limit.
    Raises ConnectorError."""
    session = await conn.session_now()
    got: types.GetPromptResult = await _bounded(conn, "prompts/get", session.sdk.get_prompt(name, arguments))
    return _within(got.model_dump(mode="json", by_alias=True, exclude_none=True), "messages", conn.max_output)
