"""One live session with one MCP server, through the official ``mcp`` SDK only (SPEC §7).

- Transports: stdio (the SDK's ``stdio_client``, stderr into a :class:`StderrCapture`)
  and streamable HTTP (``streamable_http_client`` over an ``httpx2`` client carrying
  the secret headers).
- Protocol eras: ``Client(mode="auto")`` probes ``server/discover`` (2026-07-28) and
  falls back to ``initialize`` for older servers.
- No client capabilities: no sampling, elicitation or roots callback is given to the
  SDK, so none is advertised (sampling would spend tokens outside every budget; roots
  change what some servers expose).
- Raw ``tools/list``: the request goes through the SDK session (its protocol checks
  and its validation of the result still run), but the result is taken as the JSON
  object the server sent, not the SDK's model, which would turn ``"true"`` into True.
- ``notifications/tools/list_changed``: delivered to the session's message handler in
  the handshake era; in the 2026-07-28 era a ``subscriptions/listen`` stream is held
  open for it. Either way ``on_tools_changed`` runs (once per burst).

The SDK's ``Client`` is an async context manager whose task groups belong to the task
that entered it, so each session runs in its own supervisor task that enters the
client, reports ready, and waits to be stopped; calls from other tasks of the same
event loop go through the SDK session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO, cast

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from palui import __version__
from palui.connectors.mcp.config import ServerConfig, redact
from palui.connectors.mcp.stderr import StderrCapture
from palui.errors import ConnectorError

log = logging.getLogger(__name__)

_RAW = TypeAdapter(dict[str, Any])
MAX_LIST_PAGES = 100
CLOSE_TIMEOUT_SECONDS = 8.0  # the SDK's stdio shutdown waits at most ~6 s (stdin close, TERM, KILL)


class MCPSession:
    """A connection to one MCP server.

    Args:
        config: how to reach the server.
        stderr_log: where a stdio server's stderr goes (None: discarded).
        on_tools_changed: awaited after ``notifications/tools/list_changed``.
        label: the connector id, used in messages.

    :meth:`start` connects (raises ConnectorError); :meth:`list_tools` returns raw
    tool objects; :meth:`call_tool` returns the SDK's ``CallToolResult`` and raises
    what the SDK raises (MCPError, ValidationError, RuntimeError…): the connector
    turns those into error results.
    """

    def __init__(self, config: ServerConfig, *, stderr_log: Path | None = None,
                 on_tools_changed: Callable[[], Awaitable[None]] | None = None, label: str = "MCP server") -> None:
        self.config = config
        self.label = label
        self._stderr = (StderrCapture(stderr_log, secrets=config.secret_values)
                        if (stderr_log is not None and config.transport == "stdio") else None)
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self._lost = False
        self._auth_refusal: tuple[int, str] | None = None  # (HTTP status, WWW-Authenticate) of a 401/403

    # -- state ------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """True while the session is up and (for stdio) the server process has not exited."""
        if self._client is None or self._task is None or self._task.done() or self._lost:
            return False
        return not (self._stderr is not None and self._stderr.exited.is_set())

    def mark_lost(self) -> None:
        """Record that the connection broke (a call saw it closed)."""
        self._lost = True

    @property
    def protocol_version(self) -> str | None:
        return self._client.protocol_version if self._client is not None else None

    async def stderr_settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until an exited stdio server's stderr is all in the log."""
        if self._stderr is None:
            return
        end = asyncio.get_running_loop().time() + timeout
        while not self._stderr.exited.is_set() and asyncio.get_running_loop().time() < end:
            await asyncio.sleep(0.02)

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr, secrets redacted ("" for HTTP)."""
        if self._stderr is None:
            return ""
        return redact(self._stderr.tail(), self.config.secret_values)

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        """Start (stdio) or reach (HTTP) the server and finish the MCP handshake within ``timeout`` seconds.

        Raises ConnectorError with a message fit for the person (secrets redacted,
        the server's last stderr lines added for stdio).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        ready: asyncio.Future[None] = loop.create_future()
        # After a timeout nobody awaits ``ready`` any more; its late exception is expected.
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._task = asyncio.create_task(self._supervise(ready), name=f"mcp:{self.label}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            self._abort_in_background()
            raise ConnectorError(self._describe(f"did not finish the MCP handshake within {timeout:.3g} s")) from None
        except asyncio.CancelledError:
            self._abort_in_background()
            raise
        except ConnectorError:
            raise
        except BaseException as e:  # the SDK raises many kinds; the person gets one clear message
            if _connection_closed(e):
                # The server exited: its last stderr lines say why, but the thread that
                # drains them into the log may not have run yet (a busy machine).
                await self.stderr_settled(min(0.5, max(deadline - loop.time(), 0.0)))
            what = _explain_start_error(e, self.config)
            if self._auth_refusal is not None:
                what = _explain_auth_refusal(*self._auth_refusal)
            raise ConnectorError(self._describe(what)) from None

    def _describe(self, what: str) -> str:
        msg = redact(f"{self.label}: the server {what}", self.config.secret_values)
        tail = self.stderr_tail()
        if tail:
            msg += "\nLast lines of its stderr:\n" + tail
        return msg

    def _abort_in_background(self) -> None:
        # Shutting a stdio server down can take seconds (the SDK waits, then TERM,
        # then KILL); the caller's time budget must not pay for it.
        task = self._task
        if task is not None and not task.done():
            self._stop.set()
            task.cancel()

    async def _supervise(self, ready: asyncio.Future[None]) -> None:
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(transport, mode="auto", cache=None, message_handler=self._on_message,
                                client_info=types.Implementation(name="palui", version=__version__))
                try:
                    await stack.enter_async_context(client)
                finally:
                    if self._stderr is not None:
                        self._stderr.spawned()
                self._client = client
                watcher = asyncio.create_task(self._watch_changes())
                listener = None
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    listener = asyncio.create_task(self._listen(client))
                if not ready.done():
                    ready.set_result(None)
                try:
                    await self._stop.wait()
                finally:
                    for t in (watcher, listener):
                        if t is not None:
                            t.cancel()
                    await asyncio.gather(*(t for t in (watcher, listener) if t is not None), return_exceptions=True)
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else ConnectorError("start-up was cancelled"))
            if not isinstance(e, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self._client = None
            if self._stderr is not None:
                self._stderr.close()

    async def _transport(self, stack: AsyncExitStack):
        cfg = self.config
        if cfg.transport == "stdio":
            errlog = self._stderr.open() if self._stderr is not None else open("/dev/null", "w")
            if self._stderr is None:
                stack.callback(errlog.close)
            params = StdioServerParameters(command=cfg.command or "", args=list(cfg.args), env=dict(cfg.env) or None,
                                           cwd=cfg.cwd)
            return stdio_client(params, errlog=cast(TextIO, errlog))
        async def note_auth_refusal(response: httpx2.Response) -> None:
            # The SDK turns any HTTP error into "Server returned an error response"; the
            # status is what tells the person that the server wants authorization.
            if response.status_code in (401, 403):
                self._auth_refusal = (response.status_code, response.headers.get("www-authenticate", ""))

        http = httpx2.AsyncClient(headers=dict(cfg.headers), timeout=httpx2.Timeout(30.0, read=300.0),
                                  event_hooks={"response": [note_auth_refusal]})
        await stack.enter_async_context(http)
        return streamable_http_client(cfg.url or "", http_client=http)

    async def close(self) -> None:
        """End the session; a stdio server is stopped (stdin closed, then TERM, then KILL)."""
        task = self._task
        if task is None or task.done():
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_SECONDS)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
        except Exception:  # the session is going away; its errors no longer matter
            pass

    # -- list_changed ---------------------------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed.set()
        elif isinstance(message, Exception):
            log.debug("%s: transport reported %r", self.label, message)

    async def _listen(self, client: Client) -> None:
        # 2026-07-28 servers deliver change notifications only on a listen stream.
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self._changed.set()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a server without listen support simply sends no changes
            log.debug("%s: no tools/list_changed stream: %r", self.label, e)

    async def _watch_changes(self) -> None:
        while True:
            await self._changed.wait()
            await asyncio.sleep(0.05)  # coalesce a burst of notifications into one re-list
            self._changed.clear()
            if self._on_tools_changed is not None:
                try:
                    await self._on_tools_changed()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    log.warning("%s: re-listing tools after list_changed failed: %s", self.label,
                                redact(str(e), self.config.secret_values))

    # -- requests -------------------------------------------------------------------------------------------

    def _session(self):
        if self._client is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        return self._client.session

    async def list_tools(self, timeout: float) -> list[dict[str, Any]]:
        """Every tool the server lists now, as raw JSON objects, all pages followed.

        Each page still passes the SDK's validation of a ``tools/list`` result.
        In the 2026-07-28 era, tools with invalid ``x-mcp-header`` annotations are
        dropped, as the protocol requires of clients.

        Raises ConnectorError (malformed listing, endless pagination), MCPError,
        ValidationError.
        """
        session = self._session()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_LIST_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            raw = await session.send_request(types.ListToolsRequest(params=params), _RAW,
                                             request_read_timeout_seconds=timeout)
            page = raw.get("tools")
            if not isinstance(page, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                     for t in page):
                raise ConnectorError(f"{self.label}: the server sent a malformed tools/list result")
            self._absorb(raw, complete=cursor is None and not raw.get("nextCursor"))
            tools.extend(page)
            cursor = raw.get("nextCursor")
            if not cursor:
                break
            if cursor in seen:
                raise ConnectorError(f"{self.label}: the server repeats a tools/list cursor")
            seen.add(cursor)
        else:
            raise ConnectorError(f"{self.label}: tools/list did not end after {MAX_LIST_PAGES} pages")
        if self.protocol_version in MODERN_PROTOCOL_VERSIONS:
            kept = []
            for t in tools:
                reason = find_invalid_x_mcp_header(t.get("inputSchema"))
                if reason is not None:
                    log.warning("%s: tool %r dropped: invalid x-mcp-header (%s)", self.label, t["name"], reason)
                    continue
                kept.append(t)
            tools = kept
        return tools

    def _absorb(self, raw: dict[str, Any], *, complete: bool) -> None:
        """Give the SDK session the listing page Palui fetched raw, as its own ``list_tools`` would.

        The session keeps per-tool state from the listings it sees: the ``x-mcp-header``
        map that makes ``tools/call`` send ``Mcp-Param-*`` headers (2026-07-28) and the
        output schemas it validates ``structuredContent`` against. A raw listing that
        bypassed it left calls without those headers (a 2026-07-28 server rejects them
        with HEADER_MISMATCH) and made the session fetch a listing of its own on the first
        call, one Palui never compared with its hashes; after list_changed it kept
        validating against the old output schemas. The SDK's ``Client.list_tools`` feeds
        its cache hits through the same method.
        """
        if self._client is None:
            return
        try:
            typed = types.ListToolsResult.model_validate(raw, by_name=False)
        except ValidationError as e:
            # The raw page passed the SDK's per-version check; if its generic model still
            # refuses it, the session simply learns nothing from this page (as before).
            log.debug("%s: tools/list page not absorbed by the SDK session: %s", self.label, e)
            return
        self._client.session._absorb_tool_listing(typed, complete=complete)

    async def call_tool(self, name: str, args: dict[str, Any], timeout: float) -> types.CallToolResult:
        """Call tool ``name`` with ``args``; the SDK gives up after ``timeout`` seconds (REQUEST_TIMEOUT)."""
        if self._client is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        return await self._client.call_tool(name, args, read_timeout_seconds=timeout)


def _connection_closed(e: BaseException) -> bool:
    """True for the SDK's "connection closed" error, also inside an exception group."""
    if isinstance(e, BaseExceptionGroup):
        return any(_connection_closed(inner) for inner in e.exceptions)
    return isinstance(e, MCPError) and e.code == types.CONNECTION_CLOSED


def _explain_auth_refusal(status: int, www_authenticate: str) -> str:
    """Why an HTTP server refused the handshake with 401/403 (the caller redacts secrets)."""
    challenge = " ".join(www_authenticate.split())[:200]
    if status == 401:
        what = "HTTP 401 Unauthorized: the server wants authorization"
    else:
        what = "HTTP 403 Forbidden: the server does not accept the credentials sent"
    return (f"refused the MCP handshake: {what}" + (f" (WWW-Authenticate: {challenge})" if challenge else "")
            + ". Palui does not run OAuth flows; a server that accepts a token can be given one with "
              "--header 'Authorization=Bearer …'")


def _explain_start_error(e: BaseException, cfg: ServerConfig) -> str:
    """One sentence for why a server did not start (no secret values: the caller redacts)."""
    if isinstance(e, FileNotFoundError):
        return f"could not be started: command {cfg.command!r} not found"
    if isinstance(e, PermissionError):
        return f"could not be started: command {cfg.command!r} is not executable"
    if isinstance(e, OSError) and cfg.transport == "stdio":
        return f"could not be started: {e.strerror or e}"
    if isinstance(e, MCPError):
        if e.code == types.CONNECTION_CLOSED:
            return "exited (or closed the connection) during the MCP handshake"
        return f"refused the MCP handshake: {e.message} (code {e.code})"
    if isinstance(e, ValidationError):
        return "sent a malformed answer to the MCP handshake"
    if isinstance(e, httpx2.HTTPError) or type(e).__module__.startswith("httpx"):
        return f"could not be reached at {cfg.display_url}: {type(e).__name__}: {e}"
    if isinstance(e, BaseExceptionGroup):
        inner = e.exceptions[0] if e.exceptions else e
        return _explain_start_error(inner, cfg)
    return f"failed to start: {type(e).__name__}: {e}"
