"""The ``palui run --json`` shape of a turn (spec §11), as every front end shows it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from palui.errors import NotFound
from palui.runner import approvals, elicitations
from palui.runner import state as st
from palui.store.db import Database
from palui.text.display import named
from palui.types import TurnStatus

if TYPE_CHECKING:
    from palui.results import TurnEvent, TurnResult

_LIVE_WORDS = {"running": "the running turn", "awaiting_approval": "the turn waiting for approval",
               "queued": "the queued turn"}


def turn_result(db: Database, turn_id: str, events: list[TurnEvent] | None = None) -> TurnResult:
    """``{"status","answer","conversation","turn","origin","events","usage","tainted","taint_source","error",
    "budget","pending_approvals","pending_elicitations"}``; ``events`` None: the stored ones.

    A queued turn waiting behind another of its conversation has ``queued_behind`` (that
    turn's id) and ``queued_reason`` ("queued behind the running turn t-…; /stop cancels it").
    Raises NotFound.
    """
    # The row's own columns only: the messages are not decoded to say how a turn went.
    t = db.one("SELECT id, conversation_id, origin, status, answer, steps, seconds, input_tokens, output_tokens,"
               " tainted, taint_source, error, budget_hit FROM turns WHERE id = ?", (turn_id,))
    if t is None:
        raise NotFound(f"unknown turn {named(turn_id)}")
    if events is None:
        events = [json.loads(e[0]) for e in db.all("SELECT event FROM turn_events WHERE turn_id = ? ORDER BY seq",
                                                   (turn_id,))]
    status = TurnStatus(t["status"])
    pending = [
        approvals.as_dict(r)
        for r in db.all("SELECT * FROM approvals WHERE turn_id = ? AND status = 'pending'", (turn_id,))
    ]
    out: TurnResult = {
        "status": status.value,
        "answer": t["answer"],
        "conversation": t["conversation_id"],
        "turn": t["id"],
        "origin": t["origin"],
        "events": events,
        "usage": {
            "steps": t["steps"],
            "seconds": round(t["seconds"], 3),
            "input_tokens": t["input_tokens"],
            "output_tokens": t["output_tokens"],
            "tokens": t["input_tokens"] + t["output_tokens"],
        },
        "tainted": bool(t["tainted"]),
        "taint_source": t["taint_source"],
        "error": t["error"],
        "budget": t["budget_hit"],
        "pending_approvals": pending,
        "pending_elicitations": elicitations.pending_for_turn(db, turn_id),
    }
    if status is TurnStatus.QUEUED:
        ahead = st.live_turn_before(db, turn_id)
        if ahead is not None:
            out["queued_behind"] = ahead["id"]
            out["queued_reason"] = (
                f"queued behind {_LIVE_WORDS.get(ahead['status'], 'another turn')} {ahead['id']}; /stop cancels it"
            )
    return out
