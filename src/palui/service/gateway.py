"""Service part: the gateway's clients, sessions, tools and calls (spec §8.6, docs/gateway.md).

A **client** is named by the person (``palui gateway clients add NAME``) and holds a token: ``pgw_`` and
43 URL-safe characters (256 random bits), shown once and stored only as its SHA-256 (a leaked database
opens nothing). A client may be limited to some connectors and marked ``--context trusted``.

A **session** is a conversation of origin ``gateway`` with one turn row, status ``running`` and owner
``gateway`` (no process owns it, so it is never put back in the queue, and the tick never resumes it:
only ``awaiting_approval`` turns are resumed). Palui cannot see the client's context, so the turn starts
tainted ("the client's context is unknown") unless the client is trusted. Its calls are decided and run
by :class:`~palui.runner.gateway_call.GatewayCall`; an approval made by one is answered through every
existing door (``answer_approval``) and the waiting call reads the answer from the database. Ending a
session marks its turn ``done`` and cancels its pending approvals with that reason.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import TYPE_CHECKING, Any

from palui.errors import NotFound, UsageError
from palui.policy.matrix import decide
from palui.runner import approvals as approvals_mod
from palui.runner import state as st
from palui.store import catalog
from palui.store.db import Database
from palui.text.display import named, shown
from palui.text.escape import strip_hidden
from palui.types import Origin, TurnStatus, Verdict

if TYPE_CHECKING:
    from palui.results import GatewayCallResult, GatewayClient, GatewayTool
    from palui.runner.gateway_call import Progress
    from palui.service.clock import Clock
    from palui.service.turns import TurnsPart

#: The client's name: what the person calls it, and what approvals and the audit show.
NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
TOKEN_PREFIX = "pgw_"
#: The taint source of a session whose client's context is unknown (spec §8.6).
UNKNOWN_CONTEXT = "the client's context is unknown"
#: The cancel reason of the pending approvals of a session that ended.
SESSION_ENDED = "the gateway session ended"


def token_hash(token: str) -> str:
    """SHA-256 hex of a client token: what is stored (the token itself never is)."""
    return hashlib.sha256(token.encode()).hexdigest()


class GatewayPart:
    """The gateway's clients, sessions, tools and calls.

    Args:
        db, clock: the service's shared collaborators.
        turns_part: the runner's dependencies (database, settings, hub, the person's channel).
    """

    def __init__(self, db: Database, clock: Clock, turns_part: TurnsPart) -> None:
        self.db = db
        self.clock = clock
        self.turns_part = turns_part
        self._turns: dict[str, Any] = {}  # the session turns of this process (GatewayCall's ``turns``)

    # -- clients ----------------------------------------------------------------------------------

    def gateway_client_add(self, name: str, connectors: list[str] | None = None,
                           context: str = "unknown") -> GatewayClient:
        """Add a client named ``name`` (lower-case letters, digits, ``-``), seeing only ``connectors`` (None:
        all of them), its sessions starting tainted unless ``context`` is ``trusted``. Returns it with its
        ``token``: shown this once, stored hashed. Raises UsageError (bad name, context or connector, a
        name taken)."""
        if not isinstance(name, str) or not NAME.match(name):
            raise UsageError(f"a client name is lower-case letters, digits and '-' (at most 40): {named(str(name))}")
        if context not in ("unknown", "trusted"):
            raise UsageError(f"--context is 'trusted' or left out, not {named(str(context))}")
        if connectors is not None:
            known = {r["id"] for r in self.db.all("SELECT id FROM connectors")}
            missing = [c for c in connectors if c not in known]
            if missing or not connectors:
                raise UsageError(f"unknown connector(s): {', '.join(named(m) for m in missing[:5]) or '(none given)'} "
                                 "(see: palui connectors list)")
        if self.db.one("SELECT 1 FROM gateway_clients WHERE name = ?", (name,)):
            raise UsageError(f"a gateway client named {name!r} exists (palui gateway clients remove {name})")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.db.write() as c:
            c.execute("INSERT INTO gateway_clients (name, token_hash, connectors_json, context, created_at)"
                      " VALUES (?,?,?,?,?)", (name, token_hash(token), None if connectors is None
                                               else json.dumps(connectors), context, self.clock.now()))
        return {**self.gateway_client(name), "token": token}

    def gateway_clients(self) -> list[GatewayClient]:
        """Every client, by name (without tokens: only their hashes are stored)."""
        return [self._client(r) for r in self.db.all("SELECT * FROM gateway_clients ORDER BY name")]

    def gateway_client(self, name: str) -> GatewayClient:
        """One client. Raises NotFound."""
        r = self.db.one("SELECT * FROM gateway_clients WHERE name = ?", (name,))
        if r is None:
            raise NotFound(f"unknown gateway client {named(str(name))} (see: palui gateway clients list)")
        return self._client(r)

    def gateway_client_remove(self, name: str) -> list[str]:
        """Remove a client: its token opens nothing from now on and its open sessions end (their pending
        approvals cancelled). Returns the ended sessions' ids. Raises NotFound."""
        self.gateway_client(name)
        with self.db.write() as c:
            c.execute("DELETE FROM gateway_clients WHERE name = ?", (name,))
        ended = [r["id"] for r in self.db.all("SELECT id FROM gateway_sessions WHERE client = ? AND ended_at IS NULL",
                                              (name,))]
        for sid in ended:
            self.gateway_session_end(sid, "its client was removed")
        return ended

    def gateway_client_for_token(self, token: str) -> str | None:
        """The name of the client holding ``token``, None for an unknown or removed one."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        r = self.db.one("SELECT name FROM gateway_clients WHERE token_hash = ?", (token_hash(token),))
        return r["name"] if r else None

    def _client(self, r: Any) -> GatewayClient:
        sessions = self.db.row("SELECT COUNT(*) FROM gateway_sessions WHERE client = ? AND ended_at IS NULL",
                               (r["name"],))[0]
        return {"name": r["name"], "connectors": json.loads(r["connectors_json"]) if r["connectors_json"] else None,
                "context": r["context"], "created_at": r["created_at"], "open_sessions": int(sessions)}

    # -- sessions ---------------------------------------------------------------------------------

    def gateway_session_open(self, client: str) -> str:
        """Open a session of ``client``: a conversation of origin ``gateway`` and its one turn row, tainted
        from its start unless the client is trusted (spec §8.6). Returns the session id. Raises NotFound."""
        c = self.gateway_client(client)
        tainted = c["context"] != "trusted"
        cid = self.turns_part.new_conversation(Origin.GATEWAY, "gateway")
        tid, sid, now = st.new_id("t"), st.new_id("g"), self.clock.now()
        with self.db.write() as w:
            w.execute("INSERT INTO turns (id, conversation_id, origin, status, input, model, tainted, taint_source,"
                      " owner, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                      (tid, cid, Origin.GATEWAY.value, TurnStatus.RUNNING.value, f"gateway session of {client}", None,
                       int(tainted), UNKNOWN_CONTEXT if tainted else None, "gateway", now, now))
            if tainted:
                w.execute("UPDATE conversations SET tainted = 1, taint_source = ? WHERE id = ?", (UNKNOWN_CONTEXT, cid))
            w.execute("INSERT INTO gateway_sessions (id, client, conversation_id, turn_id, created_at)"
                      " VALUES (?,?,?,?,?)", (sid, client, cid, tid, now))
        return sid

    def gateway_session_end(self, session: str, reason: str = SESSION_ENDED) -> None:
        """End a session: its turn is ``done`` and its pending approvals are cancelled with ``reason``."""
        r = self.db.one("SELECT * FROM gateway_sessions WHERE id = ? AND ended_at IS NULL", (session,))
        if r is None:
            return
        now = self.clock.now()
        with self.db.write() as w:
            w.execute("UPDATE gateway_sessions SET ended_at = ?, end_reason = ? WHERE id = ?", (now, reason, session))
            w.execute("UPDATE turns SET status = ?, updated_at = ? WHERE id = ? AND status = 'running'",
                      (TurnStatus.DONE.value, now, r["turn_id"]))
        approvals_mod.cancel_for_turn(self.db, r["turn_id"], reason=reason)
        self._turns.pop(r["turn_id"], None)

    def gateway_sessions_end_open(self, reason: str) -> list[str]:
        """End every open session (``palui serve`` starting: the sessions of an earlier process are gone).
        Returns their ids."""
        ended = [r["id"] for r in self.db.all("SELECT id FROM gateway_sessions WHERE ended_at IS NULL")]
        for sid in ended:
            self.gateway_session_end(sid, reason)
        return ended

    # -- tools and calls --------------------------------------------------------------------------

    def gateway_catalog_version(self) -> int:
        """The stored catalog version: it changes with any switch, class, review flag or connector (what
        ``tools/list_changed`` watches)."""
        return catalog.version(self.db)

    def gateway_tools(self, session: str) -> list[GatewayTool]:
        """The tools the session's client is offered now: MCP connectors' tools (the built-ins are not offered
        through the gateway), usable, switched on, not flagged, in its connectors, ``run`` or ``ask`` for origin
        ``gateway`` (spec §8.6; the tool budget does not apply). Each with its
        model-visible name, pinned description (hidden characters removed, as a model is sent it, spec §4.7)
        and schema, and hints derived from its effective class."""
        s, connectors = self._session(session)
        snap = catalog.snapshot(self.db)
        mcp = {r["id"] for r in self.db.all("SELECT id FROM connectors WHERE kind = 'mcp'")}
        out: list[GatewayTool] = []
        for row in sorted(snap.tools.values(), key=lambda r: r.name):
            if not row.usable or row.changed or row.needs_tasks or row.connector not in mcp:
                continue
            if connectors is not None and row.connector not in connectors:
                continue
            if decide(row.tool_class, row.enabled, Origin.GATEWAY, bool(s["tainted"])).verdict not in (
                    Verdict.RUN, Verdict.ASK):
                continue
            out.append({"name": row.name, "description": strip_hidden(row.description),
                        "input_schema": row.input_schema,
                        "read_only": row.tool_class.value == "read",
                        "destructive": row.tool_class.value == "destructive",
                        "open_world": row.reaches_outside, "class": row.tool_class.value})
        return out

    async def gateway_call(self, session: str, tool: str, args: dict[str, Any],
                           progress: Progress | None = None) -> GatewayCallResult:
        """Decide and run one call of ``session`` (spec §8.6). Returns ``{"text","is_error"}``: the tool's
        result (hidden characters shown as escapes, spec §4.7), or an error result saying why it did not run
        (refused, denied with the person's reason, ``approval pending: <id>`` after ``gateway.wait_seconds``)."""
        if not isinstance(args, dict):
            return {"text": "Error: arguments must be a JSON object", "is_error": True}
        # the runner's call collaborators import the model library (slow): only when a call is made
        from palui.runner.gateway_call import GatewayCall, Scope

        s, connectors = self._session(session)
        deps = self.turns_part.runner_deps()
        wait = deps.settings.gateway.wait_seconds
        r = await GatewayCall(deps, Scope(s["client"], connectors), s["turn_id"], wait, self._turns).call(
            tool, args, progress)
        # what the client's model reads: hidden characters shown as escapes, as on every surface (spec §4.7)
        return {"text": shown(r.text), "is_error": r.is_error}

    def _session(self, session: str) -> tuple[Any, tuple[str, ...] | None]:
        """The session's row (with its turn's taint) and its client's connectors (None: every one)."""
        s = self.db.one("SELECT g.*, t.tainted, c.connectors_json FROM gateway_sessions g JOIN turns t ON"
                        " t.id = g.turn_id LEFT JOIN gateway_clients c ON c.name = g.client WHERE g.id = ?", (session,))
        if s is None:
            raise NotFound(f"unknown gateway session {named(str(session))}")
        connectors = json.loads(s["connectors_json"]) if s["connectors_json"] else None
        return s, tuple(connectors) if connectors is not None else None
