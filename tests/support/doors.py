"""The two doors of the governed call, driven in process: a chat turn (a ``script:`` model) and a gateway session
(the MCP SDK's own client over ``httpx2``'s ASGI transport, against the service's app, ``/mcp`` included), both
against the same in-process MCP server (``support/mcp_inprocess.py``).

Nothing here starts a process or opens a socket: the app's lifespan runs in the test's event loop, the SDK's
client speaks streamable HTTP to it through the ASGI transport (responses are read whole, so progress
notifications arrive with the answer), and Palui's connector reaches the MCP server through the SDK's in-memory
transport. What each door saw of one call is a :class:`Seen`: the audit rows it left, what the caller was told,
the approval it made, what it stored.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support.scripts import write_script

BASE = "http://127.0.0.1:8765"
TOKEN = "service-token"
ASKED_BY = "; asked by the gateway client {client}"


@dataclass
class Seen:
    """What one door left of a call: its audit rows ``(verdict, reason, outcome)`` (a gateway row's ``client`` and
    ``session`` columns checked there: option ``client``), what the caller was ``told`` (None: the call is held,
    the turn paused), the ``approval``'s reason if one was made (the client's name taken off its end), and
    whether anything was ``stored`` for it (an event, an approval, untrusted content)."""

    rows: list[tuple[str, str, str]]
    told: str | None
    approval: str | None
    stored: bool


def _strip_client(reason: str, client: str | None) -> str:
    """An approval's reason without ``; asked by the gateway client NAME`` (option ``client``)."""
    if client is None:
        return reason
    assert reason.endswith(ASKED_BY.format(client=client)), reason
    return reason.removesuffix(ASKED_BY.format(client=client))


def _row(r: Any, client: str | None) -> tuple[str, str, str]:
    """An audit row as compared across the doors; a gateway row names its client and session in their columns."""
    if client is None:
        assert r["client"] is None and r["session"] is None, dict(r)
    else:  # every gateway audit row carries the client and session in columns of their own (option ``client``)
        assert r["client"] == client and str(r["session"]).startswith("g-"), dict(r)
        return r["verdict"], r["reason"].replace(ASKED_BY.format(client=client), ""), r["outcome"]
    return r["verdict"], r["reason"], r["outcome"]


def _counts(svc: Any) -> tuple[int, int, int, int]:
    db = svc.db
    return (db.row("SELECT COALESCE(MAX(id), 0) FROM audit")[0], db.row("SELECT COUNT(*) FROM approvals")[0],
            db.row("SELECT COUNT(*) FROM untrusted_content")[0], db.row("SELECT COUNT(*) FROM turn_events")[0])


def _seen_since(svc: Any, before: tuple[int, int, int, int], told: str | None, client: str | None,
                events_after: int | None = None) -> Seen:
    db = svc.db
    rows = [_row(r, client) for r in db.all("SELECT verdict, reason, outcome, client, session FROM audit WHERE id > ?"
                                            " ORDER BY id", (before[0],))]
    approvals = db.all("SELECT reason FROM approvals ORDER BY rowid LIMIT -1 OFFSET ?", (before[1],))
    approval = _strip_client(approvals[-1]["reason"], client) if approvals else None
    after = _counts(svc)
    events = after[3] - before[3] if events_after is None else events_after
    stored = bool(rows) or after[1] > before[1] or after[2] > before[2] or events > 0
    return Seen(rows, told, approval, stored)


class TurnDoor:
    """Calls made by a chat turn's model: each call a step of one scripted turn, the tested call last. An ask
    pauses the turn; ``deny`` answers it (the turn resumes) before the model's next step."""

    client = None

    def __init__(self, svc: Any, tmp: Path) -> None:
        self.svc = svc
        self.tmp = tmp

    async def run(self, calls: list[tuple[str, Any, str | None]]) -> Seen:
        steps = [{"tool_calls": [{"tool": tool, "args": args}]} for tool, args, _ in calls] + [{"text": "done"}]
        model = write_script(self.tmp / "door.json", *steps)
        tested = len(calls)  # the step of the tested call
        marks: dict[str, Any] = {}

        def on_event(e: dict[str, Any]) -> None:
            if e.get("type") == "step" and e.get("step") == tested and "before" not in marks:
                marks["before"] = _counts(self.svc)

        r = await self.svc.turns.send("go", model=model, on_event=on_event)
        while r["status"] == "awaiting_approval":
            [a] = r["pending_approvals"]
            step_of = int(a["tool_call_id"][1:].split("c")[0])
            if step_of == tested:
                break  # the tested call is held
            assert calls[step_of - 1][2] == "deny", f"step {step_of} asked and its case gives no answer"
            r = await self.svc.approvals.answer_and_resume(a["id"], False, "cli", on_event=on_event)
        self.result = r
        told = None
        from palui.runner import state as st

        for m in st.load(self.svc.db, r["turn"]).messages:
            for p in getattr(m, "parts", []):
                if p.part_kind == "tool-return" and p.tool_call_id == f"s{tested}c1":
                    told = p.content
        return _seen_since(self.svc, marks["before"], told, None, events_after=_tested_events(r, tested))


