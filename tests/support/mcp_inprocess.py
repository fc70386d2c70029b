"""The tests' own MCP servers in the test process, through the MCP connector's seam for its transport.

The connector takes a transport factory (:data:`palui.connectors.mcp.config.TransportFactory`), as httpx
takes a transport: ``Service(mcp_transport=transport)``, and for the command line run in this process
``palui.cli.main(argv, hooks=Hooks(mcp_transport=transport))`` (``support/inprocess.py``). A test module
marked ``mcp_in_process`` gets it on its ``svc`` and ``cli`` fixtures and on ``support.inprocess.palui``.

For a stored connector whose command runs one of this directory's servers over stdio —
``mcp_hostile.py SPEC``, ``elicit_new.py [--state-key HEX] [--state-ttl S]``, ``elicit_old.py`` — :func:`transport`
builds the same server (the SDK's ``MCPServer``) in this process and returns a :class:`Wire` to it; the
connector's configuration, its stored rows and everything Palui does with the connection are those of
the real server. For anything else it returns None, and the connector starts the configured process.

What only the server's own process shows stays on stdio (None, so the fast net's guard asks for the
``slow`` mark): ``--http``, a hostile spec with a behaviour that ends or inspects the process (``crash``,
``exit_later``, ``flood``, ``noise``, ``env``) or ``stderr_on_start``. A spec rewritten later to such a
behaviour is answered in process with an error result that says so, never by ending the test process.

A server written in the test itself is an :class:`InProcessServer` (the governed call's table of cases, the
gateway's clients, flagged schemas): an HTTP connector whose URL it registers in :data:`SERVED` reaches it
through the same factory. Its listing's entries go to the client exactly as written (annotations with
strings, a schema's ``NaN``): the streams carry Python objects, nothing is re-encoded. ::

    books = InProcessServer("books", [tool("lookup", READ), tool("save", WRITE)])
    await books.add(svc)                         # palui connectors add books --url http://books.in-process.test/mcp

Each tool is a raw ``tools/list`` entry with a ``behaviour``: ``echo`` (answers ``TOOL: <arguments as
JSON>``), ``hang`` (never answers; ``started`` is set), ``text`` (its ``text``), ``result`` (its ``result``: a
``CallToolResult`` as JSON, sent as it is), ``progress`` (three progress notifications, then ``done``), ``ask``
(asks the client its ``question``, a form with its ``form`` schema, and answers with the reply as JSON).

``resources`` (``{uri: text or bytes}``) and ``prompts`` (``{name: text}``) make it offer resources and prompts;
``legacy`` makes it refuse ``server/discover``, so the connector speaks the initialize-handshake era (a question
inside an open call, ``ask``, needs that era's back-channel).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from support import elicit_new, elicit_old, mcp_hostile

HERE = Path(__file__).resolve().parent
SHUTDOWN_GRACE = 2.0  # seconds the server may take to end after the client's end of the wire closes
#: The test's own servers by the URL their HTTP connector names: each a maker of one connection's transport.
#: A test marked ``mcp_in_process`` starts with it empty (tests/conftest.py).
SERVED: dict[str, Callable[[], Any]] = {}


class Wire:
    """An SDK transport (``mcp.client.Transport``) to ``server`` running in this process.

    Every message goes through JSON on its way, both ways, exactly as the SDK's stdio transports write and
    read it (``model_dump_json(by_alias=True, exclude_unset=True)``, ``jsonrpc_message_adapter.validate_json``),
    so the client sees what a server process would send, raw annotations and malformed results included.
    ``refuse_discover``: answer ``server/discover`` with "method not found" before the server sees it, as
    the handshake-era servers of this directory do on stdio (the client then falls back to ``initialize``).
    """

    def __init__(self, server: MCPServer, *, refuse_discover: bool = False) -> None:
        self.server = server
        self.refuse_discover = refuse_discover
        self._cm: contextlib.AbstractAsyncContextManager[Any] | None = None

    async def __aenter__(self) -> Any:
        self._cm = self._connect()
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        if self._cm is not None:
            await self._cm.__aexit__(*exc)
            self._cm = None

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        lowlevel = self.server._lowlevel_server  # the SDK's own Server behind MCPServer, as run_stdio_async runs it
        client_read_in, client_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        client_write, client_write_out = anyio.create_memory_object_stream[SessionMessage](0)
        server_read_in, server_read = create_context_streams[SessionMessage | Exception](0)
        server_write, server_write_out = create_context_streams[SessionMessage](0)
        done = anyio.Event()

        async def to_server() -> None:
            async with server_read_in, client_write_out:
                async for item in client_write_out:
                    message = _over_the_wire(item)
                    if isinstance(message, Exception):
                        await server_read_in.send(message)
                        continue
                    request = message.message
                    if (self.refuse_discover and isinstance(request, types.JSONRPCRequest)
                            and request.method == "server/discover"):
                        error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                        refusal = SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error))
                        await client_read_in.send(_over_the_wire(refusal))
                        continue
                    await server_read_in.send(message)

        async def to_client() -> None:
            async with client_read_in, server_write_out:
                async for item in server_write_out:
                    await client_read_in.send(_over_the_wire(item))

        async def run_server() -> None:
            try:
                await lowlevel.run(server_read, server_write, lowlevel.create_initialization_options())
            finally:
                await server_write.aclose()
                done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(to_server)
            tg.start_soon(to_client)
            tg.start_soon(run_server)
            try:
                yield client_read, client_write
            finally:
                await client_write.aclose()  # EOF to the server, as a closed stdin
                with anyio.move_on_after(SHUTDOWN_GRACE):
                    await done.wait()
                tg.cancel_scope.cancel()


def _over_the_wire(item: SessionMessage | Exception) -> SessionMessage | Exception:
    """``item`` written as one JSON line and read back, as the SDK's stdio transports do it."""
    if isinstance(item, Exception):
        return item
    line = item.message.model_dump_json(by_alias=True, exclude_unset=True)
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as e:
        return e


