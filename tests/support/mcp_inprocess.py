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
``exit_later``, ``flood``, ``env``) or ``stderr_on_start``. A spec rewritten later to such a behaviour is
answered in process with an error result that says so, never by ending the test process.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from support import elicit_new, elicit_old, mcp_hostile

HERE = Path(__file__).resolve().parent
SHUTDOWN_GRACE = 2.0  # seconds the server may take to end after the client's end of the wire closes


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


def transport(config: Any) -> Wire | None:
    """The :data:`~palui.connectors.mcp.config.TransportFactory` of the test suite: a :class:`Wire` to this
    directory's server that ``config`` starts over stdio, or None (the configured process; see the module)."""
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
