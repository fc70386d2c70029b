"""How a turn shows in ``palui chat`` as it happens (spec §8.2): streamed text piece by piece, one
compact line per tool call in the order the calls happened, the status line, and what ``/why``
shows afterwards (each call with its reason).

Every text from a model, a server or a sender goes through :mod:`palui.text.display` (streamed
pieces through :class:`~palui.text.display.StreamShown`, so the whitespace-run rule applies when
the text is complete).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import tzinfo
from typing import TYPE_CHECKING

from palui.cli import render
from palui.cli.chat.screen import Screen
from palui.text.display import StreamShown, shown
from palui.text.when import expiry

if TYPE_CHECKING:
    from palui.results import ElicitationEvent, StreamEvent, ToolCallEvent, TurnApproval, TurnEvent, TurnResult

VIA_WORDS = {"cli": "the command line", "web": "the web page", "api": "the JSON API"}


def via_words(via: str | None) -> str:
    """Where an answer was given, in words: ``the web page (web)``, ``telegram``."""
    if not via:
        return "another channel"
    return f"{VIA_WORDS[via]} ({via})" if via in VIA_WORDS else via


class View:
    """Turns events into screen output. One view per chat; events are bound to their turn with
    :meth:`sink`."""

    def __init__(self, screen: Screen, tz: tzinfo | None) -> None:
        self.screen = screen
        self.tz = tz
        self.after: dict[str, int] = {}  # turn id -> the next event index not yet shown
        self.calls: list[ToolCallEvent] = []  # the tool calls of the latest turn that made any
        self._calls_turn: str | None = None
        self.stream: StreamShown | None = None
        self.last_text: dict[str, str] = {}  # turn id -> the last text shown in full (streamed or not)
        self.label: str | None = None
        self.on_question: Callable[[ElicitationEvent], None] | None = None  # a pending server question (spec §7.8)

    # -- events ---------------------------------------------------------------------------------

    def sink(self, turn_id: str | None) -> Callable[[StreamEvent], None]:
        """The event handler for one turn (``turn_id`` None: learnt from the stream's ``turn`` event)."""
        holder = {"turn": turn_id}

        def on_event(e: StreamEvent) -> None:
            if e["type"] == "turn":
                holder["turn"] = e.get("turn")
                return
            self.event(holder["turn"], e)

        return on_event

    def event(self, turn_id: str | None, e: TurnEvent) -> None:
        if turn_id and "seq" in e:
            if e["seq"] < self.after.get(turn_id, 0):
                return  # shown already (a follow that started before it)
            self.after[turn_id] = e["seq"] + 1
        if e["type"] == "text_delta":
            if self.stream is None:
                self.stream = StreamShown()
                self._status("writing")
            self.screen.stream(self.stream.feed(e["text"]))
            return
        if e["type"] == "text_discarded":
            self._end_stream(" [discarded (retrying)]")
            return
        if e["type"] == "text":
            if self.stream is None:
                self.screen.line(shown(e["text"]))
            self._end_stream()
            if turn_id:
                self.last_text[turn_id] = e["text"]
            return
        if e["type"] == "step":
            self._status(f"thinking · step {e.get('step')}")
            return
        if e["type"] == "tool_start":
            self._end_stream()
            self._status(f"calling {shown(e.get('tool'), one_line=True)}")
            return
        if e["type"] == "retry":
            self._end_stream()
            wait = float(e.get("in_seconds") or 0)
            self.screen.set_status(f"retrying the provider in {{left}} s ({shown(e.get('reason'), one_line=True)})",
                                   countdown_to=time.time() + wait)
        if e["type"] == "tool_call":
            if turn_id != self._calls_turn:
                self.calls, self._calls_turn = [], turn_id
            self.calls.append(e)
            self._status("thinking")
        if e["type"] == "approval":
            self._end_stream()
            self.screen.set_status(f"waiting for approval {e['approval']}")
            now = time.time()
            exp = expiry(e["expires_at"], now, self.tz) if e.get("expires_at") else None
            for line in render.event_lines(e, expires=exp):
                self.screen.line(line)
            return
        if e["type"] == "elicitation" and e.get("status") == "pending":
            if self.on_question is not None:
                self.on_question(e)
            return
        if e["type"] == "end":
            self._end_stream()
            self.screen.set_status(None)
            return
        lines = render.event_lines(e)
        if lines:
            self._end_stream()
        for line in lines:
            self.screen.line(line)

    def _status(self, text: str) -> None:
        self.screen.set_status(text)

    def _end_stream(self, mark: str = "") -> None:
        if self.stream is not None:
            rest = self.stream.end()
            if rest:
                self.screen.stream(rest)
            self.screen.end_stream(mark)
            self.stream = None
        elif mark:
            self.screen.end_stream(mark)

    # -- results and states ------------------------------------------------------------------------

    def outcome(self, r: TurnResult, label: str | None = None) -> None:
        """How a turn ended, under its streamed answer (the answer itself only if it was not shown)."""
        self._end_stream()
        self.screen.set_status(None)
        shown_already = bool(r.get("answer")) and self.last_text.get(r["turn"]) == r["answer"]
        lines = render.outcome_lines(r, answer_shown=shown_already, in_chat=True)
        if label and lines and not shown_already and r.get("answer"):
            lines[0] = f"{label} {lines[0]}"
        for line in lines:
            self.screen.line(line)

    def idle(self) -> None:
        self._end_stream()
        self.screen.set_status(None)

    def waiting(self, a: TurnApproval) -> None:
        """The status line while an approval is asked."""
        self.screen.set_status(f"waiting for approval {a['id']} · {expiry(a['expires_at'], time.time(), self.tz)}")

    def why_lines(self) -> list[str]:
        """``/why``: each tool call of the latest turn with its decision's reason (reasons on demand:
        docs/decisions/0118-compact-tool-lines.md)."""
        if not self.calls:
            return ["no tool calls yet in this chat"]
        out = [f"tool calls of turn {self._calls_turn}:"]
        for i, e in enumerate(self.calls, 1):
            mark, words = render.call_outcome(e)
            out.append(f"  {i}. {mark} {render.short(e['tool'], 200)} → {words}")
            out.append(f"     why: {render.short(e.get('reason', ''), 400)}")
        return out
