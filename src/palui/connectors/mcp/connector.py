"""An MCP server as a :class:`Connector`: lifecycle, sync, limits, error results (spec §4, §7).

Lifecycle. The server starts on first use (the hub's ``create_connector``, which raises
ConnectorError when it cannot start) and the session is reused across turns within the
process. Every (re)connection lists the tools and syncs them into the store
(``register_tools``: naming, prefill, duplicates, rug-pull rules), and so do ``refresh``
and ``notifications/tools/list_changed``. After a crash the next use restarts the
server; repeated failures wait before the next attempt (1 s, 2 s, 4 s… up to 60 s).
``state()`` is ``connected``, ``connecting``, ``error: …`` or ``disabled``, and every
change is written to ``connectors.state``.

Calls. ``call_tool`` never raises and never takes longer than the connector's timeout
(``mcp.call_timeout_seconds``, 30 s, or the per-connector override), starting the
server included. Tool errors (``isError``), protocol errors, malformed results,
crashes and timeouts come back as ``ToolResult(is_error=True)``. Text longer than
``mcp.max_output_bytes`` (262,144) is cut with a marker. Every result, errors
included, is untrusted unless the tool or the connector is marked a trusted source;
``ToolResult.untrusted`` is set from the stored flags at call time.

A call that had to (re)start the server is refused, and never sent, when that
connection's sync changed the tool (switched off, flagged, new class, no longer listed
or listed twice): the turn's decision was taken on the old definition.

Questions (elicitation, spec §7): a server's question during a call goes to ``CallContext.ask``
(older connections), and the call's timeout stops while the person answers; on 2026-07-28 the
call returns ``ToolResult.input_required`` and is sent again with ``CallContext.resume``.

Sign-in (OAuth, spec §7.9): a connector made for a turn never waits for a browser. When its server
needs a sign-in that a refresh cannot give, the state becomes ``error: sign in again`` (the person
is told once), and until someone signs in (``palui connectors login``, the sheet) the connector
refuses at once instead of asking the server again. The connector holds that state
(:class:`~palui.connectors.mcp.signin_state.SignInState`) and asks it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from palui.connectors.base import CallContext, Connector, ToolResult, ToolSpec
from palui.connectors.mcp.calling import (
    consume_exception,
    definition_moved,
    error_result,
    row_facts,
    short_error,
    stopper,
    untrusted_result,
)
from palui.connectors.mcp.client import MCPSession
from palui.connectors.mcp.config import ServerConfig, redact
from palui.connectors.mcp.delivery import CallDelivery, lost_session
from palui.connectors.mcp.elicitation import input_required
from palui.connectors.mcp.oauth import SignInHandler
from palui.connectors.mcp.results import cap_text, render_result, spec_from_raw, wire_result
from palui.connectors.mcp.scope_request import ask_for_scope
from palui.connectors.mcp.signin_state import SignInState
from palui.connectors.mcp.stderr import log_path
from palui.connectors.registry import SyncReport, register_listing
from palui.errors import ConnectorError
from palui.store import catalog
from palui.types import SIGN_IN_AGAIN

if TYPE_CHECKING:
    from palui.connectors.base import ConnectorEnv
    from palui.store.tools import ToolRow

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 60.0
_STATE_MAX = 300
_CLOSING: set[asyncio.Task] = set()
OWN_MESSAGE_LIMIT = 4096  # bytes: Palui's own error texts, whatever --max-output says


def backoff_seconds(failures: int) -> float:
    """Wait before the next start after ``failures`` consecutive failures: 0, 0, 1, 2, 4… 60 s.

    The first crash restarts at once on next use; each further failure doubles the wait.
    """
    if failures <= 1:
        return 0.0
    return min(2.0 ** (failures - 2), MAX_BACKOFF_SECONDS)


class MCPConnector(Connector):
    """One MCP server instance (``mcp-<slug>``) as a connector.

    Args:
        env: the database, settings and notifier (:class:`~palui.connectors.base.ConnectorEnv`).
        connector_id: ``mcp-<slug>``.
        name: the name the person gave.
        config: how to reach the server (secrets included).
        enabled: False for a disabled connector (state ``disabled``; calls refused).
        sign_in: how a sign-in reaches Palui (:mod:`.oauth.signin`); None: nobody can sign in now
            (a turn, a job), so a needed sign-in is an error at once.
    """

    kind = "mcp"

    def __init__(self, env: ConnectorEnv, connector_id: str, name: str, config: ServerConfig,
                 enabled: bool = True, sign_in: SignInHandler | None = None) -> None:
        self.env = env
        self.id = connector_id
        self.name = name
        self.config = config
        self.enabled = enabled
        settings = env.settings
        self.timeout = float(config.timeout_seconds or settings.mcp.call_timeout_seconds)
        self.max_output = int(config.max_output_bytes or settings.mcp.max_output_bytes)
        self._session: MCPSession | None = None
        self._connect_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failures = 0
        self._last_failure = 0.0
        self._state = "disabled" if not enabled else "connecting"
        self._listed: set[str] = set()
        self._dupes: set[str] = set()
        self._background: set[asyncio.Task] = set()  # sessions being shut down
        self.last_report: SyncReport | None = None
        self.sign_in = sign_in
        self.signin = SignInState(env, connector_id, name, config, sign_in)
        self.recovered: str | None = None  # when and why the last lost session was started again (spec §7.10)

    # -- state ------------------------------------------------------------------------------------

    def state(self) -> str:
        """``connected``, ``connecting``, ``error: …`` or ``disabled`` (spec §7)."""
        if not self.enabled:
            return "disabled"
        if self._state == "connected" and (self._session is None or not self._session.alive):
            if self._session is not None and self._session.session_lost:
                self._set_state("error: the server lost the session (it restarted); a new one starts on next use")
            else:
                self._set_state("error: the server exited; it restarts on next use"
                                if self.config.transport == "stdio"
                                else "error: the connection closed; it reconnects on next use")
        return self._state

    def _set_state(self, state: str) -> None:
        state = state.replace("\n", " ")[:_STATE_MAX]
        if state == self._state:
            return
        self._state = state
        try:
            with self.env.db.write() as c:
                c.execute("UPDATE connectors SET state = ? WHERE id = ?", (state, self.id))
        except Exception as e:  # a busy database must not turn a call into a crash
            log.warning("%s: could not store state: %s", self.id, e)

    def blocked(self, signed_out: bool | None = None) -> str | None:
        """``sign in again`` while the stored state says a sign-in is needed (:meth:`SignInState.blocked`)."""
        return self.signin.blocked(self.enabled, signed_out)

    def _needs_sign_in(self, why: str | None = None) -> None:
        """State ``error: sign in again`` here and stored; the person is told once (:meth:`SignInState.record_needed`:
        with ``why`` when it says more)."""
        self._state = SIGN_IN_AGAIN
        self.signin.record_needed(why)

    def _redact(self, text: str) -> str:
        return redact(text, self.config.secret_values)

    def failures(self) -> tuple[int, float]:
        """``(consecutive failures, monotonic time of the last)`` for the back-off."""
        return self._failures, self._last_failure

    def restore_failures(self, failures: int, last: float) -> None:
        """Carry the back-off over from an earlier connector of the same server in this process."""
        self._failures, self._last_failure = failures, last

    # -- connecting -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect now (used on first use by the hub, and by ``add``/``login``). A connector the person
        signs in with gets the sign-in's time too (5 minutes). Raises ConnectorError."""
        extra = float(getattr(self.sign_in, "timeout", 0.0) or 0.0) if self.sign_in is not None else 0.0
        await self._ensure(asyncio.get_running_loop().time() + self.timeout + extra)

    async def _ensure(self, deadline: float, signed_out: bool | None = None) -> tuple[MCPSession, bool]:
        """The live session, connecting if needed: ``(session, True)`` when this call (re)connected.
        ``signed_out``: the stored sign-in state when the caller read it already (:meth:`blocked`).

        One connection attempt at a time (the others wait for it, each within its own
        deadline). Raises ConnectorError: disabled, in back-off, or the start failed.
        """
        if not self.enabled:
            raise ConnectorError(f"connector {self.id} is disabled")
        why = self.blocked(signed_out)
        if why:
            raise ConnectorError(why)
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # A session belongs to the event loop it was started in; a new loop (a new
            # asyncio.run in the same process) starts a new one. The old loop's end
            # already cancelled its supervisor, which stopped the server.
            self._loop, self._session, self._connect_task = loop, None, None
        if self._session is not None and self._session.alive:
            return self._session, False
        if self._connect_task is None or self._connect_task.done():
            if self._session is not None:
                self._discard_session()
            wait = backoff_seconds(self._failures) - (time.monotonic() - self._last_failure)
            if wait > 0:
                raise ConnectorError(f"{self.id}: {self._state}; the next start attempt is in {wait:.0f} s")
            self._connect_task = asyncio.create_task(self._connect(deadline), name=f"connect:{self.id}")
            self._connect_task.add_done_callback(consume_exception)
        remaining = deadline - loop.time()
        try:
            # A little grace, so that the attempt's own, more precise error wins the race.
            session = await asyncio.wait_for(asyncio.shield(self._connect_task), max(remaining, 0.001) + 0.1)
        except TimeoutError:
            raise ConnectorError(f"{self.id}: the server is still starting after {self.timeout:g} s") from None
        return session, True

    async def _connect(self, deadline: float) -> MCPSession:
        """Start the server and sync its listing, both before ``deadline`` (event-loop time)."""
        loop = asyncio.get_running_loop()
        self._set_state("connecting")
        session = MCPSession(self.config, stderr_log=log_path(self.env.settings.data_dir, self.id),
                             on_tools_changed=self._on_tools_changed, label=self.id, oauth=self.signin.oauth(),
                             transport=self.env.mcp_transport)
        try:
            await session.start(max(deadline - loop.time(), 0.001))
            raw = await session.list_tools(max(deadline - loop.time(), 0.001))
            self._sync(raw)
        except (Exception, asyncio.CancelledError) as e:
            self._failures += 1
            self._last_failure = time.monotonic()
            self._close_later(session)
            if session.sign_in_needed:
                self._needs_sign_in(session.sign_in_needed)
                raise ConnectorError(str(e) if isinstance(e, ConnectorError) else
                                     f"{self.id}: sign in again: palui connectors login {self.id}") from None
            if isinstance(e, ConnectorError):
                message = str(e)
            elif isinstance(e, asyncio.CancelledError):
                message = f"{self.id}: start-up was cancelled"
            else:
                message = self._redact(f"{self.id}: listing the tools failed: {short_error(e)}")
            self._set_state(f"error: {message.splitlines()[0].removeprefix(self.id + ': ')}")
            if isinstance(e, asyncio.CancelledError):
                raise
            raise ConnectorError(message) from None
        self._session = session
        self._set_state("connected")
        return session

    def _discard_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            self._close_later(session)

    def _close_later(self, session: MCPSession) -> None:
        # Stopping a server can take seconds; no call should wait for it. close() does.
        # The module-level set keeps the task alive even if this connector is dropped
        # (the event loop itself holds tasks only weakly).
        task = asyncio.get_running_loop().create_task(session.close())
        for holder in (self._background, _CLOSING):
            holder.add(task)
            task.add_done_callback(holder.discard)

    def _lost(self, why: str, count: bool = True) -> None:
        """The connection broke: count a failure (unless ``count`` is False: a server that lost the session
        is reached again at once, spec §7.10); the next use restarts the server."""
        if self._session is not None:
            self._session.mark_lost()
        if count:
            self._failures += 1
            self._last_failure = time.monotonic()
        self._set_state(f"error: {why}; {'it reconnects' if self.config.transport == 'http' else 'it restarts'}"
                        " on next use")

    # -- listing and sync ---------------------------------------------------------------------------------

    def _sync(self, raw_tools: list[dict[str, Any]]) -> SyncReport:
        specs = [spec_from_raw(t) for t in raw_tools]
        report = register_listing(self.env, self.id, specs, name=self.name, kind="mcp")
        self._dupes = set(report.refused_duplicates)
        self._listed = {s.name for s in specs} - self._dupes
        self.last_report = report
        return report

    async def _on_tools_changed(self) -> None:
        session = self._session
        if session is None or not session.alive:
            return
        self._sync(await session.list_tools(self.timeout))

    async def session_now(self) -> MCPSession:
        """The live session, started within the connector's timeout if needed (resources and prompts,
        :mod:`.content`). Raises ConnectorError."""
        session, _ = await self._ensure(asyncio.get_running_loop().time() + self.timeout)
        return session

    async def list_tools(self) -> list[ToolSpec]:
        """The tools the server lists now (raw annotations). Raises ConnectorError."""
        deadline = asyncio.get_running_loop().time() + self.timeout
        session, _ = await self._ensure(deadline)
        try:
            raw = await session.list_tools(self.timeout)
        except ConnectorError:
            raise
        except Exception as e:
            raise ConnectorError(self._redact(f"{self.id}: listing the tools failed: {short_error(e)}")) from None
        return [spec_from_raw(t) for t in raw]

    async def refresh(self) -> SyncReport:
        """Re-list the tools and sync them into the store (``palui connectors refresh``). A session the server
        lost (spec §7.10) is started again once (:attr:`recovered` says so). Raises ConnectorError."""
        deadline = asyncio.get_running_loop().time() + self.timeout
        lost = self._session is not None and self._session.session_lost
        session, connected_now = await self._ensure(deadline)
        try:
            if not connected_now:
                return self._sync(await session.list_tools(self.timeout))
        except MCPError as e:
            if not (self.config.transport == "http" and lost_session(e, CallDelivery(), session.session_lost)):
                raise ConnectorError(self._redact(f"{self.id}: listing the tools failed: {short_error(e)}")) from None
            lost = True
            self._lost("the server lost the session (it restarted)", count=False)
            session, connected_now = await self._ensure(deadline)
        except ConnectorError:
            raise
        except Exception as e:
            raise ConnectorError(self._redact(f"{self.id}: listing the tools failed: {short_error(e)}")) from None
        if lost:
            self.recovered = (f"{time.strftime('%H:%M:%S')}: the server lost the session (it restarted); "
                              "a new session was started")
        assert self.last_report is not None  # every connection syncs its listing
        return self.last_report

    # -- calls ----------------------------------------------------------------------------------------------

    def _tool_row(self, raw_name: str, known: ToolRow | None = None) -> dict[str, Any] | None:
        """The stored flags of one tool; None when unknown or unreadable (then: untrusted, and
        a restart refuses the call). ``known``: the row the runner read when it decided the call
        (:attr:`CallContext.tool`), used when it is this connector's tool ``raw_name``: no read."""
        if known is not None and known.connector == self.id and known.tool == raw_name:
            r: ToolRow | None = known
        else:
            try:
                # The catalog version and the row in one read; the parsed row is reused while the version holds.
                r = catalog.tool_now(self.env.db, connector=self.id, raw_name=raw_name)
            except Exception as e:  # call_tool must not raise; fail closed instead
                log.warning("%s: cannot read tool %r: %s", self.id, raw_name, e)
                return None
        if r is None:
            return None
        return row_facts(r)

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext | None = None) -> ToolResult:
        """Call the server's tool ``name`` (its raw name) with ``args``.

        Never raises (except cancellation of the calling task) and returns within the
        connector's timeout. See the module docstring for errors, limits and taint.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        before = self._tool_row(name, ctx.tool if ctx else None)
        untrusted = untrusted_result(before)

        def result(text: str, is_error: bool, *, from_server: bool = False, down: bool = False,
                   wire: dict[str, Any] | None = None) -> ToolResult:
            # The output limit is for what the server sends; Palui's own explanations (which
            # may quote a few stderr lines) are only kept from growing without bound.
            limit = self.max_output if from_server else max(self.max_output, OWN_MESSAGE_LIMIT)
            label = before["name"] if before else f"{self.id}__{name}"
            return ToolResult(text=cap_text(text, limit), is_error=is_error, untrusted=untrusted,
                              taint_detail=f"result of MCP tool {label}" if untrusted else None,
                              connector_down=text.splitlines()[0][:300] if down else None, wire=wire)

        try:
            # The tool's row carries its connector's sign-in state, read in the same statement: no second read.
            session, connected_now = await self._ensure(deadline, before["signed_out"] if before else None)
        except ConnectorError as e:
            return result(self._redact(f"The tool could not run: {e}"), True, down=True)
        except Exception as e:  # defensive: call_tool must not raise
            return result(self._redact(f"The tool could not run: {self.id}: {short_error(e)}"), True, down=True)
        if name in self._dupes:
            return result(f"The tool could not run: {self.id} lists two tools named {name!r}; both are refused.", True)
        if name not in self._listed:
            return result(f"The tool could not run: {self.id} does not list a tool named {name!r}.", True)
        if connected_now and definition_moved(before, self._tool_row(name)):
            return result(f"The call was not sent: {self.id} restarted and the tool's definition or class changed; "
                          "it is decided again on the next step.", True)
        read = before is not None and before["tool_class"] == "read"
        for attempt in (1, 2):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return result(f"The tool did not answer within {self.timeout:g} s.", True)
            delivery = CallDelivery()
            try:
                # Cancelling the call (the timeout) makes the SDK send the server a cancellation.
                async with asyncio.timeout(remaining) as clock:
                    res = await session.call_tool(name, args, ask=ctx.ask if ctx else None,
                                                  resume=ctx.resume if ctx else None, on_wait=stopper(clock),
                                                  delivery=delivery, progress=ctx.progress if ctx else None)
                break
            except TimeoutError:
                return result(f"The tool did not answer within {self.timeout:g} s.", True)
            except MCPError as e:
                if delivery.step_up is not None:  # spec §7.11: only this call needs more; the person is asked
                    label = before["name"] if before else f"{self.id}__{name}"
                    return result(ask_for_scope(self.env, self.id, label, delivery.step_up,
                                                ctx.turn_id if ctx else None), True)
                lost = lost_session(e, delivery, session.session_lost) if self.config.transport == "http" else None
                if lost is None or session.sign_in_needed or session.refresh_unavailable:
                    return await error_result(self.id, self.timeout, self.config.transport == "http", e, session,
                                              ctx, deadline, result, self._lost, self._needs_sign_in, self._redact)
                # spec §7.10: a lost session is started again once; the call is sent again only when it
                # never reached the server or the tool only reads.
                self._lost("the server lost the session (it restarted)" if lost == "before"
                           else "the connection closed during a call", count=False)
                if lost == "during" and not read:
                    return replace(result(f"The MCP server {self.id} restarted during the call (its connection "
                                          "closed before the result came); it may have run. Palui did not send it "
                                          "again.", True, down=True), may_have_run=True)
                if attempt == 2:
                    return result(f"The MCP server {self.id} lost the session again; the call was not sent again.",
                                  True, down=True)
                try:
                    session, _ = await self._ensure(deadline)
                except ConnectorError as ce:
                    return result(self._redact(f"The tool could not run: {ce}"), True, down=True)
                self.recovered = (f"{time.strftime('%H:%M:%S')}: the server lost the session "
                                  f"({'it restarted' if lost == 'before' else 'the connection closed mid-call'}); "
                                  "a new session was started")
                if definition_moved(before, self._tool_row(name)):
                    return result(f"The call was not sent again: {self.id} restarted and the tool's definition or "
                                  "class changed; it is decided again on the next step.", True)
            except ValidationError:
                return result(f"The MCP server {self.id} sent a malformed result.", True)
            except Exception as e:
                return result(self._redact(f"The call failed: {short_error(e)}"), True)
        if self._failures:
            self._failures = 0
        if isinstance(res, types.InputRequiredResult):
            return ToolResult(text="", untrusted=untrusted, input_required=input_required(res))
        try:
            text = render_result(res)
            wire = wire_result(res, self.max_output) if ctx is not None and ctx.raw else None
        except Exception as e:  # a result the SDK accepted but we cannot render
            why = short_error(e)
            return result(self._redact(f"The MCP server {self.id} sent a result that cannot be shown: {why}"), True)
        return result(text, bool(res.is_error), from_server=True, wire=wire)

    async def close(self) -> None:
        """Stop the server (stdio) or end the HTTP session."""
        task, self._connect_task = self._connect_task, None
        if task is not None and not task.done():
            task.cancel()
        session, self._session = self._session, None
        if session is not None:
            self._close_later(session)
        if self._background:
            await asyncio.wait(set(self._background), timeout=10)
