"""The Rule of Two at call time (spec §4.5): the facts for :func:`palui.policy.rule_of_two.rule_of_two`.

:class:`RuleOfTwo` is held by the call decider (:mod:`palui.runner.call_decider`). Only a call the matrix
lets ``run`` is looked at, and only in a tainted turn and for a tool that reaches outside: then the
conversation's untrusted content (the ``untrusted_content`` table, and whether retention pruned some
of it), the person's own messages (the inputs of its chat and job turns), the arguments of its
earlier outside calls that ran, and the private-store results the model saw (this turn's messages
and the earlier turns' history the model is sent: ``recall``, ``tasks`` and connectors the person
marked private; for a gateway client, which has no messages, the results its calls returned in any of
its sessions) are handed to the pure rule. A reason turns the verdict into ``ask``; the approval
that follows is an ordinary one (re-decided by the matrix, which still says ``run``, so an approved
call is never refused for it). The earlier turns' messages are the runner's
(:class:`~palui.runner.state.EarlierTurns`): the check asks for them, read once per run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from palui.policy.rule_of_two import OutsideFacts, rule_of_two
from palui.runner.pending import CallState, PendingCall
from palui.store import catalog
from palui.types import Decision, Verdict

if TYPE_CHECKING:
    from palui.runner.state import EarlierTurns, Turn
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


class RuleOfTwo:
    """The Rule of Two check at call time.

    Args:
        db: the conversation's untrusted content, own messages, private connectors and the catalog.
        earlier: the earlier turns' messages the model is sent (shared with the runner, which owns them).
        unknown_context: a gateway session's (spec §8.6): why the caller's context is unseen; every
            address not reached earlier by the client then asks, and the client's calls are read from the
            events of its sessions' turns (they have no model messages).
    """

    def __init__(self, db: Database, earlier: EarlierTurns, unknown_context: str | None = None) -> None:
        self._db = db
        self._earlier = earlier
        self._unknown_context = unknown_context

    def check(self, t: Turn, call: PendingCall, row: ToolRow, d: Decision) -> Decision:
        """``d``, or an ``ask`` with the Rule of Two's reason when it holds for this call."""
        if d.verdict is not Verdict.RUN or not t.tainted or not row.reaches_outside:
            return d
        why = rule_of_two(row.name, call["args"], self._outside_facts(t))
        return Decision(Verdict.ASK, f"ask: {why}", "rule of two") if why else d

    def _outside_facts(self, t: Turn) -> OutsideFacts:
        db = self._db
        untrusted = [(r["source"], r["text"]) for r in db.all(
            "SELECT source, text FROM untrusted_content WHERE conversation_id = ? ORDER BY id", (t.conversation_id,))]
        own = [r["input"] for r in db.all(
            "SELECT input FROM turns WHERE conversation_id = ? AND origin IN ('chat', 'job')", (t.conversation_id,))]
        private = set(PRIVATE_BUILTINS) | {r["id"] for r in db.all("SELECT id FROM connectors WHERE private = 1")}
        earlier = self._earlier.messages(t)
        seen = private_results(earlier, private, "earlier in this conversation")
        seen += private_results(t.messages, private)
        client = self._client_calls(t) if self._unknown_context is not None else []
        # a gateway client has no messages: the private results it was sent are its calls' results (spec §8.6)
        seen += [(f"{e['tool']} sent to this client", str(e.get("result", ""))) for e in client
                 if str(e["tool"]).split("__", 1)[0] in private]
        pruned = db.one("SELECT untrusted_pruned_at FROM conversations WHERE id = ?", (t.conversation_id,))
        return OutsideFacts(untrusted=untrusted, own=own, private=seen, private_connectors=frozenset(private),
                            reached=self._reached(t, earlier, client), pruned=bool(pruned and pruned[0] is not None),
                            unknown_context=self._unknown_context)

    def _client_calls(self, t: Turn) -> list[dict[str, Any]]:
        """A gateway client's calls that ran (not errors), every session's: the ``tool_call`` events of its
        sessions' turns, this one's included."""
        events: list[dict[str, Any]] = [dict(e) for e in t.events]
        for (raw,) in self._db.all(
                "SELECT e.event FROM turn_events e JOIN turns s ON s.id = e.turn_id WHERE s.conversation_id = ? AND"
                " s.id != ? AND json_extract(e.event, '$.type') = 'tool_call'", (t.conversation_id, t.id)):
            events.append(json.loads(raw))
        return [e for e in events if e["type"] == "tool_call" and not e.get("is_error") and "args" in e]

    def _reached(self, t: Turn, earlier: list[ModelMessage], client: list[dict[str, Any]]) -> list[str]:
        """The arguments of this conversation's earlier calls to tools that reach outside and ran: in the
        history the model is sent (``earlier``), this turn's messages, and the calls of this response done
        so far.

        A result answers a call of the model response just before it: call ids are matched within that
        pair only, since ids repeat across turns (``s1c1`` of the script: model, a local model's
        ``call_0``), and an earlier turn's result must never vouch for this turn's call."""
        asked: dict[str, tuple[str, Any]] = {}  # the latest response's calls not answered yet, by id
        ran: list[tuple[str, Any]] = []
        for m in [*earlier, *t.messages]:
            if isinstance(m, ModelResponse):
                asked = {p.tool_call_id: (p.tool_name, p.args) for p in m.parts if isinstance(p, ToolCallPart)}
                continue
            for p in m.parts:
                if isinstance(p, ToolReturnPart) and p.tool_call_id in asked:
                    tool_args = asked.pop(p.tool_call_id)
                    if p.outcome == "success":
                        ran.append(tool_args)
        for c in t.pending or []:
            if c.get("state") == CallState.DONE and not c.get("is_error") and c["id"] in asked:
                ran.append(asked.pop(c["id"]))
        ran += [(e["tool"], e["args"]) for e in client]  # a gateway client's calls that ran (its sessions' events)
        snap = catalog.snapshot(self._db)
        out = []
        for tool, args in ran:
            row = snap.tools.get(tool)
            if row is not None and row.reaches_outside:
                out.append(args if isinstance(args, str) else json.dumps(args, allow_nan=False))
        return out
