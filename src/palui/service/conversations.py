"""Service part: conversations and their turns as a front end shows them (the web chat, ``palui conversations``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from palui.errors import NotFound
from palui.runner import approvals, elicitations
from palui.service.reads import ConversationReads
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
        self.reads = ConversationReads(db)

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
        """:meth:`palui.service.reads.ConversationReads.list` (the same query, which ``palui conversations list``
        runs without the rest of the service)."""
        return self.reads.list(limit, channel)

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

