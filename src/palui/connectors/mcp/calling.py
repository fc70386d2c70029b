"""Small pieces of an MCP call (spec §7): the call's clock that stops while a question waits, a refused
request state, the taint of a result, whether a restart moved the tool's definition, short error texts,
the result of an error the SDK raised. Used by :class:`~palui.connectors.mcp.connector.MCPConnector`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

if TYPE_CHECKING:
    from palui.connectors.base import CallContext, ToolResult
    from palui.connectors.mcp.client import MCPSession
    from palui.store.tools import ToolRow


def stopper(clock: asyncio.Timeout):
    """``on_wait`` for a call's clock: it stops while a question waits for the person, then goes on
    with the time that was left (spec §7: the per-call timeout does not run meanwhile)."""
    left: list[float] = []

    def on_wait(waiting: bool) -> None:
        now = asyncio.get_running_loop().time()
        if waiting:
            when = clock.when()
            left.append(max(when - now, 0.0) if when is not None else 0.0)
            clock.reschedule(None)
        elif left:
            clock.reschedule(now + left.pop())

    return on_wait


def state_refused(e: MCPError) -> bool:
    """The server refused the ``requestState`` of a retried call (MCP 2026-07-28: -32602, reason
    ``invalid_request_state``)."""
    data = e.data if isinstance(getattr(e, "data", None), dict) else {}
    return e.code == types.INVALID_PARAMS and (data.get("reason") == "invalid_request_state"
                                               or "requeststate" in (e.message or "").lower())


def untrusted_result(row: dict[str, Any] | None) -> bool:
    """Taint of this tool's results (spec §4): untrusted unless tool or connector is a trusted source."""
    if row is None:
        return True
    return bool(row["untrusted_output"]) and not (row["tool_trusted"] or row["connector_trusted"])


def row_facts(r: ToolRow) -> dict[str, Any]:
    """What a call needs of its tool's stored row: names, definition, class, switch and flags, taint sources,
    and whether its connector waits for a sign-in."""
    return {"name": r.name, "definition_hash": r.definition_hash, "user_class": r.user_class,
            "base_class": r.base_class, "enabled": r.enabled, "changed": r.changed, "present": r.present,
            "tool_class": r.tool_class.value, "tool_trusted": r.trusted_source,
            "untrusted_output": r.untrusted_output, "connector_trusted": r.connector_trusted,
            "signed_out": r.connector_signin}


def definition_moved(before: dict[str, Any] | None, after: dict[str, Any] | None) -> bool:
    if before is None or after is None:
        return True
    keys = ("definition_hash", "user_class", "base_class", "enabled", "changed", "present")
    return any(before[k] != after[k] for k in keys)


def short_error(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        return short_error(e.exceptions[0])
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"[:300] if text else type(e).__name__


def consume_exception(task: asyncio.Task) -> None:
    # Callers that gave up waiting (their deadline passed) never read the exception.
    if not task.cancelled():
        task.exception()


async def error_result(cid: str, timeout: float, http: bool, e: MCPError, session: MCPSession,
                       ctx: CallContext | None, deadline: float, result: Callable[..., ToolResult],
                       lost: Callable[[str], None], needs_sign_in: Callable[[str | None], None],
                       redact: Callable[[str], str]) -> ToolResult:
    """The result of a call of connector ``cid`` the SDK answered with ``e`` (not a lost session it recovers
    from): a timeout (``timeout`` seconds), a refused question state, a sign-in needed, a refresh outage, a
    closed connection (``lost`` is told why), or the server's own error (``redact`` takes the secrets out).
    ``result`` makes the result."""
    loop = asyncio.get_running_loop()
    if e.code == types.REQUEST_TIMEOUT:
        return result(f"The tool did not answer within {timeout:g} s.", True)
    if ctx is not None and ctx.resume is not None and state_refused(e):
        return result("The server could not resume the call (it no longer accepts the state of its "
                      "question): ask again.", True)
    if e.code == types.CONNECTION_CLOSED and session.sign_in_needed:
        lost("the server needs a new sign-in")
        needs_sign_in(session.sign_in_needed)
        return result(f"The MCP server {cid} needs you to sign in again (palui connectors login "
                      f"{cid}); the call was not finished.", True, down=True)
    if e.code == types.CONNECTION_CLOSED and session.refresh_unavailable:
        lost(session.refresh_unavailable)
        return result(f"The MCP server {cid} {session.refresh_unavailable}; the call was not sent.", True,
                      down=True)
    if e.code == types.CONNECTION_CLOSED:
        if http:
            lost("the connection closed during a call")
            return result(f"The MCP server {cid} closed the connection during the call; "
                          "Palui reconnects on next use.", True, down=True)
        lost("the server exited during a call")
        await session.stderr_settled(min(0.5, max(deadline - loop.time(), 0)))
        tail = session.stderr_tail()
        return result(f"The MCP server {cid} exited during the call; it restarts on next use."
                      + (f"\nLast lines of its stderr:\n{tail}" if tail else ""), True, down=True)
    return result(redact(f"The MCP server answered with an error: {e.message} (code {e.code})"), True,
                  from_server=True)
