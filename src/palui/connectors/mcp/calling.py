"""Small pieces of an MCP call (spec §7): the call's clock that stops while a question waits, a refused
request state, the taint of a result, whether a restart moved the tool's definition, short error texts.
Used by :class:`~palui.connectors.mcp.connector.MCPConnector`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError


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

