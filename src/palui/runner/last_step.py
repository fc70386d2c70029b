"""The last step without tools (spec §6.3): a guard that ends a turn's tool use lets the model answer.

When a loop rule (:mod:`palui.runner.loop_guard`: repeated calls, the error streak, the person's denials) or
the step budget ends a turn's tool use, the model is asked once more, with no tools it may call and a
line saying why (:func:`line`), so the person gets an answer; the turn then ends with status ``budget``,
the answer, and the guard's reason. The step counts against the token caps like any other and comes on
top of ``budgets.steps`` (at most one per turn). It is not made when a token cap is already crossed (the
turn ends with the guard's reason and the cap's) or when the time budget is spent (the time budget ended
the turn).

The line is sent with that request only, as a system part after the last results; it is not stored
with the turn. The reason is stored as the turn's ``last_step`` event, so a last step cut short (the
process ended during it) is made again, not followed by an ordinary step. A call the model makes anyway
(a provider that ignores ``tool_choice``, a replay script) is never sent: it is answered "not run",
audited ``not run: last step`` and left out of the stored response, whose text is kept.

:class:`LastStep` is held by the runner; it keeps no state of its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, ToolCallPart

from palui.runner.offer import usable_tool
from palui.runner.pending import from_part

if TYPE_CHECKING:
    from palui.runner.call_records import CallRecords
    from palui.runner.state import Turn
    from palui.runner.turn_events import Emit
    from palui.store.db import Database

#: The audit outcome of a call the model made in its last step.
NOT_RUN = "not run: last step"


def line(why: str) -> str:
    """What the model is told in its last step: why its tools ended, and to answer with what it has."""
    return (f"Palui has ended this turn's tool use: {why}. You have no tools now and this is your last step: "
            "answer the person with what you found so far, and say plainly what was not done and why.")


def reason(t: Turn) -> str | None:
    """The reason of the turn's last step when it was begun (its ``last_step`` event), else None."""
    return next((e["reason"] for e in t.events if e["type"] == "last_step"), None)


def with_line(messages: list[ModelMessage], why: str) -> list[ModelMessage]:
    """``messages`` with :func:`line` after them: added to the last request (the calls' results), as
    a new request when the last message is a response. The list given is not changed."""
    part = SystemPromptPart(line(why))
    if messages and isinstance(messages[-1], ModelRequest):
        return [*messages[:-1], replace(messages[-1], parts=[*messages[-1].parts, part])]
    return [*messages, ModelRequest(parts=[part])]


class LastStep:
    """The calls of a turn's last step, and what of its response is kept.

    Args:
        db: the catalog (the class a call's tool is audited with).
        records: answers and audits a call that is not run.
        emit: the turn's event sink.
    """

    def __init__(self, db: Database, records: CallRecords, emit: Emit) -> None:
        self._db = db
        self._records = records
        self._emit = emit

    def begin(self, t: Turn, why: str) -> None:
        """Record that the turn's tool use ended for ``why`` (once: a step made again keeps the first)."""
        if reason(t) is None:
            self._emit(t, {"type": "last_step", "reason": why})

    def keep(self, t: Turn, response: ModelResponse) -> None:
        """Store the last step's response without its tool calls; answer each call "not run" and audit it."""
        calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
        kept = [p for p in response.parts if not isinstance(p, ToolCallPart)]
        if kept:
            t.messages.append(replace(response, parts=kept))
        for part in calls:
            call = from_part(part)
            text = "Error: not run: the turn's last step has no tools."
            self._records.result(call, text, True)
            self._records.audit(t, call, usable_tool(self._db, call["tool"]), "unavailable",
                                "the last step has no tools", NOT_RUN)
            self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": "unavailable",
                           "reason": "the last step has no tools", "result": text, "is_error": True,
                           "tainted": t.tainted, "not_dispatched": True})
