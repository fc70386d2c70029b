"""The Rule of Two at call time (issue 15 §6): the facts for :func:`palui.policy.outside.rule_of_two`.

Part of the turn runner (a mixin of :class:`~palui.runner.calls.CallsMixin`). Only a call the matrix
lets ``run`` is looked at, and only in a tainted turn and for a tool that reaches outside: then the
conversation's untrusted content (the ``untrusted_content`` table), the person's own messages (the
inputs of its chat and job turns), the arguments of its earlier outside calls that ran, and the
private-store results the model saw (this turn's messages
and the earlier turns' history the model is sent: ``recall``, ``tasks`` and connectors the person
marked private) are handed to the pure rule. A reason turns the verdict into ``ask``; the approval
that follows is an ordinary one (re-decided by the matrix, which still says ``run``, so an approved
call is never refused for it).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from palui.policy.outside import OutsideFacts, rule_of_two
from palui.runner import state as st
from palui.store import tools as tools_store
from palui.types import Decision, Verdict

if TYPE_CHECKING:
    from palui.runner.state import Turn
    from palui.store.db import Database
    from palui.store.tools import ToolRow

#: Built-in connectors whose results are the person's private data.
PRIVATE_BUILTINS = ("recall", "tasks")


def private_results(messages: list[Any], private: set[str], where: str | None = None) -> list[tuple[str, str]]:
    """(source, text) of every tool result in ``messages`` whose connector (the part of the model-visible
    name before ``__``) is in ``private``. ``where`` names them (``"earlier in this conversation"``); else
    the step of this turn they answered (``"recall__search_memories at step 2"``)."""
    out: list[tuple[str, str]] = []
    step = 0
    for m in messages:
        if isinstance(m, ModelResponse):
            step += 1
        elif isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart) and p.tool_name.split("__", 1)[0] in private:
                    text = p.content if isinstance(p.content, str) else str(p.content)
                    out.append((f"{p.tool_name} {where or f'at step {step}'}", text))
    return out


class OutsideMixin:
    """The Rule of Two check of the turn runner."""

    db: Database
    _history: list | None

    def _rule_of_two(self, t: Turn, call: dict[str, Any], row: ToolRow, d: Decision) -> Decision:
        """``d``, or an ``ask`` with the Rule of Two's reason when it holds for this call."""
        if d.verdict is not Verdict.RUN or not t.tainted or not row.reaches_outside:
            return d
        why = rule_of_two(row.name, call["args"], self._outside_facts(t))
        return Decision(Verdict.ASK, f"ask: {why}", "rule of two") if why else d

    def _outside_facts(self, t: Turn) -> OutsideFacts:
        untrusted = [(r["source"], r["text"]) for r in self.db.all(
            "SELECT source, text FROM untrusted_content WHERE conversation_id = ? ORDER BY id", (t.conversation_id,))]
        own = [r["input"] for r in self.db.all(
            "SELECT input FROM turns WHERE conversation_id = ? AND origin IN ('chat', 'job')", (t.conversation_id,))]
        private = set(PRIVATE_BUILTINS) | {r["id"] for r in self.db.all("SELECT id FROM connectors WHERE private = 1")}
        if self._history is None:
            self._history = st.history(self.db, t.conversation_id, t.created_at)
        seen = private_results(self._history, private, "earlier in this conversation")
        seen += private_results(t.messages, private)
        return OutsideFacts(untrusted=untrusted, own=own, private=seen, private_connectors=frozenset(private),
                            reached=self._reached(t))

    def _reached(self, t: Turn) -> list[str]:
        """The arguments of this conversation's earlier calls to tools that reach outside and ran: in the
        history the model is sent, this turn's messages, and the calls of this response done so far."""
        ok: dict[str, bool] = {}
        calls: list[tuple[str, str, Any]] = []  # (call id, tool, args)
        for m in [*(self._history or []), *t.messages]:
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    calls.append((p.tool_call_id, p.tool_name, p.args))
                elif isinstance(p, ToolReturnPart):
                    ok[p.tool_call_id] = p.outcome == "success"
        for c in t.pending or []:
            if c.get("state") == "done":
                ok[c["id"]] = not c.get("is_error")
        outside: dict[str, bool] = {}
        out = []
        for cid, tool, args in calls:
            if not ok.get(cid):
                continue
            if tool not in outside:
                row = tools_store.get_tool(self.db, tool)
                outside[tool] = bool(row and row.reaches_outside)
            if outside[tool]:
                out.append(args if isinstance(args, str) else json.dumps(args))
        return out
