"""The gateway's clients, the tools it offers a session, and a call's answer (spec §8.6)."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict

GatewayTool = TypedDict("GatewayTool", {
    "name": str, "description": str, "input_schema": dict[str, Any], "read_only": bool, "destructive": bool,
    "open_world": bool, "class": str,
})
GatewayTool.__doc__ = """A tool as the gateway lists it to a client: its model-visible ``name`` (at most 64 characters),
pinned ``description`` and ``input_schema``, the hints from its effective ``class`` (``read_only``,
``destructive``) and ``open_world`` when it reaches outside (spec §4.5)."""


class GatewayClient(TypedDict):
    """A gateway client: ``connectors`` it sees (None: every MCP connector), ``context`` ``unknown`` (sessions
    start tainted) or ``trusted``; ``created_at`` epoch seconds; ``open_sessions`` now; ``calls_per_hour`` its
    own cap (None: ``caps.gateway_client_calls_per_hour``). ``token`` only in the answer to adding it (shown
    once, stored hashed)."""

    name: str
    connectors: list[str] | None
    context: str
    created_at: float
    open_sessions: int
    calls_per_hour: int | None
    token: NotRequired[str]


class GatewayCallResult(TypedDict):
    """What a gateway call answers the client: ``result``, the MCP ``CallToolResult`` as its server sent it (JSON:
    every content type, ``structuredContent``, ``isError``; None for a built-in tool's answer or Palui's own), and
    ``text``, the result as a model reads it or an error saying why the call did not run (``is_error``)."""

    text: str
    is_error: bool
    result: dict[str, Any] | None


class GatewaySessionInfo(TypedDict):
    """A gateway session (``palui gateway sessions``): its ``client``, when it opened (``created_at``), was last used
    and ended (epoch seconds; ``ended_at`` None while open) and why, and the ``calls`` it made (audit rows)."""

    id: str
    client: str
    created_at: float
    last_used_at: float
    ended_at: float | None
    end_reason: str | None
    calls: int
