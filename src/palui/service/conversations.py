"""Service part: conversations and their turns as a front end shows them (the web chat, ``palui conversations``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from palui.errors import NotFound
from palui.runner import approvals, elicitations
from palui.service.status import StatusPart
from palui.service.turns import TurnsPart
from palui.store import ids
from palui.store.db import Database
from palui.text.display import named

if TYPE_CHECKING:
    from palui.results import Conversation, ConversationSummary, Elicitation, TurnApproval, TurnDetail


class ConversationsPart:
    """Reading conversations (writes happen through :class:`~palui.service.turns.TurnsPart`).

    Args:
        db: the database (conversations, turns, approvals, questions).
        turns_part: a turn's result.
        status_part: the pause state a queued turn waits on.
    """

    def __init__(self, db: Database, turns_part: TurnsPart, status_part: StatusPart) -> None:
        self.db = db
        self.turns_part = turns_part
        self.status_part = status_part

    def turn_detail(self, turn_id: str) -> TurnDetail:
        """:meth:`TurnsPart.result` plus ``input``, ``created_at`` (epoch s), ``approvals`` (each approval
        the turn asked for, by id, in its current state), ``elicitations`` (each question a server
        asked during it, by id) and, for a queued turn, ``pause``. A unique prefix of the id is enough."""
        turn_id = ids.resolve(self.db, turn_id)
        r = self.turns_part.result(turn_id)
        row = self.db.one("SELECT input, created_at FROM turns WHERE id = ?", (turn_id,))
        if row is None:
            raise NotFound(f"unknown turn {named(turn_id)}")
        states: dict[str, TurnApproval] = {}
        for e in r["events"]:
            if e["type"] == "approval":
                try:
                    states[e["approval"]] = approvals.get(self.db, e["approval"])
                except NotFound:
                    pass
        asked = [e["elicitation"] for e in r["events"] if e["type"] == "elicitation"]
        questions: dict[str, Elicitation] = {q["id"]: {**q, "conversation": r["conversation"]}
                                             for q in elicitations.for_ids(self.db, asked)}
        # ``r`` is a TurnResult, which has no ``pause``: added below while the turn is queued.
        detail = cast("TurnDetail", {**r, "input": row["input"], "created_at": row["created_at"],
                                     "approvals": states, "elicitations": questions})
        if r["status"] == "queued":
            detail["pause"] = self.status_part.pause_state()
        return detail

    def list(self, limit: int = 50, channel: str | None = None) -> list[ConversationSummary]:
        """Newest first: ``[{"id","origin","channel","tainted","taint_source","title","last","turns",
        "live","created_at"}]`` (``title`` is the first turn's input; ``channel`` where it was started,
        None when not recorded (before migration 30); ``live`` the number of turns running, waiting for
        approval or queued; times in epoch s). ``channel`` keeps only those started there.

        Ordered by the stored ``last_at`` (kept by trigger on every new turn, migration 12) through its
        index, so only the ``limit`` conversations shown are read, whatever the history
        (docs/decisions/0074-conversations-ordered-by-last-at.md)."""
        where, params = ("WHERE c.channel = ?", (channel, limit)) if channel else ("", (limit,))
        rows = self.db.all(
            "SELECT c.id, c.origin, c.channel, c.tainted, c.taint_source, c.created_at,"
            " (SELECT input FROM turns t WHERE t.conversation_id = c.id ORDER BY t.created_at LIMIT 1) AS title,"
            " (SELECT MAX(created_at) FROM turns t WHERE t.conversation_id = c.id) AS last,"
            " (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turns,"
            " (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id"
            "  AND t.status IN ('running','awaiting_approval','queued')) AS live"
            f" FROM conversations c {where} ORDER BY c.last_at DESC LIMIT ?",
            params,
        )
        return [{"id": r["id"], "origin": r["origin"], "channel": r["channel"], "tainted": bool(r["tainted"]),
                 "taint_source": r["taint_source"], "created_at": r["created_at"], "title": r["title"],
                 "last": r["last"], "turns": r["turns"], "live": r["live"]} for r in rows]

    def get(self, cid: str) -> Conversation:
        """One conversation with its turns (each :meth:`turn_detail`); a unique prefix of its id is enough.
        Raises NotFound, UsageError (an ambiguous prefix)."""
        cid = ids.resolve(self.db, cid)
        c = self.db.one("SELECT * FROM conversations WHERE id = ?", (cid,))
        if c is None:
            raise NotFound(f"unknown conversation {named(cid)}")
        turns = [
            self.turn_detail(r["id"])
            for r in self.db.all("SELECT id FROM turns WHERE conversation_id = ? ORDER BY created_at", (cid,))
        ]
        return {
            "id": c["id"],
            "origin": c["origin"],
            "channel": c["channel"],
            "created_at": c["created_at"],
            "tainted": bool(c["tainted"]),
            "taint_source": c["taint_source"],
            "turns": turns,
            "model": (self.db.one("SELECT model FROM turns WHERE conversation_id = ? AND model IS NOT NULL"
                                  " ORDER BY created_at DESC LIMIT 1", (cid,)) or {"model": None})["model"],
        }

    def of_turn(self, turn_id: str | None) -> str | None:
        """The conversation of a turn (None for an unknown turn or None)."""
        if not turn_id:
            return None
        row = self.db.one("SELECT conversation_id FROM turns WHERE id = ?", (turn_id,))
        return row["conversation_id"] if row else None

