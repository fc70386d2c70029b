#!/usr/bin/env python3
"""The upgrade fixture's MCP server (stdio): ``book_table(date)`` asks the person the 2026-07-28 way.

:mod:`make_upgrade_home` copies this file into the fixture home as ``bin/books-mcp``, and the connector
stores the bare command ``books-mcp``, looked up on ``PATH`` at each start (docs/mcp.md): the stored
connector then works from any checkout and any PALUI_HOME, as long as whoever runs Palui over the
home puts ``<home>/bin`` and a Python with the ``mcp`` SDK first on ``PATH``.

The tool declares its question as a resolver (``Resolve(ask_booking)``): on a 2026-07-28 connection the
SDK answers the ``tools/call`` with ``input_required`` and a sealed ``requestState``; Palui stores the
question and sends the call again with the answer (spec §7). A restarted server must still accept that
state: the key is fixed here and the state lives 10^10 seconds (about 300 years), so the question
stored in the fixture can be answered whenever the upgrade test runs.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    RequestStateSecurity,
    Resolve,
)
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

STATE_KEY = bytes.fromhex("5a" * 32)  # a test key: the fixture's question must survive a restart
STATE_TTL = 1e10  # seconds


class Booking(BaseModel):
    confirm: bool = Field(description="Book the table?")
    party_size: int = Field(default=2, ge=1, le=12, description="How many people")
    seating: Literal["inside", "terrace"] = Field(default="inside", description="Where to sit")


def ask_booking(date: str) -> Elicit[Booking]:
    return Elicit(f"Book a table for {date}?", Booking)


def outcome(result: ElicitationResult[Any]) -> str:
    if isinstance(result, AcceptedElicitation):
        return "accept " + json.dumps(result.data.model_dump(mode="json"), sort_keys=True)
    return result.action


server = MCPServer("books", version="1.0",
                   request_state_security=RequestStateSecurity(keys=[STATE_KEY], ttl=STATE_TTL))


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def book_table(date: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]) -> str:
    """Book a table; asks the person to confirm and for the party size."""
    return f"book_table({date}): {outcome(booking)}"


if __name__ == "__main__":
    server.run("stdio")
