"""An MCP server inside the test process: the SDK's low-level ``Server``, reached by a Palui connector through the
SDK's in-memory streams (``palui.connectors.mcp.client.IN_PROCESS``, keyed by the connector's URL).

Its ``tools/list`` answers carry the listing entries exactly as written, as ``mcp_hostile.py``'s do: annotations
with strings where a test wrote strings, and a schema's ``NaN`` as ``NaN`` (an SDK server writes ``null``, a server
that writes its own JSON sends what it holds; the streams carry Python objects, so nothing is re-encoded).

The connector is a real :class:`~palui.connectors.mcp.connector.MCPConnector` with a real SDK session (the
handshake, the raw ``tools/list``, ``tools/call``): only the process and the socket are left out, so a table of
cases through turns and gateway sessions runs in well under a minute. Where the process or the wire is the
subject (a crash, stderr, a timeout over stdio, OAuth), the tests keep ``mcp_hostile.py`` in a child process.

    books = InProcessServer("books", [tool("lookup", READ), tool("save", WRITE)])
    await books.add(svc)                         # palui connectors add books --url http://books.in-process/mcp

Each tool is a raw ``tools/list`` entry (annotations sent as written) with a ``behaviour``: ``echo`` (answers
``TOOL: <arguments as JSON>``), ``hang`` (never answers; ``calls`` counts it started), ``text`` (its ``text``),
``result`` (its ``result``: a ``CallToolResult`` as JSON, sent as it is), ``progress`` (three progress
notifications, then ``done``), ``ask`` (asks the client its ``question``, a form with its ``form`` schema, and answers
with the reply as JSON).

``resources`` (``{uri: text or bytes}``) and ``prompts`` (``{name: text}``) make it offer resources and prompts;
``legacy`` makes it refuse ``server/discover``, so the connector speaks the initialize-handshake era (a question
inside an open call, ``ask``, needs that era's back-channel).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage
from mcp_types import METHOD_NOT_FOUND, ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse

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
    """One in-process MCP server named ``name`` with ``tools`` (raw listing entries, :func:`tool`).

    ``calls`` is every call it received, ``(tool, arguments)``, in order; ``started`` is set when a ``hang``
    call has begun."""

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
        import base64

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

    @asynccontextmanager
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
                if isinstance(msg, JSONRPCRequest) and msg.method == "tools/list":
                    listings.add(msg.id)
                if self.legacy and isinstance(msg, JSONRPCRequest) and msg.method == "server/discover":
                    error = ErrorData(code=METHOD_NOT_FOUND, message="Method not found")
                    await s2c_send.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=msg.id, error=error)))
                    continue
                await in_send.send(item)

        async def down() -> None:
            async for item in out_recv:
                msg = item.message
                if isinstance(msg, JSONRPCResponse) and msg.id in listings:
                    item = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=msg.id,
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
        tools named in ``enable`` (raw names), and return the connector id."""
        from palui.connectors.mcp import client
        from palui.text.mcp_config import ServerConfig

        client.IN_PROCESS[self.url] = self.transport
        added = await svc.mcp_add_async(self.name, ServerConfig(transport="http", url=self.url))
        cid = added["id"]
        if enable:
            svc.set_enabled([f"{cid}__{n}" for n in enable], True)
        return cid

    def forget(self) -> None:
        from palui.connectors.mcp import client

        client.IN_PROCESS.pop(self.url, None)


@asynccontextmanager
async def never_answers():
    """An SDK ``Transport`` whose server never answers anything (not even ``initialize``): a connector that
    hangs at its start."""
    to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    try:
        yield to_client_recv, to_server_send
    finally:
        for s in (to_server_send, to_server_recv, to_client_send, to_client_recv):
            await s.aclose()
