"""The calls the loop rules count (spec §6.3, §8.6): a turn's, or a gateway client's until the person clears it.

The loop rules (:class:`~palui.runner.loop_guard.LoopGuard`) ask a :class:`CallHistory` three things: how many
times this call was made (the repeat rule), the answered calls in order (the error streak, the person's
denials), and the loop stop once a rule ended the tool use. Two histories answer:

- :class:`TurnHistory` — a turn's own messages (its model responses' calls and the results that answered
  them) and the done calls of the response being answered; its stop lasts the run (the turn ends after its
  last step). Nothing to record: the messages are the record.
- :class:`ClientHistory` — a gateway client's calls, one row each in ``gateway_calls`` of its conversation
  (every session of the client writes there), and its stop in ``gateway_clients.loop_stop``: kept until
  ``palui gateway clients clear NAME`` gives the client a new conversation. An identical retry that waits on
  or consumes its approval is recorded as a retry and never counts as a repeat.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from palui.runner.pending import CallState, PendingCall, args_hash, outcome

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart

    from palui.runner.state import Turn
    from palui.store.db import Database

#: An answered call: its tool call id, its tool and its outcome (:func:`palui.runner.pending.outcome`).
Answered = tuple[str, str, str]
#: The most of a client's latest calls the error streak reads (``budgets.error_streak`` is at most 1,000, and
#: the person's denials among them are skipped).
CLIENT_WINDOW = 5_000


def by_value(value: Any) -> Any:
    """``value`` with every JSON number that is a whole float made an int, so ``5`` and ``5.0`` (the same
    JSON number, RFC 8259 §6) compare equal; booleans stay booleans (``true`` is not ``1``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: by_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [by_value(v) for v in value]
    return value


def call_key(tool: str, args: Any) -> str:
    """What makes two calls "the same call": the tool and the hash of its canonical arguments, numbers
    compared by value (:func:`by_value`)."""
    try:
        return f"{tool}\0{args_hash(by_value(args))}"
    except RecursionError:  # arguments nested past the interpreter's depth: keyed by their hash alone
        return f"{tool}\0{args_hash(args)}"


def _part_key(p: ToolCallPart) -> str:
    try:
        return call_key(p.tool_name, p.args_as_dict(raise_if_invalid=True))
    except (ValueError, TypeError, AssertionError, RecursionError):
        return f"{p.tool_name}\0raw:{p.args!r}"


class CallHistory(Protocol):
    """What the loop rules read, and where their stop is kept."""

    stop: str | None

    def occurrence(self, t: Turn, call: PendingCall) -> int:
        """How many times this call (tool and arguments) was made, this one included."""

    def answered(self, t: Turn, last: int) -> list[Answered]:
        """The answered calls, oldest first: at least the ``last`` ones (a turn gives all of its own)."""

    def denied(self, t: Turn, ids: set[str]) -> int:
        """How many of the answered calls the person denied (``ids``: the denied calls' ids)."""

    def record(self, t: Turn, call: PendingCall, retry: bool) -> None:
        """``call`` was answered: what the rules count from now on (``retry``: it waited on or consumed an
        approval asked for an identical call, so it is not a repeat)."""

    def results(self, t: Turn, call: PendingCall) -> list[Earlier]:
        """The results of the earlier calls identical to ``call`` (tool and arguments), oldest first."""


@dataclass(frozen=True)
class Earlier:
    """What an earlier identical call returned: its result text, whether it was an error, and the step that made it
    (spec §6.3: the repeat of a read whose results came back identical is answered from it)."""

    text: str
    is_error: bool
    step: int


class TurnHistory:
    """A turn's calls: its messages and the response being answered. The stop lasts this run."""

    def __init__(self) -> None:
        self.stop: str | None = None
        self._keys: dict[str, str] = {}  # tool call id -> call key, computed once per run

    def occurrence(self, t: Turn, call: PendingCall) -> int:
        from pydantic_ai.messages import ModelResponse, ToolCallPart

        seen: list[str] = []
        for m in t.messages:
            if not isinstance(m, ModelResponse):
                continue
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    key = self._keys.get(p.tool_call_id)
                    if key is None:
                        key = self._keys[p.tool_call_id] = _part_key(p)
                    seen.append(key)
                    if p.tool_call_id == call["id"]:
                        return seen.count(key)
        return seen.count(call_key(call["tool"], call["args"])) + 1

    def answered(self, t: Turn, last: int = 0) -> list[Answered]:
        from pydantic_ai.messages import ModelRequest, ToolReturnPart

        out: list[Answered] = [(p.tool_call_id, p.tool_name, p.outcome) for m in t.messages
                               if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
        out += [(c["id"], c["tool"], outcome(c)) for c in t.pending or [] if c.get("state") == CallState.DONE]
        return out

    def denied(self, t: Turn, ids: set[str]) -> int:
        return sum(1 for tid, _tool, _o in self.answered(t) if tid in ids)

    def record(self, t: Turn, call: PendingCall, retry: bool) -> None:
        """Nothing: the turn's messages hold its calls and results."""

    def results(self, t: Turn, call: PendingCall) -> list[Earlier]:
        """The results of this turn's earlier calls identical to ``call``: in its messages (a result answers a call
        of the response just before it, matched by id within that pair) and the done calls of this response."""
        from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

        key = call_key(call["tool"], call["args"])
        out: list[Earlier] = []
        asked: dict[str, int] = {}  # ids of the last response's identical calls -> their step
        step = 0
        for m in t.messages:
            if isinstance(m, ModelResponse):
                step += 1
                asked = {p.tool_call_id: step for p in m.parts if isinstance(p, ToolCallPart) and _part_key(p) == key}
            elif isinstance(m, ModelRequest):
                for p in m.parts:
                    if isinstance(p, ToolReturnPart) and p.tool_call_id in asked:
                        text = p.content if isinstance(p.content, str) else str(p.content)
                        out.append(Earlier(text, p.outcome != "success", asked.pop(p.tool_call_id)))
        for c in t.pending or []:
            if c is not call and c.get("state") == CallState.DONE and call_key(c["tool"], c["args"]) == key:
                out.append(Earlier(c.get("result", ""), bool(c.get("is_error")), step))
        return out


class ClientHistory:
    """A gateway client's calls since the person last cleared it (every session of the client).

    Args:
        db: ``gateway_calls`` and ``gateway_clients``.
        client: the client's name.
        conversation_id: the client's conversation (a clear starts a new one, and with it new counts).
    """

    def __init__(self, db: Database, client: str, conversation_id: str) -> None:
        self._db = db
        self._client = client
        self._conversation = conversation_id

    @property
    def stop(self) -> str | None:
        r = self._db.one("SELECT loop_stop FROM gateway_clients WHERE name = ?", (self._client,))
        return r["loop_stop"] if r is not None else None

    @stop.setter
    def stop(self, why: str | None) -> None:
        if why is None:
            return  # only the person clears a client's stop (palui gateway clients clear NAME)
        with self._db.write() as c:
            c.execute("UPDATE gateway_clients SET loop_stop = COALESCE(loop_stop, ?) WHERE name = ?",
                      (why, self._client))

    def occurrence(self, t: Turn, call: PendingCall) -> int:
        r = self._db.one("SELECT COUNT(*) FROM gateway_calls WHERE conversation_id = ? AND call_key = ? AND"
                         " retry = 0", (self._conversation, call_key(call["tool"], call["args"])))
        return int(r[0]) + 1 if r is not None else 1

    def answered(self, t: Turn, last: int = 0) -> list[Answered]:
        """The client's latest ``last`` answered calls (a row each, newest read first: the cost follows what the
        error streak reads, not the client's history)."""
        rows = self._db.all("SELECT tool_call_id, tool, outcome FROM gateway_calls WHERE conversation_id = ?"
                            " ORDER BY id DESC LIMIT ?", (self._conversation, max(1, min(last, CLIENT_WINDOW))))
        return [(r["tool_call_id"], r["tool"], r["outcome"]) for r in reversed(rows)]

    def denied(self, t: Turn, ids: set[str]) -> int:
        """Every call of the client the person denied is one of its answered calls: their number."""
        return len(ids)

    def results(self, t: Turn, call: PendingCall) -> list[Earlier]:
        """None kept: a gateway client's reads are not counted as repeats (spec §6.3, §8.6)."""
        return []

    def record(self, t: Turn, call: PendingCall, retry: bool) -> None:
        with self._db.write() as c:
            c.execute("INSERT INTO gateway_calls (conversation_id, tool_call_id, tool, call_key, outcome, retry, time)"
                      " VALUES (?,?,?,?,?,?,?)", (self._conversation, call["id"], call["tool"],
                                                  call_key(call["tool"], call["args"]), outcome(call), int(retry),
                                                  time.time()))
