"""A turn's durable state in SQLite, and the compare-and-set that lets one process run it (spec §5).

Also the conversation's history as the model is sent it (:func:`history`), and
:class:`EarlierTurns`, the runner's once-per-run hold of it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from palui.policy.caps import GLOBAL_CAPS as GLOBAL_CAPS  # re-exported: the caps that pause every new turn
from palui.policy.caps import WEBHOOK_RUNS_PER_HOUR
from palui.runner.pending import PendingCall, from_stored
from palui.store import ids
from palui.store.db import Database
from palui.types import Origin, TurnStatus

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic_ai.messages import ModelMessage

    from palui.policy.caps import CapVerdict
    from palui.results import TurnEvent

def _hostname() -> str:
    """This host's name, as ``socket.gethostname()`` gives it (without importing socket where ``os.uname`` exists)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


OWNER = f"{_hostname()}:{os.getpid()}"


def new_id(prefix: str) -> str:
    """A new id of 128 random bits such as ``t-3f9a1c2b7d04e6a8b9c0d1e2f3a4b5c6`` (:mod:`palui.store.ids`)."""
    return ids.new_id(prefix)


@dataclass
class Turn:
    """A turn as stored. ``messages`` are this turn's model messages only; ``pending`` the
    tool calls of the last model response not yet answered (decided in order, spec §4;
    :mod:`palui.runner.pending`)."""

    id: str
    conversation_id: str
    origin: Origin
    status: TurnStatus
    input: str
    model: str | None
    messages: list[ModelMessage]
    offered: list[str] | None
    pending: list[PendingCall] | None
    tainted: bool
    taint_source: str | None
    steps: int
    seconds: float
    input_tokens: int
    output_tokens: int
    answer: str | None
    error: str | None
    budget_hit: str | None
    job_id: str | None
    version: int
    stop_requested: bool
    created_at: float
    events: list[TurnEvent] = field(default_factory=list)
    # How many messages / events the stored row holds: unchanged lists are not re-serialized.
    saved_counts: tuple[int, int] = (-1, -1)
    # The row's columns as this process last read or wrote them: a save writes only what changed.
    saved_cols: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _adapter() -> TypeAdapter[list[ModelMessage]]:
    # pydantic-ai takes ~1.7 s to import: only turn commands pay for it.
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter


def load(db: Database, turn_id: str) -> Turn | None:
    r = db.one("SELECT * FROM turns WHERE id = ?", (turn_id,))
    if r is None:
        return None
    t = Turn(
        id=r["id"], conversation_id=r["conversation_id"], origin=Origin(r["origin"]), status=TurnStatus(r["status"]),
        input=r["input"], model=r["model"], messages=_adapter().validate_json(r["messages_json"]),
        offered=json.loads(r["offered_json"]) if r["offered_json"] else None,
        pending=from_stored(json.loads(r["pending_json"])) if r["pending_json"] else None,
        tainted=bool(r["tainted"]), taint_source=r["taint_source"], steps=r["steps"], seconds=r["seconds"],
        input_tokens=r["input_tokens"], output_tokens=r["output_tokens"], answer=r["answer"], error=r["error"],
        budget_hit=r["budget_hit"], job_id=r["job_id"], version=r["version"],
        stop_requested=bool(r["stop_requested"]), created_at=r["created_at"],
        events=[json.loads(e[0]) for e in db.all("SELECT event FROM turn_events WHERE turn_id = ? ORDER BY seq",
                                                 (turn_id,))],
    )
    t.saved_counts = (len(t.messages), len(t.events))
    t.saved_cols = {k: r[k] for k in _COLUMNS}
    return t


#: The turn row's columns a save keeps (besides the messages, appended, and ``updated_at``).
_COLUMNS = ("status", "offered_json", "pending_json", "tainted", "taint_source", "steps", "seconds", "input_tokens",
            "output_tokens", "answer", "error", "budget_hit")
#: Appends a JSON list (``[a, b]``) to the stored one (``[x, y]`` → ``[x, y, a, b]``): the stored text is
#: the model library's compact encoding, so the new messages are encoded once and the old never again.
_APPEND = "messages_json = substr(messages_json, 1, length(messages_json) - 1) || ',' || substr(?, 2)"


