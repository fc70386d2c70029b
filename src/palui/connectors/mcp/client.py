"""One live session with one MCP server, through the official ``mcp`` SDK only (spec §7).

- Transports: stdio (the SDK's ``stdio_client``, stderr into a :class:`StderrCapture`)
  and streamable HTTP (``streamable_http_client`` over an ``httpx2`` client carrying
  the secret headers).
- Protocol eras: ``Client(mode="auto")`` probes ``server/discover`` (2026-07-28) and
  falls back to ``initialize`` for older servers.
- Client capabilities: elicitation only (:mod:`.elicit`: a server's question goes to the
  person, never the model). No sampling or roots callback is given to the SDK, so neither is
  advertised (sampling would spend tokens outside every budget; roots change what some
  servers expose).
- OAuth (:mod:`.oauth`): the HTTP client carries the SDK's ``OAuthClientProvider`` (Palui's
  subclass) unless the person gave an ``Authorization`` header, and then connects only where
  :mod:`.oauth.netcheck` allows (the server's own class of address, or public ones), so the
  SDK's discovery, registration and token requests cannot be pointed elsewhere. Its HTTP read timeout is off:
  every request is bounded by its own clock (the handshake's start timeout, the per-call
  timeout), which stops while a question waits for the person.
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
from palui.connectors.base import Ask, Progress, Resume
from palui.connectors.mcp import unparsable
from palui.connectors.mcp.config import ServerConfig, TransportFactory, redact
from palui.connectors.mcp.delivery import CURRENT, CallDelivery, DeliveryWatch
from palui.connectors.mcp.elicitation import CURRENT_CALL, CallSlot, elicitation_callback, input_responses
from palui.connectors.mcp.oauth import OAuthSetup, StepUp, uses_oauth
from palui.connectors.mcp.refusals import (
    AuthRefusal,
    body_reason,
    connection_closed,
    explain_auth_refusal,
    explain_start_error,
)
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
        oauth: OAuth for an HTTP server (None: no OAuth, e.g. the tests' plain servers).
        transport: the seam for the transport (:data:`~palui.connectors.mcp.config.TransportFactory`),
            asked once here: the transport it returns is used instead of stdio or HTTP (no stderr log,
            no OAuth); None, or a factory that returns None, keeps the configured one.

    :meth:`start` connects (raises ConnectorError); :meth:`list_tools` returns raw
    tool objects; :meth:`call_tool` returns the SDK's ``CallToolResult`` and raises
    what the SDK raises (MCPError, ValidationError, RuntimeError…): the connector
    turns those into error results.
    """

    def __init__(self, config: ServerConfig, *, stderr_log: Path | None = None,
                 on_tools_changed: Callable[[], Awaitable[None]] | None = None, label: str = "MCP server",
                 oauth: OAuthSetup | None = None, transport: TransportFactory | None = None) -> None:
        self.config = config
        self.label = label
        self._given = transport(config) if transport is not None else None
        self._stderr = (StderrCapture(stderr_log, secrets=config.secret_values)
                        if (stderr_log is not None and config.transport == "stdio" and self._given is None) else None)
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self._lost = False
        self.session_lost = False  # the server answered 404 to the session id: it lost the session (restarted)
        self._auth_refusal: AuthRefusal | None = None  # the last 401/403 the HTTP client saw
        self._oauth = oauth if (oauth is not None and config.transport == "http" and uses_oauth(config.headers)
                                and self._given is None) else None
        self.sign_in_needed: str | None = None  # set when a sign-in is needed and nobody can do it now
        self.refresh_unavailable: str | None = None  # set when a refresh met an outage (the tokens are kept)
        self.address_refused: str | None = None  # set when the HTTP client refused to connect somewhere
        self._slots: list[CallSlot] = []  # calls in flight that a question may belong to

    # -- state ------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """True while the session is up and (for stdio) the server process has not exited."""
        if self._client is None or self._task is None or self._task.done() or self._lost or self.session_lost:
            return False
        return not (self._stderr is not None and self._stderr.exited.is_set())

    def mark_lost(self) -> None:
        """Record that the connection broke (a call saw it closed)."""
        self._lost = True

    @property
    def sdk(self) -> Client:
        """The SDK's client of this session (resources and prompts are read through it: :mod:`.content`).
        Raises MCPError (connection closed) when the session is down."""
        if self._client is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        return self._client

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
            if connection_closed(e):
                # The server exited: its last stderr lines say why, but the thread that
                # drains them into the log may not have run yet (a busy machine).
                await self.stderr_settled(min(0.5, max(deadline - loop.time(), 0.0)))
            what = explain_start_error(e, self.config)
            if self.address_refused:
                what = f"wants a sign-in Palui refused: {self.address_refused}"
            elif self.refresh_unavailable:
                what = self.refresh_unavailable
            elif self.sign_in_needed:
                what = (f"needs you to sign in again: palui connectors login {self.label} (or “Sign in” on its "
                        "sheet)")
                if self._auth_refusal is not None:
                    what += "; " + explain_auth_refusal(self._auth_refusal, self.label, False).split(". ")[0]
            elif self._auth_refusal is not None and not what.startswith("wants a sign-in"):
                what = explain_auth_refusal(self._auth_refusal, self.label, self._oauth is not None)
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
        # The SDK's stdout reader runs in a task of this one: its "not JSON-RPC" records name this connector.
        unparsable.SERVER.set(self.label)
        try:
            async with AsyncExitStack() as stack:
                transport = self._given if self._given is not None else await self._transport(stack)
                client = Client(transport, mode="auto", cache=None, message_handler=self._on_message,
                                client_info=types.Implementation(name="palui", version=__version__),
                                elicitation_callback=elicitation_callback(lambda: list(self._slots), self.label))
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
            unparsable.burst_ended(self.label)

    async def _transport(self, stack: AsyncExitStack):
        cfg = self.config
        if cfg.transport == "stdio":
            unparsable.install()
            errlog = self._stderr.open() if self._stderr is not None else open("/dev/null", "w")
            if self._stderr is None:
                stack.callback(errlog.close)
            params = StdioServerParameters(command=cfg.command or "", args=list(cfg.args), env=dict(cfg.env) or None,
                                           cwd=cfg.cwd)
            return stdio_client(params, errlog=cast(TextIO, errlog))
        async def note_auth_refusal(response: httpx2.Response) -> None:
            # The SDK turns any HTTP error into "Server returned an error response"; the
            # status and the body's reason are what tell the person why.
            if response.status_code in (401, 403):
                try:
                    reason = body_reason(await response.aread(), response.headers.get("content-type", ""))
                except httpx2.HTTPError:
                    reason = ""
                sent = "authorization" in {k.lower() for k in response.request.headers}
                self._auth_refusal = AuthRefusal(response.status_code, response.headers.get("www-authenticate", ""),
                                                 reason, sent)
            elif response.status_code < 400 and response.request.method == "POST":
                self._auth_refusal = None
            if response.status_code == 404 and "mcp-session-id" in response.request.headers:
                self.session_lost = True  # spec §7.10: the SDK would go on sending the dead session's id

        auth = transport = None
        if self._oauth is not None:
            from palui.connectors.mcp.oauth.netcheck import checked_transport  # only a server that signs in

            auth = self._oauth.provider(cfg.url or "", self._note_sign_in, on_refused=self._note_refused,
                                        on_refresh_unavailable=self._note_refresh_unavailable,
                                        on_step_up=self._note_step_up)
            transport = checked_transport(cfg.url or "", self._note_refused)
        http = httpx2.AsyncClient(headers=dict(cfg.headers), timeout=httpx2.Timeout(30.0, read=None),
                                  event_hooks={"response": [note_auth_refusal]}, auth=auth,
                                  transport=DeliveryWatch(transport or httpx2.AsyncHTTPTransport()))
        await stack.enter_async_context(http)
        return streamable_http_client(cfg.url or "", http_client=http)

    def _note_sign_in(self, why: str) -> None:
        self.sign_in_needed = why

    def _note_step_up(self, step: StepUp) -> None:
        record = CURRENT.get()  # the refused call's own (its POST runs in the calling task's context)
        if record is not None:
            record.step_up = step

    def _note_refused(self, why: str) -> None:
        self.address_refused = why

    def _note_refresh_unavailable(self, why: str) -> None:
        self.refresh_unavailable = why

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

    @property
    def modern(self) -> bool:
        """The connection speaks 2026-07-28 (questions come back as ``input_required`` results)."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def call_tool(self, name: str, args: dict[str, Any], *, ask: Ask | None = None,
                        resume: Resume | None = None, on_wait: Callable[[bool], None] | None = None,
                        delivery: CallDelivery | None = None,
                        progress: Progress | None = None) -> types.CallToolResult | types.InputRequiredResult:
        """Call tool ``name`` with ``args``. The caller bounds the time (its clock stops while ``ask``
        waits for the person; ``on_wait`` is told). On 2026-07-28 the result may be an
        ``InputRequiredResult``; ``resume`` sends the answers and the request state of such a result.
        ``delivery`` is told when the call's connection was refused (:mod:`.delivery`). ``progress`` is told the
        server's progress notifications (the call then asks for them).
        Raises what the SDK raises (MCPError, ValidationError…)."""
        if self._client is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")
        slot = CallSlot(ask, on_wait)
        told = None
        if progress is not None:
            tell = progress

            async def told(progress: float, total: float | None, message: str | None) -> None:  # the SDK's names
                await tell(progress, total, message)
        watched = CURRENT.set(delivery)
        token = CURRENT_CALL.set(slot)
        self._slots.append(slot)
        try:
            if self.modern:
                extra: dict[str, Any] = {}
                if resume is not None:
                    extra["input_responses"] = input_responses(resume)
                    if resume.request_state is not None:
                        extra["request_state"] = resume.request_state
                return await self._client.session.call_tool(name, args, progress_callback=told,
                                                            allow_input_required=True, **extra)
            return await self._client.call_tool(name, args, progress_callback=told)
        finally:
            self._slots.remove(slot)
            CURRENT_CALL.reset(token)
            CURRENT.reset(watched)
