"""Service part: the gateway's clients, sessions, tools and calls (spec §8.6, docs/gateway.md).

A **client** is named by the person (``palui gateway clients add NAME``) and holds a token: ``pgw_`` and
43 URL-safe characters (256 random bits), shown once and stored only as its SHA-256 (a leaked database
opens nothing). A client may be limited to some connectors and marked ``--context trusted``. Its calls share
one conversation, whatever session makes them: the client, not a session, carries the taint, the calls the
person denied and the loop counts, until the person clears it (``palui gateway clients clear NAME``: a new
conversation, its open sessions ended).

A **session** is a turn row of its client's conversation, status ``running`` and owner ``gateway`` (no
process owns it, so it is never put back in the queue, and the tick never resumes it: only
``awaiting_approval`` turns are resumed). Palui cannot see the client's context, so the conversation is
tainted from its start (by "the client's unseen context") unless the client is trusted. Its calls run through
the governed call (:class:`~palui.runner.gateway_session.GatewaySession`); an approval made by one is answered
through every existing door (``answer_approval``) and the waiting call reads the answer from the database; an
approval outlives the request and the session that asked it, runs nothing by itself, and is waited on or consumed
by the client's identical retry in any session until it expires. Ending a session marks its turn ``done``;
clearing or removing the client cancels its pending approvals. While the
emergency brake pauses the gateway (spec §5.7) no session opens and every call is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from palui.errors import NotFound, PaluiError, UsageError
from palui.policy.matrix import decide
from palui.runner import approvals as approvals_mod
from palui.runner import audit, gateway_pause
from palui.runner import state as st
from palui.runner.pending import args_hash
from palui.store import catalog
from palui.store.db import Database
from palui.store.ids import resolve
from palui.text.display import named
from palui.types import CallState, Origin, TurnStatus, Verdict

if TYPE_CHECKING:
    from palui.connectors.base import Ask, Question, Reply
    from palui.results import (
        Explanation,
        GatewayCallResult,
        GatewayClient,
        GatewayPause,
        GatewaySessionInfo,
        GatewayTool,
    )
    from palui.runner.call_options import Progress
    from palui.runner.gateway_session import GatewaySession
    from palui.service.clock import Clock
    from palui.service.tools import ToolsPart
    from palui.service.turns import TurnsPart

#: The client's name: what the person calls it, and what approvals and the audit show.
NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
TOKEN_PREFIX = "pgw_"
#: The most ``--calls-per-hour`` may say (the range of ``caps.gateway_client_calls_per_hour``).
MAX_CALLS_PER_HOUR = 10_000
#: The taint source of a session whose client's context is unknown (spec §8.6): a reason reads "tainted by the
#: client's unseen context".
UNKNOWN_CONTEXT = "the client's unseen context"
#: Why a session ended when no other reason is given.
SESSION_ENDED = "the gateway session ended"
#: Why the open sessions of a client the person cleared end.
CLEARED = "the person cleared the client"


#: ``ask(message, requested_schema)`` → ``(action, content)``: a server's question put to a gateway client itself.
ClientAsk = Callable[[str, dict[str, Any]], Awaitable[tuple[str, dict[str, Any] | None]]]


def _question_asker(ask: ClientAsk) -> Ask:
    """The runner's :data:`~palui.connectors.base.Ask` over a front end's :data:`ClientAsk`."""
    from palui.connectors.base import Reply

    async def asked(q: Question) -> Reply:
        action, content = await ask(q.message, q.schema or {"type": "object", "properties": {}})
        if action == "accept":
            return Reply("accept", content)
        return Reply("decline" if action == "decline" else "cancel")

    return asked


class GatewayPaused(PaluiError):
    """A gateway session refused because the emergency brake pauses the gateway (spec §5.7)."""


def token_hash(token: str) -> str:
    """SHA-256 hex of a client token: what is stored (the token itself never is)."""
    return hashlib.sha256(token.encode()).hexdigest()


class GatewayPart:
    """The gateway's clients, sessions, tools and calls.

    Args:
        db, clock: the service's shared collaborators.
        tools_part: the stored tool of a call in flight when its session ended (its audit row names the class);
            the tools and the policy's explanation of one (``palui policy explain --client``).
        turns_part: the runner's dependencies (database, settings, hub, the person's channel).
    """

    def __init__(self, db: Database, clock: Clock, tools_part: ToolsPart, turns_part: TurnsPart) -> None:
        self.db = db
        self.clock = clock
        self.tools_part = tools_part
        self.turns_part = turns_part
        self._turns: dict[str, Any] = {}  # the session turns of this process (GatewaySession's ``turns``)

    # -- clients ----------------------------------------------------------------------------------

    def add_client(self, name: str, connectors: list[str] | None = None,
                   context: str = "unknown", calls_per_hour: int | None = None) -> GatewayClient:
        """Add a client named ``name`` (lower-case letters, digits, ``-``), seeing only ``connectors`` (None:
        every MCP connector; a built-in one only when named, spec §8.6), its sessions starting tainted unless
        ``context`` is ``trusted``, sending at most ``calls_per_hour`` calls to connectors in any 60 minutes
        (None: ``caps.gateway_client_calls_per_hour``). Returns it with its ``token``: shown this once, stored
        hashed. Raises UsageError (bad name, context, connector or number, a name taken)."""
        if not isinstance(name, str) or not NAME.match(name):
            raise UsageError(f"a client name is lower-case letters, digits and '-' (at most 40): {named(str(name))}")
        if context not in ("unknown", "trusted"):
            raise UsageError(f"--context is 'trusted' or left out, not {named(str(context))}")
        if calls_per_hour is not None and (isinstance(calls_per_hour, bool) or not isinstance(calls_per_hour, int)
                                           or not 1 <= calls_per_hour <= MAX_CALLS_PER_HOUR):
            raise UsageError(f"--calls-per-hour is a whole number from 1 to {MAX_CALLS_PER_HOUR:,}")
        if connectors is not None:
            if "messages" in connectors:
                raise UsageError("the messages connector is not offered through the gateway: its tool writes to your "
                                 "own channel, where another agent's text would read as Palui's")
            known = {r["id"] for r in self.db.all("SELECT id FROM connectors")}
            missing = [c for c in connectors if c not in known]
            if missing or not connectors:
                raise UsageError(f"unknown connector(s): {', '.join(named(m) for m in missing[:5]) or '(none given)'} "
                                 "(see: palui connectors list)")
        if self.db.one("SELECT 1 FROM gateway_clients WHERE name = ?", (name,)):
            raise UsageError(f"a gateway client named {name!r} exists (palui gateway clients remove {name})")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.db.write() as c:
            c.execute("INSERT INTO gateway_clients (name, token_hash, connectors_json, context, created_at,"
                      " calls_per_hour) VALUES (?,?,?,?,?,?)",
                      (name, token_hash(token), None if connectors is None else json.dumps(connectors, allow_nan=False),
                       context, self.clock.now(), calls_per_hour))
        return {**self.client(name), "token": token}

    def clients(self) -> list[GatewayClient]:
        """Every client, by name (without tokens: only their hashes are stored)."""
        return [self._client(r) for r in self.db.all("SELECT * FROM gateway_clients ORDER BY name")]

    def client(self, name: str) -> GatewayClient:
        """One client. Raises NotFound."""
        r = self.db.one("SELECT * FROM gateway_clients WHERE name = ?", (name,))
        if r is None:
            raise NotFound(f"unknown gateway client {named(str(name))} (see: palui gateway clients list)")
        return self._client(r)

    def remove_client(self, name: str) -> list[str]:
        """Remove a client: its token opens nothing from now on and its open sessions end (their pending
        approvals cancelled). Returns the ended sessions' ids. Raises NotFound."""
        self.client(name)
        with self.db.write() as c:
            c.execute("DELETE FROM gateway_clients WHERE name = ?", (name,))
        ended = [r["id"] for r in self.db.all("SELECT id FROM gateway_sessions WHERE client = ? AND ended_at IS NULL",
                                              (name,))]
        for sid in ended:
            self.end_session(sid, "its client was removed")
        self._cancel_approvals(name, "its gateway client was removed")
        return ended

    def client_for_token(self, token: str) -> str | None:
        """The name of the client holding ``token``, None for an unknown or removed one."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        r = self.db.one("SELECT name FROM gateway_clients WHERE token_hash = ?", (token_hash(token),))
        return r["name"] if r else None

    def _client(self, r: Any) -> GatewayClient:
        sessions = self.db.row("SELECT COUNT(*) FROM gateway_sessions WHERE client = ? AND ended_at IS NULL",
                               (r["name"],))[0]
        return {"name": r["name"], "connectors": json.loads(r["connectors_json"]) if r["connectors_json"] else None,
                "context": r["context"], "created_at": r["created_at"], "open_sessions": int(sessions),
                "calls_per_hour": r["calls_per_hour"]}

    # -- sessions ---------------------------------------------------------------------------------

    def open_session(self, client: str) -> str:
        """Open a session of ``client``: a turn row of the client's conversation (made at its first session and
        after each clear: tainted from its start unless the client is trusted), which starts with the
        conversation's taint (spec §8.6). Returns the session id. Raises NotFound, GatewayPaused (the emergency
        brake pauses the gateway, spec §5.7)."""
        c = self.client(client)
        if gateway_pause.paused(self.db) is not None:
            raise GatewayPaused(gateway_pause.PAUSED)
        cid = self._conversation(client, c["context"])
        conv = self.db.row("SELECT tainted, taint_source FROM conversations WHERE id = ?", (cid,))
        tainted, source = bool(conv["tainted"]), conv["taint_source"]
        tid, sid, now = st.new_id("t"), st.new_id("g"), self.clock.now()
        with self.db.write() as w:
            w.execute("INSERT INTO turns (id, conversation_id, origin, status, input, model, tainted, taint_source,"
                      " owner, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                      (tid, cid, Origin.GATEWAY.value, TurnStatus.RUNNING.value, f"gateway session of {client}", None,
                       int(tainted), source if tainted else None, "gateway", now, now))
            w.execute("INSERT INTO gateway_sessions (id, client, conversation_id, turn_id, created_at)"
                      " VALUES (?,?,?,?,?)", (sid, client, cid, tid, now))
        return sid

    def _conversation(self, client: str, context: str) -> str:
        """The client's conversation, made now if it has none: tainted from its start unless the client is
        trusted (spec §8.6)."""
        r = self.db.one("SELECT conversation_id FROM gateway_clients WHERE name = ?", (client,))
        if r is not None and r["conversation_id"]:
            return str(r["conversation_id"])
        cid = self.turns_part.new_conversation(Origin.GATEWAY, "gateway")
        with self.db.write() as w:
            if context != "trusted":
                w.execute("UPDATE conversations SET tainted = 1, taint_source = ? WHERE id = ?", (UNKNOWN_CONTEXT, cid))
            w.execute("UPDATE gateway_clients SET conversation_id = ? WHERE name = ? AND conversation_id IS NULL",
                      (cid, client))
        again = self.db.one("SELECT conversation_id FROM gateway_clients WHERE name = ?", (client,))
        return str(again["conversation_id"]) if again is not None and again["conversation_id"] else cid

    def clear_client(self, name: str) -> list[str]:
        """``palui gateway clients clear NAME``: forget what the client's sessions carried (spec §8.6): its taint,
        the calls the person denied, its loop counts and its loop stop. Its open sessions end (their pending
        approvals cancelled); its next session starts in a new conversation, as a new client's would. Returns
        the ended sessions' ids. Raises NotFound."""
        self.client(name)
        ended = [r["id"] for r in self.db.all("SELECT id FROM gateway_sessions WHERE client = ? AND ended_at IS NULL",
                                              (name,))]
        for sid in ended:
            self.end_session(sid, CLEARED)
        self._cancel_approvals(name, CLEARED)
        with self.db.write() as w:
            old = w.execute("SELECT conversation_id FROM gateway_clients WHERE name = ?", (name,)).fetchone()
            if old is not None and old["conversation_id"]:
                w.execute("DELETE FROM gateway_calls WHERE conversation_id = ?", (old["conversation_id"],))
            w.execute("UPDATE gateway_clients SET conversation_id = NULL, loop_stop = NULL WHERE name = ?", (name,))
        return ended

    def explain(self, client: str, name: str, tainted: bool | None = None) -> Explanation:
        """``palui policy explain NAME --client CLIENT``: the verdict a call of ``name`` by the gateway client gets
        now (spec §3.4, §8.6): ``off`` when the tool is not the client's to call (outside its connectors, a
        built-in it was not given), else the matrix's ``gateway`` column in the client's taint now (``tainted``
        None: its conversation's, or how its next session starts), or as ``tainted`` says. Raises NotFound."""
        from palui.runner.offer import gateway_offers

        c = self.client(client)
        row = self.tools_part.get(name)
        if tainted is None:
            r = self.db.one("SELECT v.tainted, v.taint_source FROM gateway_clients g JOIN conversations v ON"
                            " v.id = g.conversation_id WHERE g.name = ?", (client,))
            tainted, source = ((bool(r["tainted"]), r["taint_source"]) if r is not None
                               else (c["context"] != "trusted", UNKNOWN_CONTEXT if c["context"] != "trusted" else None))
        else:
            source = "the --tainted option" if tainted else None
        e = self.tools_part.explain(name, Origin.GATEWAY, tainted, source)
        connectors = tuple(c["connectors"]) if c["connectors"] is not None else None
        if not gateway_offers(row, connectors):
            given = ", ".join(c["connectors"]) if c["connectors"] is not None else "every MCP connector"
            e = {**e, "verdict": Verdict.OFF.value, "source": "client",
                 "reason": f"off: not offered to gateway client {client} (it was given {given}; a built-in connector "
                           "only by name, and never messages)"}
        return {**e, "client": client}

    # -- the brake's pause ------------------------------------------------------------------------

    def paused(self) -> GatewayPause | None:
        """``{"since","by"}`` while the emergency brake pauses the gateway, else None (spec §5.7)."""
        return gateway_pause.paused(self.db)

    def resume(self) -> bool:
        """``palui gateway resume``: gateway calls and sessions are taken again. True if it was paused."""
        return gateway_pause.resume(self.db)

    def end_session(self, session: str, reason: str = SESSION_ENDED) -> None:
        """End a session: its turn is ``done``. Its pending approvals stay: each runs nothing by itself, and the
        client's identical retry in another session waits on or consumes it until it expires (spec §8.6)."""
        r = self.db.one("SELECT * FROM gateway_sessions WHERE id = ? AND ended_at IS NULL", (session,))
        if r is None:
            return
        now = self.clock.now()
        with self.db.write() as w:
            w.execute("UPDATE gateway_sessions SET ended_at = ?, end_reason = ? WHERE id = ?", (now, reason, session))
            w.execute("UPDATE turns SET status = ?, updated_at = ? WHERE id = ? AND status = 'running'",
                      (TurnStatus.DONE.value, now, r["turn_id"]))
        self._turns.pop(r["turn_id"], None)

    def _cancel_approvals(self, client: str, reason: str) -> None:
        """Cancel the pending approvals of every session the client ever had (a clear, a removal)."""
        for r in self.db.all("SELECT DISTINCT a.turn_id FROM approvals a JOIN gateway_sessions g ON g.turn_id ="
                             " a.turn_id WHERE g.client = ? AND a.status = 'pending'", (client,)):
            approvals_mod.cancel_for_turn(self.db, r["turn_id"], reason=reason)

    def session_open_now(self, session: str) -> bool:
        """Whether ``session`` is still open (not ended here or in another process: a clear, a removal, the
        person's ``sessions --end``)."""
        return self.db.one("SELECT 1 FROM gateway_sessions WHERE id = ? AND ended_at IS NULL", (session,)) is not None

    def sessions_used(self, used: dict[str, float]) -> None:
        """Store when sessions last made a request (``{session: epoch seconds}``)."""
        with self.db.write() as w:
            w.executemany("UPDATE gateway_sessions SET last_used_at = ? WHERE id = ?",
                          [(when, sid) for sid, when in used.items()])

    def sessions(self, client: str | None = None, ended: bool = False,
                 limit: int = 200) -> list[GatewaySessionInfo]:
        """``palui gateway sessions [--client NAME]``: the open sessions, newest first (with ``ended``, the ended
        ones too), each with its client, when it opened and was last used, and the calls it made. Raises
        NotFound (an unknown client)."""
        if client is not None:
            self.client(client)
        where = ("WHERE 1" if ended else "WHERE g.ended_at IS NULL") + (" AND g.client = ?" if client else "")
        rows = self.db.all(
            "SELECT g.*, (SELECT COUNT(*) FROM audit a WHERE a.session = g.id) AS calls FROM gateway_sessions g"
            f" {where} ORDER BY g.created_at DESC LIMIT ?", ((client,) if client else ()) + (int(limit),))
        return [{"id": r["id"], "client": r["client"], "created_at": r["created_at"],
                 "last_used_at": r["last_used_at"] or r["created_at"], "ended_at": r["ended_at"],
                 "end_reason": r["end_reason"], "calls": int(r["calls"])} for r in rows]

    def stop_session(self, session: str) -> GatewaySessionInfo:
        """``palui gateway sessions --end ID``: end an open session; its id answers 404 from then on, wherever it is
        used. Its pending approvals stay for the client's identical retry. Raises NotFound."""
        sid = resolve(self.db, session)
        r = self.db.one("SELECT ended_at FROM gateway_sessions WHERE id = ?", (sid,))
        if r is None or r["ended_at"] is not None:
            raise NotFound(f"no open gateway session {named(str(session))} (see: palui gateway sessions)")
        self.end_session(sid, "the person ended it")
        return next(s for s in self.sessions(ended=True, limit=10_000) if s["id"] == sid)

    def end_open_sessions(self, reason: str) -> list[str]:
        """End every open session (``palui serve`` starting: the sessions of an earlier process are gone). A
        call one of them had in flight (its ``sent`` marker) is audited ``cancelled; may have run``, as a turn's
        is (spec §5.7). Returns their ids."""
        rows = self.db.all("SELECT g.id, g.client, t.id AS turn_id, t.pending_json, t.tainted FROM gateway_sessions g"
                           " JOIN turns t ON t.id = g.turn_id WHERE g.ended_at IS NULL")
        for r in rows:
            for call in json.loads(r["pending_json"] or "[]"):
                if call.get("state") != CallState.SENT:
                    continue
                tool = self.tools_part.find(call["tool"])
                audit.record(self.db, turn_id=r["turn_id"], tool=call["tool"],
                             tool_class=tool.tool_class.value if tool else None,
                             class_source=tool.class_source.value if tool else None, origin=Origin.GATEWAY.value,
                             tainted=bool(r["tainted"]), verdict="ask" if call.get("approval") else "run",
                             reason=f"{reason} while the call was in flight",
                             args_hash=args_hash(call["args"]), outcome="cancelled; may have run",
                             client=r["client"], session=r["id"])
            self.end_session(r["id"], reason)
        return [r["id"] for r in rows]

    # -- tools and calls --------------------------------------------------------------------------

    def catalog_version(self) -> int:
        """The stored catalog version: it changes with any switch, class, review flag or connector (what
        ``tools/list_changed`` watches)."""
        return catalog.version(self.db)

    def tools(self, session: str) -> list[GatewayTool]:
        """The tools the session's client is offered now (spec §8.6; the tool budget does not apply): in its
        connectors (a built-in one only when given by name), usable, switched on, not flagged "changed — review",
        not needing MCP tasks, ``run`` or ``ask`` for origin ``gateway``. Each with its model-visible name, its
        description and schema as a model is sent them (descriptions cut, hidden characters removed: spec §4.7),
        and hints derived from its effective class."""
        from palui.runner.offer import definition, gateway_offers  # the model library's types: at first listing

        s, connectors = self._session(session)
        snap = catalog.snapshot(self.db)
        out: list[GatewayTool] = []
        for row in sorted(snap.tools.values(), key=lambda r: r.name):
            if not row.usable or row.needs_tasks or row.connector_signin or not gateway_offers(row, connectors):
                continue
            if row.changed and (row.review or {}).get("kind", "changed") == "changed":
                continue  # a held loosening or a tightening is listed under its stricter class (spec §7.6)
            if decide(row.tool_class, row.enabled, Origin.GATEWAY, bool(s["tainted"])).verdict not in (
                    Verdict.RUN, Verdict.ASK):
                continue
            d = snap.memo.get(("definition", row.name))
            if d is None:
                d = snap.memo[("definition", row.name)] = definition(row)
            out.append({"name": row.name, "description": d.description or "", "input_schema": d.parameters_json_schema,
                        "read_only": row.tool_class.value == "read",
                        "destructive": row.tool_class.value == "destructive",
                        "open_world": row.reaches_outside, "class": row.tool_class.value})
        return out

    async def call(self, session: str, tool: str, args: Any, progress: Progress | None = None,
                   gone: Callable[[], bool] | None = None, ask: ClientAsk | None = None) -> GatewayCallResult:
        """Run one call of ``session`` through the governed call (spec §8.6). Returns ``{"text","is_error",
        "result"}``: the tool's result as its server sent it (``result``; None for a built-in tool's or Palui's
        own answer), or an error result saying why it did not run (refused, arguments refused, denied with the
        person's reason, ``approval pending: <id>`` after ``gateway.wait_seconds`` or when the client left, the
        brake). ``progress`` is told the wait for the person and the server's progress; ``gone`` says the client's
        request went away; ``ask`` puts a server's question asking for no secret to the client itself (a trusted
        client that declared elicitation), else the person is asked."""
        r = await self.session_for(session).call(tool, args, progress, gone,
                                                         _question_asker(ask) if ask is not None else None)
        # as the server sent it, bytes and hidden characters included: the gateway lists the hidden ones in the
        # result's _meta (spec §8.6, docs/decisions/0187-gateway-results-as-sent.md)
        return {"text": r.text, "is_error": r.is_error, "result": r.wire}

    def session_for(self, session: str) -> GatewaySession:
        """The runner's door for one session's calls and reads (spec §8.6). Raises NotFound."""
        # the runner's call collaborators import the model library (slow): only when a call is made
        from palui.runner.gateway_session import GatewaySession, Scope

        s, connectors = self._session(session)
        deps = self.turns_part.runner_deps()
        scope = Scope(s["client"], connectors, session, s["calls_per_hour"])
        return GatewaySession(deps, scope, s["turn_id"], deps.settings.gateway.wait_seconds, self._turns)

    def session_scope(self, session: str) -> tuple[str, tuple[str, ...] | None]:
        """The session's client and the connectors it was given (None: every MCP connector). Raises NotFound."""
        s, connectors = self._session(session)
        return s["client"], connectors

    def _session(self, session: str) -> tuple[Any, tuple[str, ...] | None]:
        """The session's row (with its turn's taint) and its client's connectors (None: every one)."""
        s = self.db.one("SELECT g.*, v.tainted, c.connectors_json, c.calls_per_hour FROM gateway_sessions g JOIN"
                        " conversations v ON v.id = g.conversation_id LEFT JOIN gateway_clients c ON c.name = g.client"
                        " WHERE g.id = ?", (session,))
        if s is None:
            raise NotFound(f"unknown gateway session {named(str(session))}")
        connectors = json.loads(s["connectors_json"]) if s["connectors_json"] else None
        return s, tuple(connectors) if connectors is not None else None
