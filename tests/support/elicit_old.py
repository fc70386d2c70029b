"""A test MCP server that elicits the handshake-era way: ``ctx.elicit(...)`` inside an open tool call.

It always speaks the older protocol (2025-11-25): ``server/discover`` is answered "method not
found" in front of the SDK's ``MCPServer`` (on the stdio stream, or by an ASGI wrapper for HTTP:
a server middleware is too late, the SDK settles the era before middleware runs), so a
``Client(mode="auto")`` falls back to ``initialize``. Each elicitation is a server->client
``elicitation/create`` request that the client answers while the ``tools/call`` is still open.

Usage::

    python elicit_server_old.py            # stdio
    python elicit_server_old.py --http     # streamable HTTP on 127.0.0.1, a free port;
                                           # prints "PORT <n>" on stdout once listening

Tools (all ``readOnlyHint: false``):

- ``book_table(date)`` - one form question (``confirm``: boolean, ``party_size``: integer with a
  default, ``seating``: enum with a default, ``note``: optional string); the result says which
  action came back and the content.
- ``ask_many(count)`` - ``count`` form questions one after the other in one call (the "too many
  questions" case); the result lists the actions.
- ``open_link(url)`` - one URL-mode elicitation (``elicitation_id`` generated).
- ``nested_schema()`` - a form question whose requested schema is *not* flat (an object inside an
  object), sent raw past the SDK's schema rendering: a client must decline it.
- ``slow_question(seconds)`` - asks, then waits ``seconds`` before answering (a call that stays
  open after the answer).
- ``contact_form()`` - a form of string fields with the spec's formats (``email``, ``uri``, ``date``,
  ``date-time``), sent raw; the result echoes the content.
- ``sign_up()`` - a form that asks for a secret (``username``, ``password``, which MCP forbids); the
  result says the password's length and the start of its SHA-256, never the password.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import uuid
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import AcceptedElicitation, CancelledElicitation, Context, DeclinedElicitation, MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import METHOD_NOT_FOUND, ErrorData, JSONRPCError, JSONRPCRequest, ToolAnnotations
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

try:
    from support.tcp import listen_tcp
except ImportError:  # run as a program: tests/support is first on sys.path
    from tcp import listen_tcp  # type: ignore[no-redef]

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False)


class Booking(BaseModel):
    confirm: bool = Field(description="Book the table?")
    party_size: int = Field(default=2, ge=1, le=12, description="How many people")
    seating: Literal["inside", "terrace"] = Field(default="inside", description="Where to sit")
    note: str | None = Field(default=None, description="Anything the restaurant should know")


class Answer(BaseModel):
    value: str = Field(description="Your answer")


class SignUp(BaseModel):
    username: str = Field(description="Your user name")
    password: str = Field(description="Choose a password")


def signed_up(result: AcceptedElicitation[Any] | DeclinedElicitation | CancelledElicitation) -> str:
    """What ``sign_up`` answers: never the password, only its length and the start of its SHA-256."""
    if isinstance(result, AcceptedElicitation):
        pw = result.data.password
        return (f"sign_up: accept {result.data.username}, a password of {len(pw)} characters, sha256 "
                f"{hashlib.sha256(pw.encode()).hexdigest()[:12]}")
    return f"sign_up: {result.action}"


server = MCPServer("elicit-old", version="1.0")


def build_server() -> MCPServer:
    """The server (one per process: it keeps nothing between calls), for support/mcp_inprocess.py."""
    return server


def _outcome(result: AcceptedElicitation[Any] | DeclinedElicitation | CancelledElicitation) -> str:
    if isinstance(result, AcceptedElicitation):
        data = result.data.model_dump(mode="json") if isinstance(result.data, BaseModel) else result.data
        return "accept " + json.dumps(data, sort_keys=True)
    return result.action


@server.tool(annotations=WRITE)
async def book_table(date: str, ctx: Context) -> str:
    """Book a table; asks the person to confirm and for the party size."""
    result = await ctx.elicit(f"Book a table for {date}?", Booking)
    return f"book_table({date}): {_outcome(result)}"


@server.tool(annotations=WRITE)
async def ask_many(count: int, ctx: Context) -> str:
    """Ask ``count`` questions in a row within one call."""
    actions = []
    for i in range(1, count + 1):
        result = await ctx.elicit(f"Question {i} of {count}", Answer)
        actions.append(_outcome(result))
        if not isinstance(result, AcceptedElicitation):
            break
    return "ask_many: " + "; ".join(actions)


@server.tool(annotations=WRITE)
async def open_link(url: str, ctx: Context) -> str:
    """Ask the person to open ``url`` (URL mode)."""
    elicitation_id = str(uuid.uuid4())
    result = await ctx.elicit_url("Please open this page to link your account.", url, elicitation_id)
    return f"open_link: {result.action} (elicitation {elicitation_id})"


@server.tool(annotations=WRITE)
async def nested_schema(ctx: Context) -> str:
    """Ask with a requested schema that is not flat (a client must refuse it)."""
    schema = {"type": "object", "properties": {
        "address": {"type": "object", "properties": {"street": {"type": "string"}}}}}
    result = await ctx.request_context.session.elicit_form("Where do you live?", schema,
                                                         related_request_id=ctx.request_id)
    return f"nested_schema: {result.action}"


@server.tool(annotations=WRITE)
async def contact_form(ctx: Context) -> str:
    """Ask for an email, a web page, a date and a date-time (string fields with a ``format``)."""
    schema = {"type": "object", "properties": {
        "email": {"type": "string", "format": "email"}, "homepage": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "date-time"}},
        "required": ["email"]}
    result = await ctx.request_context.session.elicit_form("How do we reach you?", schema,
                                                         related_request_id=ctx.request_id)
    return f"contact_form: {result.action} {json.dumps(result.content, sort_keys=True)}"


@server.tool(annotations=WRITE)
async def slow_question(seconds: float, ctx: Context) -> str:
    """Ask, then keep the call open ``seconds`` more."""
    result = await ctx.elicit("Continue?", Answer)
    await anyio.sleep(seconds)
    return f"slow_question: {_outcome(result)}"


@server.tool(annotations=WRITE)
async def sign_up(ctx: Context) -> str:
    """Create an account; asks for a user name and a password (a secret: MCP forbids asking for it)."""
    return signed_up(await ctx.elicit("Create your account", SignUp))


# -- looking pre-2026: refuse server/discover in front of the SDK ------------------------------------------


async def run_legacy_stdio() -> None:
    """Serve stdio, answering ``server/discover`` with "method not found" before the SDK sees it."""
    lowlevel = server._lowlevel_server  # the SDK's lowlevel Server behind MCPServer
    async with stdio_server() as (read, write):
        inner_send, inner_read = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            async with inner_send:
                async for item in read:
                    msg = getattr(item, "message", None)
                    if isinstance(msg, JSONRPCRequest) and msg.method == "server/discover":
                        error = ErrorData(code=METHOD_NOT_FOUND, message="Method not found")
                        await write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=msg.id, error=error)))
                        continue
                    await inner_send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            await lowlevel.run(inner_read, write, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()


def refuse_discover_http(app: ASGIApp) -> ASGIApp:
    """ASGI wrapper: a POSTed ``server/discover`` gets a JSON-RPC "method not found"; the rest goes to ``app``."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            msg = json.loads(body)
        except ValueError:
            msg = None
        if isinstance(msg, dict) and msg.get("method") == "server/discover":
            payload = json.dumps({"jsonrpc": "2.0", "id": msg.get("id"),
                                  "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 (prints PORT n)")
    ns = parser.parse_args(argv)
    if not ns.http:
        anyio.run(run_legacy_stdio)
        return
    import uvicorn

    sock = listen_tcp()
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(refuse_discover_http(server.streamable_http_app()), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