def save(db: Database, t: Turn) -> None:
    """Persist the turn's progress (only while this process owns it), writing what changed since this
    process last read or wrote the row: the messages added since are encoded and appended to the stored list
    (the model library's JSON of the same list, readable by every version); ``offered_json`` and
    ``pending_json`` only when they changed (the offer once per turn, the held calls when one changes state);
    events are appended to ``turn_events``. Nothing to write: no transaction."""
    want = {
        "status": t.status.value,
        "offered_json": json.dumps(t.offered, allow_nan=False) if t.offered is not None else None,
        "pending_json": json.dumps(t.pending, allow_nan=False) if t.pending is not None else None,
        "tainted": int(t.tainted), "taint_source": t.taint_source, "steps": t.steps, "seconds": t.seconds,
        "input_tokens": t.input_tokens, "output_tokens": t.output_tokens, "answer": t.answer, "error": t.error,
        "budget_hit": t.budget_hit,
    }
    cols = {k: v for k, v in want.items() if k not in t.saved_cols or t.saved_cols[k] != v}
    counts = (len(t.messages), len(t.events))
    sets = [f"{k} = ?" for k in cols]
    params: list[Any] = list(cols.values())
    done = t.saved_counts[0]
    if counts[0] != done:
        if 0 < done < counts[0]:
            sets.append(_APPEND)
            params.append(_adapter().dump_json(t.messages[done:]).decode())
        else:
            sets.append("messages_json = ?")
            params.append(_adapter().dump_json(t.messages).decode())
    events = t.events[max(0, t.saved_counts[1]):]
    # A tainted turn taints its conversation (spec §4.3): once per process, and whenever its taint changes.
    taint_conv = t.tainted and (not t.saved_cols.get("conversation_tainted") or "tainted" in cols)
    if not sets and not events and not taint_conv:
        return
    with db.write() as c:
        if sets:
            c.execute(f"UPDATE turns SET {', '.join(sets)}, updated_at = ? WHERE id = ?", (*params, time.time(), t.id))
        if events:
            start = max(0, t.saved_counts[1])
            c.executemany("INSERT OR IGNORE INTO turn_events (turn_id, seq, event) VALUES (?,?,?)",
                          [(t.id, i, json.dumps(e, default=str, allow_nan=False)) for i, e in enumerate(events, start)])
        if taint_conv:
            c.execute("UPDATE conversations SET tainted = 1, taint_source = COALESCE(taint_source, ?) WHERE id = ?",
                      (t.taint_source, t.conversation_id))
    t.saved_counts = counts
    t.saved_cols.update(want)
    if taint_conv:
        t.saved_cols["conversation_tainted"] = True


def claim(db: Database, turn_id: str, from_status: tuple[TurnStatus, ...]) -> bool:
    """Compare-and-set the turn to ``running`` for this process. True if this process won (spec §5)."""
    marks = ",".join("?" for _ in from_status)
    with db.write() as c:
        cur = c.execute(
            f"UPDATE turns SET status='running', owner=?, version=version+1, updated_at=? WHERE id=?"
            f" AND status IN ({marks})",
            (OWNER, time.time(), turn_id, *[s.value for s in from_status]),
        )
        return cur.rowcount == 1


@dataclass(frozen=True)
class Claim:
    """The outcome of a claim: ``claimed`` by this process, or why not: ``cap`` (the cap that keeps
    a new turn queued), ``behind`` (the earlier live turn of its conversation it waits for).
    ``paused_now`` names the global cap whose pause this claim started, or the webhook share whose
    hold it started (tell the person once)."""

    claimed: bool
    cap: str | None = None
    behind: str | None = None
    paused_now: str | None = None


PAUSE_KEY = "pause"  # kv key of the global pause (spec §6)
WEBHOOK_HOLD_KEY = "webhook_hold"  # kv key of the webhook share's hold (spec §6.6): webhook turns only
LIVE_STATUSES = ("running", "awaiting_approval", "queued")


def _live_before(c: sqlite3.Connection, turn_id: str, conversation_id: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = c.execute(
        "SELECT id, status FROM turns WHERE conversation_id = ? AND rowid < (SELECT rowid FROM turns"
        " WHERE id = ?) AND status IN ('running','awaiting_approval','queued') ORDER BY rowid LIMIT 1",
        (conversation_id, turn_id),
    ).fetchone()
    return row


def live_turn_before(db: Database, turn_id: str) -> sqlite3.Row | None:
    """The earliest live (running, awaiting approval, queued) turn of ``turn_id``'s conversation
    created before it, or None: the turn it waits behind (spec §8: one turn at a time)."""
    r = db.one("SELECT conversation_id FROM turns WHERE id = ?", (turn_id,))
    return _live_before(db._connect(), turn_id, r["conversation_id"]) if r else None


def set_pause_in_tx(c: sqlite3.Connection, cap: str | None, key: str = PAUSE_KEY) -> bool:
    """Record (``cap``) or clear (None) the global pause on connection ``c``, inside the caller's
    transaction. True when a new pause starts (the person is told once per pause, spec §6).
    ``key`` :data:`WEBHOOK_HOLD_KEY` records the webhook share's hold instead (spec §6.6)."""
    r = c.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
    if cap is None:
        if r is not None:
            c.execute("DELETE FROM kv WHERE key = ?", (key,))
        return False
    if r is not None and r[0] == cap:
        return False
    c.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, cap))
    return True