def _tested_events(result: dict[str, Any], tested: int) -> int:
    """The events the tested call left: those after its step's ``step`` event, before the next step's."""
    out, inside = 0, False
    for e in result["events"]:
        if e["type"] == "step":
            inside = e.get("step") == tested
        elif inside and e["type"] in ("tool_call", "approval", "tainted"):
            out += 1
    return out


class GatewayDoor:
    """Calls made by another MCP client through the gateway: the SDK's client over the ASGI transport, one
    session. A call answered ``approval pending`` whose case says ``deny`` has its approval denied before the
    next call; ``raw`` arguments (a JSON text, such as ``{"q": NaN}``, which the SDK's client cannot send) are
    posted as the JSON-RPC request itself, in the same session."""

    def __init__(self, svc: Any, app: Any, token: str, client: str) -> None:
        self.svc = svc
        self.app = app
        self.token = token
        self.client = client
        self.session_id: str | None = None

    @asynccontextmanager
    async def connected(self, elicitation_callback: Any = None):
        """One MCP session of the client (declaring elicitation when ``elicitation_callback`` answers it)."""
        async def note(response: httpx2.Response) -> None:
            sid = response.headers.get("mcp-session-id")
            if sid:
                self.session_id = sid

        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(self.app), base_url=BASE, timeout=60,
                                      headers={"Authorization": f"Bearer {self.token}"},
                                      event_hooks={"response": [note]}) as http:
            async with Client(streamable_http_client(f"{BASE}/mcp", http_client=http), mode="auto",
                              elicitation_callback=elicitation_callback) as c:
                self.http, self.mcp = http, c
                yield self

    async def call(self, tool: str, args: Any) -> tuple[str, bool]:
        """What the client is told of one call: its text and ``isError``."""
        if isinstance(args, str):  # raw JSON text of the arguments
            body = ('{"jsonrpc": "2.0", "id": 9001, "method": "tools/call", "params": {"name": '
                    + json.dumps(tool) + ', "arguments": ' + args + "}}")
            headers = {"mcp-session-id": self.session_id or "", "mcp-protocol-version": self.mcp.protocol_version,
                       "accept": "application/json, text/event-stream", "content-type": "application/json"}
            r = await self.http.post("/mcp", content=body, headers=headers)
            data = r.json() if r.headers.get("content-type", "").startswith("application/json") else next(
                json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:"))
            if "error" in data:
                return f"JSON-RPC error {data['error']['code']}: {data['error']['message']}", True
            content = data["result"]["content"]
            return "".join(c.get("text", "") for c in content), bool(data["result"].get("isError"))
        r = await self.mcp.call_tool(tool, args)
        return "".join(getattr(c, "text", "") for c in r.content), bool(r.is_error)

    async def run(self, calls: list[tuple[str, Any, str | None]]) -> Seen:
        await self.mcp.list_tools()  # opens the session
        for tool, args, answer in calls[:-1]:
            text, _ = await self.call(tool, args)
            if answer == "deny":
                assert "approval pending: " in text, text
                aid = text.split("approval pending: ")[1].split(".")[0]
                self.svc.approvals.answer(aid, False, "cli")
        before = _counts(self.svc)
        text, _ = await self.call(*calls[-1][:2])
        return _seen_since(self.svc, before, text, self.client)


@asynccontextmanager
async def app_running(svc: Any):
    """The service's app (``/mcp`` included) with its lifespan entered in this event loop."""
    from palui.server.app import create_app

    guard = create_app(svc, TOKEN, port=8765)
    async with guard.app.router.lifespan_context(guard.app):
        yield guard