def transport(config: Any) -> Any:
    """The :data:`~palui.connectors.mcp.config.TransportFactory` of the test suite: a :class:`Wire` to this
    directory's server that ``config`` starts over stdio, a connection to the :class:`InProcessServer` its URL
    names (:data:`SERVED`), or None (the configured process or URL; see the module)."""
    if config.transport == "http" and config.url in SERVED:
        return SERVED[config.url]()
    if config.transport != "stdio" or not config.args or "--http" in config.args:
        return None
    try:
        script = Path(config.args[0]).resolve()
    except (OSError, ValueError):
        return None
    rest = list(config.args[1:])
    if script == HERE / "mcp_hostile.py" and len(rest) == 1:
        spec = Path(rest[0])
        if mcp_hostile.needs_process(spec):
            return None
        return Wire(mcp_hostile.build(spec, in_process=True), refuse_discover=mcp_hostile.legacy(spec))
    if script == HERE / "elicit_new.py":
        ns = elicit_new.parser().parse_args(rest)
        return Wire(elicit_new.build_server(ns.state_key, ns.state_ttl))
    if script == HERE / "elicit_old.py" and not rest:
        return Wire(elicit_old.build_server(), refuse_discover=True)
    return None


# -- servers written in the test ------------------------------------------------------------------------------

READ = {"readOnlyHint": True}
WRITE = {"readOnlyHint": False, "destructiveHint": False}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True}
OPEN_WORLD_READ = {"readOnlyHint": True, "openWorldHint": True}
QUERY = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False}


def tool(name: str, annotations: dict[str, Any] | None, schema: dict[str, Any] | None = None,
         behaviour: str = "echo", description: str = "", **extra: Any) -> dict[str, Any]:
    """A tool as the server lists it, with how it answers a call."""
    return {"name": name, "description": description or f"The {name} tool.", "inputSchema": schema or QUERY,
            "annotations": annotations, "behaviour": behaviour, **extra}