def set_pause(db: Database, cap: str) -> bool:
    """:func:`set_pause_in_tx` in a transaction of its own (a job postponed by a global cap)."""
    with db.write() as c:
        return set_pause_in_tx(c, cap)


def claim_new(db: Database, turn_id: str,
              limits_for: Callable[[sqlite3.Connection, sqlite3.Row, float], CapVerdict],
              now: float | None = None) -> Claim:
    """Admit a queued turn as a new run and claim it, in one transaction (spec §6: caps hold
    under concurrency, two turns racing for the last slot cannot both start; spec §8: a
    conversation runs one turn at a time, oldest first).

    ``limits_for(c, turn_row, now)`` returns a :class:`~palui.policy.caps.CapVerdict` from
    counters read inside the same transaction. The global pause is set or cleared in the same
    transaction, so exactly one claim starts each pause. The webhook share (spec §6.6) is not
    a global pause: a webhook turn over it stays queued and only the webhook hold is recorded (one
    notice per hold, cleared when a webhook turn is admitted again); chat and job turns are
    admitted as before. A turn whose estimated input is more than a whole token cap (``never_fits``) is
    claimed without counting a run or touching the pause, and refused by the runner before its first
    step (spec §6.5). Returns a :class:`Claim`.
    """
    now = time.time() if now is None else now
    with db.write() as c:
        row = c.execute("SELECT * FROM turns WHERE id = ? AND status = 'queued'", (turn_id,)).fetchone()
        if row is None:
            return Claim(False)
        ahead = _live_before(c, turn_id, row["conversation_id"])
        if ahead is not None:
            return Claim(False, behind=ahead["id"])
        counted = c.execute("SELECT 1 FROM runs WHERE turn_id = ?", (turn_id,)).fetchone() is not None
        verdict = limits_for(c, row, now) if not counted else None
        if verdict is not None and verdict.never_fits:
            pass  # claimed, not a run, the pause untouched: the runner refuses it before its first step (spec §6.5)
        elif verdict is not None:
            if not verdict.ok:
                # Only a global cap pauses Palui; a job over its own cap is that job's matter, and
                # the webhook share holds webhook turns only.
                started = False
                if verdict.cap in GLOBAL_CAPS:
                    started = set_pause_in_tx(c, verdict.cap)
                elif verdict.cap == WEBHOOK_RUNS_PER_HOUR:
                    started = set_pause_in_tx(c, verdict.cap, WEBHOOK_HOLD_KEY)
                return Claim(False, cap=verdict.cap, paused_now=verdict.cap if started else None)
            c.execute("INSERT INTO runs (time, turn_id, origin) VALUES (?,?,?)", (now, turn_id, row["origin"]))
            set_pause_in_tx(c, None)
            if row["origin"] == Origin.WEBHOOK.value:
                set_pause_in_tx(c, None, WEBHOOK_HOLD_KEY)
        c.execute(
            "UPDATE turns SET status='running', owner=?, version=version+1, updated_at=? WHERE id=?",
            (OWNER, now, turn_id),
        )
        return Claim(True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def owner_alive(owner: str | None) -> bool:
    """Is the process named ``host:pid`` alive? Owners on other hosts count as alive (we cannot tell)."""
    host, _, pid = (owner or "").rpartition(":")
    if host != _hostname() or not pid.isdigit():
        return True
    return int(pid) == os.getpid() or _pid_alive(int(pid))


def recover_orphans(db: Database, now: float | None = None) -> list[str]:
    """Put turns left ``running`` by a process of this host that no longer exists (kill -9, a
    crash, power loss) back to ``queued``, so the service runs them on. Returns their ids.

    Only owners on this host whose pid is gone are touched (a live pid, even a reused one, is
    left alone: conservative). The run was counted when it was first claimed, so admission
    does not count it again; a tool call that was in flight is never re-run (the runner
    answers it "interrupted … may have run", spec §5).
    """
    now = time.time() if now is None else now
    me = _hostname()
    out = []
    for r in db.all("SELECT id, owner FROM turns WHERE status = 'running'"):
        host, _, pid = (r["owner"] or "").rpartition(":")
        if host != me or not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        with db.write() as c:
            cur = c.execute(
                "UPDATE turns SET status='queued', updated_at=? WHERE id=? AND status='running' AND owner=?",
                (now, r["id"], r["owner"]),
            )
            if cur.rowcount:
                out.append(r["id"])
    return out


def answered_turn_ids(db: Database) -> list[str]:
    """Turns paused for an approval (or a server's question) that is no longer pending (answered,
    expired, cancelled): ready to go on, in whichever process claims them."""
    return [
        r["id"]
        for r in db.all(
            "SELECT t.id FROM turns t WHERE t.status = 'awaiting_approval' AND NOT EXISTS"
            " (SELECT 1 FROM approvals a WHERE a.turn_id = t.id AND a.status = 'pending') AND NOT EXISTS"
            " (SELECT 1 FROM elicitations e WHERE e.turn_id = t.id AND e.status = 'pending')"
        )
    ]


def stop_requested(db: Database, turn_id: str) -> bool:
    r = db.one("SELECT stop_requested FROM turns WHERE id = ?", (turn_id,))
    return bool(r and r[0])


HISTORY_CACHE = 512  # earlier turns whose decoded messages one process keeps (per database)
HISTORY_MAX_CHARS = 120_000  # stored message characters of earlier turns sent with a turn (spec §9.4)


def history(db: Database, conversation_id: str, before: float,
            max_chars: int = HISTORY_MAX_CHARS) -> list[ModelMessage]:
    """Model messages of the conversation's earlier turns, oldest first, trimmed to ``max_chars``.

    Whole turns are dropped from the oldest end (spec §9); taint is kept on the
    conversation row, so trimming never clears it (spec §4). A trailing model response
    whose tool calls were never answered (a stopped turn) is dropped.

    Read newest first and only as far as the trimming keeps (docs/decisions/0075-history-read-newest-first.md):
    the cost follows what is sent, not the conversation's length. An earlier turn's decoded messages are
    kept per process (at most ``HISTORY_CACHE`` turns), keyed by its id and the length of
    its stored JSON (a turn's messages only grow), so a long conversation is not decoded
    again at every turn.
    """
    cache: dict[tuple[str, int], list[ModelMessage]] = db.memo.setdefault("history", {})
    chunks: list[list[ModelMessage]] = []
    total = 0
    with db.read() as c:
        rows = c.execute("SELECT id, messages_json FROM turns WHERE conversation_id = ? AND created_at < ?"
                         " ORDER BY created_at DESC", (conversation_id, before))
        for tid, raw in rows:
            size = len(raw)
            if total + size > max_chars and chunks:
                break
            total += size
            key = (tid, size)
            msgs = cache.pop(key, None)  # popped and put back: the dict's order is the recency
            if msgs is None:
                msgs = _answered_only(_adapter().validate_json(raw))
            cache[key] = msgs
            chunks.append(msgs)
    while len(cache) > HISTORY_CACHE:
        del cache[next(iter(cache))]
    out: list[ModelMessage] = []
    for ch in reversed(chunks):
        out.extend(ch)
    return out


def history_chars(c: sqlite3.Connection, conversation_id: str, before: float,
                  max_chars: int = HISTORY_MAX_CHARS) -> int:
    """How many stored characters :func:`history` sends with a turn of the conversation created at
    ``before``: the same trimming (newest first, whole turns, the newest one always), read from the stored
    lengths on connection ``c`` without decoding anything (the caps' estimate of a turn's input)."""
    total, taken = 0, False
    rows = c.execute("SELECT COALESCE(length(messages_json), 0) FROM turns WHERE conversation_id = ?"
                     " AND created_at < ? ORDER BY created_at DESC", (conversation_id, before))
    for (size,) in rows:
        if total + size > max_chars and taken:
            break
        total, taken = total + size, True
    return total


class EarlierTurns:
    """The messages of a turn's earlier turns (:func:`history`), read once per run and fixed while it runs.

    Owned by the runner, which sends them to the model at each step; the Rule of Two asks it too
    (the private results the model saw earlier in the conversation, :mod:`palui.runner.rule_of_two`).
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._messages: list[ModelMessage] | None = None

    def messages(self, t: Turn) -> list[ModelMessage]:
        """The earlier turns' messages of ``t``'s conversation, oldest first (read at the first ask)."""
        if self._messages is None:
            self._messages = history(self._db, t.conversation_id, t.created_at)
        return self._messages


def _answered_only(msgs: list[ModelMessage]) -> list[ModelMessage]:
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    while msgs and isinstance(msgs[-1], ModelResponse) and any(isinstance(p, ToolCallPart) for p in msgs[-1].parts):
        msgs = msgs[:-1]
    return msgs
