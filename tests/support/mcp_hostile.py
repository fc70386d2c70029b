"""A small, configurable, hostile MCP server for Palui's tests, built on the mcp SDK's ``MCPServer``.

Usage::

    python mcp_hostile.py SPEC.json            # stdio
    python mcp_hostile.py SPEC.json --http     # streamable HTTP on 127.0.0.1, a free port;
                                               # prints "PORT <n>" on stdout once listening
    python mcp_hostile.py SPEC.json --http --port N   # on port N (a server started again where it was)

SPEC.json is read again on every request, so a test changes the server's tool list
between two listings by rewriting the file::

    {"legacy": false,              # refuse server/discover (stdio and HTTP), so the client falls back to initialize
     "calls_log": null,            # a file: each tools/call delivered appends its tool name and a newline
     "stderr_on_start": 0,         # bytes written to stderr before serving
     "require_header": null,       # ["Authorization", "Bearer x"]: HTTP requests without it get 401
     "tools": [{"name": "echo", "description": "...", "inputSchema": {...},
                "annotations": {...},          # sent exactly as written (strings, absent keys)
                "behaviour": "echo"}]}

Behaviours of ``tools/call``: ``echo`` (the arguments back), ``hang`` (never answers),
``crash`` (the process exits mid-call), ``exit_later`` (answers, then exits while idle), ``big``
(``bytes`` characters, default 10 MB), ``flood`` (``bytes`` of stderr, default 4 MiB, then an answer),
``noise`` (``lines`` lines on stdout that are not JSON-RPC, default 20,000, then an answer), ``fail`` (an
``isError`` result), ``malformed`` (a result that is not a CallToolResult), ``env`` (the value of
environment variable ``name``), ``caps`` (the client capabilities the server received, as JSON),
``mutate`` (replace the tool list with ``tools`` and send
``notifications/tools/list_changed`` in both protocol eras), ``text`` (the tool's own ``text`` field),
``hang_first`` (never answers the first delivery of this tool in ``calls_log``, echoes later ones: a server
killed mid-call and started again).

In the test process, :func:`build` makes the same server for ``support/mcp_inprocess.py`` (there the
behaviours that end or inspect the process answer an error instead).

The SDK's own tool registry cannot send raw annotation values (it validates
``"true"`` into ``true``) nor list a name twice, so a server middleware answers
``tools/list`` and ``tools/call`` from SPEC.json; the rest (handshakes in both eras,
``subscriptions/listen``, transports) is the SDK's.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged
from mcp.shared.message import SessionMessage
from mcp_types import METHOD_NOT_FOUND, ErrorData, JSONRPCError, JSONRPCRequest
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

try:
    from support.tcp import listen_tcp
except ImportError:  # run as a program: tests/support is first on sys.path
    from tcp import listen_tcp  # type: ignore[no-redef]

# The SDK's stdio server points fd 1 at stderr while it serves (so a stray print cannot corrupt the wire):
# ``noise`` writes to this copy of the real stdout (made by main()), as a server that prints to its stdout does.
WIRE: int | None = None
_WIRE_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta")
#: Behaviours that end or inspect the server's own process: a server built ``in_process`` answers them with an
#: error result (support/mcp_inprocess.py runs such a spec over stdio instead).
PROCESS_BEHAVIOURS = frozenset({"crash", "exit_later", "flood", "noise", "env"})


def read_spec(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def needs_process(path: Path) -> bool:
    """The spec at ``path`` shows something only the server's own process shows (a behaviour of
    :data:`PROCESS_BEHAVIOURS`, ``stderr_on_start``, a required HTTP header)."""
    s = read_spec(path)
    return bool(s.get("stderr_on_start") or s.get("require_header")
                or any(t.get("behaviour") in PROCESS_BEHAVIOURS for t in s.get("tools", [])))


def legacy(path: Path) -> bool:
    """The spec at ``path`` asks for a pre-2026 server (``server/discover`` refused)."""
    return bool(read_spec(path).get("legacy"))


def text_result(text: str, *, error: bool = False, modern: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
    if modern:
        out["resultType"] = "complete"
    return out


def build(spec_path: Path, *, in_process: bool = False) -> MCPServer:
    """The server for the spec at ``spec_path`` (read again on every request). ``in_process``: it runs in
    the test process (support/mcp_inprocess.py), so the behaviours that end or inspect its process
    (:data:`PROCESS_BEHAVIOURS`) answer an error result instead."""
    bus = InMemorySubscriptionBus()
    server = MCPServer("palui-hostile", version="1.0", subscriptions=bus)

    async def middleware(ctx, call_next):
        s = read_spec(spec_path)
        if ctx.method == "tools/list":
            result = dict(await call_next(ctx))
            result["tools"] = [{k: t[k] for k in _WIRE_KEYS if k in t} for t in s.get("tools", [])]
            return result
        if ctx.method != "tools/call":
            return await call_next(ctx)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        params = dict(ctx.params or {})
        name, args = params.get("name"), params.get("arguments") or {}
        delivered = 0
        if s.get("calls_log"):
            log = Path(s["calls_log"])
            delivered = log.read_text().split().count(str(name)) if log.exists() else 0
            with log.open("a") as f:
                f.write(f"{name}\n")
        tool = next((t for t in s.get("tools", []) if t["name"] == name), None)
        if tool is None:
            return text_result(f"no tool {name!r}", error=True, modern=modern)
        behaviour = tool.get("behaviour", "echo")
        if in_process and behaviour in PROCESS_BEHAVIOURS:
            return text_result(f"behaviour {behaviour!r} needs the server's own process: run it over stdio",
                               error=True, modern=modern)
        if behaviour == "echo":
            return text_result("echo: " + json.dumps(args, sort_keys=True), modern=modern)
        if behaviour == "hang" or (behaviour == "hang_first" and delivered == 0):
            await anyio.sleep(3600)
        if behaviour == "hang_first":
            return text_result("echo: " + json.dumps(args, sort_keys=True), modern=modern)
        if behaviour == "crash":
            sys.stderr.write("crashing on purpose\n")
            sys.stderr.flush()
            os._exit(7)
        if behaviour == "exit_later":
            threading.Timer(float(args.get("seconds", 0.2)), os._exit, (9,)).start()
            return text_result("exiting soon", modern=modern)
        if behaviour == "big":
            return text_result("x" * int(args.get("bytes", 10_000_000)), modern=modern)
        if behaviour == "flood":
            chunk = ("flood " * 1000 + "\n").encode()
            left = int(args.get("bytes", 4 * 1024 * 1024))
            while left > 0:
                os.write(2, chunk[:left])
                left -= len(chunk)
            return text_result("flooded", modern=modern)
        if behaviour == "noise" and WIRE is not None:  # stdio: lines on stdout, the protocol's channel, not JSON-RPC
            line = b"progress: working on it... not a JSON-RPC message\n"
            for _ in range(int(args.get("lines", 20_000)) // 50):
                os.write(WIRE, line * 50)  # under PIPE_BUF: each write lands whole between the SDK's messages
            return text_result("noisy", modern=modern)
        if behaviour == "text":
            return text_result(str(tool.get("text", "")), modern=modern)
        if behaviour == "fail":
            return text_result("failed on purpose", error=True, modern=modern)
        if behaviour == "malformed":
            return {"content": "not a list of content blocks", "isError": "maybe"}
        if behaviour == "caps":
            caps = ctx.session.client_capabilities
            dumped = caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps is not None else None
            return text_result(json.dumps(dumped, sort_keys=True), modern=modern)
        if behaviour == "env":
            return text_result(os.environ.get(str(args.get("name")), "<unset>"), modern=modern)
        if behaviour == "mutate":
            s["tools"] = args["tools"]
            spec_path.write_text(json.dumps(s))
            if modern:
                await bus.publish(ToolsListChanged())
            else:
                await ctx.session.send_tool_list_changed()
            return text_result("mutated", modern=modern)
        return text_result(f"unknown behaviour {behaviour!r}", error=True, modern=modern)

    server.middleware.append(middleware)
    return server


def require_header(app, header: tuple[str, str]):
    """ASGI wrapper: 401 unless the request carries the header (checks the secret headers arrive)."""
    key, value = header[0].lower().encode(), header[1].encode()

    async def wrapped(scope, receive, send):
        if scope["type"] == "http" and dict(scope.get("headers") or []).get(key) != value:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing or wrong header"})
            return
        await app(scope, receive, send)

    return wrapped


def refuse_discover(app):
    """ASGI wrapper: a pre-2026 HTTP server, whose answer to ``server/discover`` is "method not found"
    (the client then falls back to ``initialize``, the 2025-11-25 era with its ``Mcp-Session-Id``)."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks, more = [], True
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
            out = json.dumps({"jsonrpc": "2.0", "id": msg.get("id"),
                              "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": out})
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


async def run_legacy_stdio(server: MCPServer) -> None:
    """Serve stdio as a pre-2026 server: ``server/discover`` is answered "method not found".

    The SDK's server speaks both eras and lets the first request choose, so the
    refusal happens in front of it, on the stream, before the era is settled.
    """
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write):
        inner_send, inner_read = anyio.create_memory_object_stream(0)

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


def main() -> None:
    global WIRE
    WIRE = os.dup(1)
    spec_path = Path(sys.argv[1])
    s = read_spec(spec_path)
    server = build(spec_path)
    if s.get("stderr_on_start"):
        os.write(2, b"e" * int(s["stderr_on_start"]))
    if "--http" not in sys.argv:
        if s.get("legacy"):
            anyio.run(run_legacy_stdio, server)
        else:
            server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app()
    if s.get("legacy"):
        app = refuse_discover(app)
    if s.get("require_header"):
        app = require_header(app, tuple(s["require_header"]))
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    # a new server listens before the old one is killed; connections wait in the backlog until uvicorn accepts them
    sock = listen_tcp("127.0.0.1", port, reuse_port=True)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