class InProcessServer:
    """One in-process MCP server named ``name`` with ``tools`` (raw listing entries, :func:`tool`), on the SDK's
    low-level ``Server``.

    ``calls`` is every call it received, ``(tool, arguments)``, in order; ``reads`` every resource URI read and
    prompt got (``prompt:NAME``); ``started`` is set when a ``hang`` call has begun."""

    def __init__(self, name: str, tools: list[dict[str, Any]], resources: dict[str, str | bytes] | None = None,
                 prompts: dict[str, str] | None = None, legacy: bool = False) -> None:
        self.name = name
        self.legacy = legacy  # answers server/discover "method not found": the client speaks the handshake era
        self.tools = tools
        self.resources = resources or {}
        self.prompts = prompts or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.reads: list[str] = []
        self.started = asyncio.Event()
        self.url = f"http://{name}.in-process.test/mcp"
        extra: dict[str, Any] = {}
        if resources is not None:
            extra.update(on_list_resources=self._resources, on_read_resource=self._read)
        if prompts is not None:
            extra.update(on_list_prompts=self._prompts, on_get_prompt=self._prompt)
        self.server: Server[Any] = Server(name, version="1", on_list_tools=self._list, on_call_tool=self._call,
                                          **extra)

    async def _resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=uri, name=uri.rsplit("/", 1)[-1], mime_type="text/plain" if isinstance(v, str)
                           else "application/octet-stream") for uri, v in self.resources.items()])

    async def _read(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        self.reads.append(uri)
        v = self.resources[uri]
        content: Any = (types.TextResourceContents(uri=uri, mime_type="text/plain", text=v) if isinstance(v, str)
                        else types.BlobResourceContents(uri=uri, mime_type="application/octet-stream",
                                                        blob=base64.b64encode(v).decode()))
        return types.ReadResourceResult(contents=[content])

    async def _prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name=n, description=f"The {n} prompt.")
                                                for n in self.prompts])

    async def _prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        self.reads.append(f"prompt:{params.name}")
        return types.GetPromptResult(messages=[types.PromptMessage(
            role="user", content=types.TextContent(text=self.prompts[params.name]))])

    def wire(self) -> list[dict[str, Any]]:
        """The listing as sent: each tool's name, description, schema and annotations exactly as written."""
        return [{k: v for k, v in t.items() if k in ("name", "description", "inputSchema", "annotations")
                 and v is not None} for t in self.tools]

    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])  # its tools are replaced by the raw listing on the way out

    @contextlib.asynccontextmanager
    async def transport(self) -> AsyncIterator[tuple[Any, Any]]:
        """One connection to this server: in-memory streams, the server running on the far side, and each
        ``tools/list`` answer's tools replaced by :meth:`wire` on its way to the client."""
        c2s_send, c2s_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
        s2c_send, s2c_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
        in_send, in_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
        out_send, out_recv = anyio.create_memory_object_stream[SessionMessage](100)
        listings: set[Any] = set()

        async def up() -> None:
            async for item in c2s_recv:
                msg = getattr(item, "message", None)
                if isinstance(msg, types.JSONRPCRequest) and msg.method == "tools/list":
                    listings.add(msg.id)
                if self.legacy and isinstance(msg, types.JSONRPCRequest) and msg.method == "server/discover":
                    error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                    await s2c_send.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=msg.id, error=error)))
                    continue
                await in_send.send(item)

        async def down() -> None:
            async for item in out_recv:
                msg = item.message
                if isinstance(msg, types.JSONRPCResponse) and msg.id in listings:
                    item = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=msg.id,
                                                                result={**msg.result, "tools": self.wire()}))
                await s2c_send.send(item)

        async def serve() -> None:
            await self.server.run(in_recv, out_send, self.server.create_initialization_options())

        async with anyio.create_task_group() as tg:
            for part in (up, down, serve):
                tg.start_soon(part)
            try:
                yield s2c_recv, c2s_send
            finally:
                tg.cancel_scope.cancel()

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        self.calls.append((params.name, args))
        spec = next((t for t in self.tools if t["name"] == params.name), None)
        if spec is None:
            return types.CallToolResult(content=[types.TextContent(text=f"no tool {params.name}")], is_error=True)
        if spec["behaviour"] == "hang":
            self.started.set()
            await anyio.sleep_forever()
        if spec["behaviour"] == "result":
            return types.CallToolResult.model_validate(spec["result"], by_name=False)
        if spec["behaviour"] == "progress":
            token = (ctx.meta or {}).get("progress_token")
            for i in range(3):
                if token is not None:
                    await ctx.session.send_progress_notification(token, float(i + 1), 3.0, f"step {i + 1}",
                                                                 related_request_id=str(ctx.request_id))
            return types.CallToolResult(content=[types.TextContent(text="done")])
        if spec["behaviour"] == "ask":
            got = await ctx.session.elicit_form(spec["question"], spec["form"], related_request_id=ctx.request_id)
            answer = {"action": got.action, "content": got.content}
            return types.CallToolResult(content=[types.TextContent(text=json.dumps(answer, sort_keys=True))])
        text = spec.get("text") if spec["behaviour"] == "text" else f"{params.name}: {json.dumps(args, sort_keys=True)}"
        return types.CallToolResult(content=[types.TextContent(text=str(text))])

    async def add(self, svc: Any, *, enable: tuple[str, ...] = ()) -> str:
        """Add the server as connector ``mcp-NAME`` (its tools listed and stored, new tools off), switch on the
        tools named in ``enable`` (raw names), and return the connector id. ``svc`` reaches its MCP servers
        through :func:`transport`: a test marked ``mcp_in_process`` (its ``svc``, ``support.inprocess.service()``)."""
        from palui.text.mcp_config import ServerConfig

        assert svc._hub.env.mcp_transport is transport, \
            "this service reaches MCP servers through their real transports: mark the test mcp_in_process"
        SERVED[self.url] = self.transport
        added = await svc.connectors.add_async(self.name, ServerConfig(transport="http", url=self.url))
        cid = added["id"]
        if enable:
            svc.tools.set_enabled([f"{cid}__{n}" for n in enable], True)
        return cid

    def forget(self) -> None:
        SERVED.pop(self.url, None)


@contextlib.asynccontextmanager
async def never_answers() -> AsyncIterator[tuple[Any, Any]]:
    """An SDK ``Transport`` whose server never answers anything (not even ``initialize``): a connector that
    hangs at its start (``SERVED[url] = never_answers``)."""
    to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    try:
        yield to_client_recv, to_server_send
    finally:
        for s in (to_server_send, to_server_recv, to_client_send, to_client_recv):
            await s.aclose()
