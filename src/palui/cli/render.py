"""How turn events, approvals and results look in the terminal (used by ``run``, ``approvals`` and ``chat``).

Text from a model, a server or a sender is shown through :mod:`palui.text.display`: hidden
characters escaped and marked (spec §4.7). Tool lines are compact
(docs/decisions/0118-compact-tool-lines.md): one line per call, in the order the calls happened, with its
outcome; the reason of a call that ran is shown on demand (``/why`` in the chat), the reason of a call
that did not run is its outcome.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

import click

from palui.text.display import NOTE, StreamShown, hidden_in, shown, shown_json
from palui.text.prompts import approval_prompt

if TYPE_CHECKING:
    from palui.results import ToolCallEvent, ToolsLeftOutEvent, TurnEvent, TurnResult

ARGS_CHARS = 100
RESULT_CHARS = 100
ERROR_CHARS = 300


def short(value: Any, n: int = 160) -> str:
    """One line of at most about ``n`` characters: hidden characters escaped (and marked), runs of
    whitespace collapsed; cut with "…" (before escaping, so an escape is never cut in half) at a
    space where one is near, so a hint's key or command is never cut in half
    (docs/decisions/0122-messages-reworded.md)."""
    note = NOTE if hidden_in(value) else ""
    if isinstance(value, str):
        return shown(cut_words(value, n), one_line=True, note=False) + note
    # A structured value in the escapes of shown_json, as the approval prompt shows it: JSON's own
    # escapes (ESC as \u001b, then its backslash doubled) would be a second form of the same character
    # on the same screen (spec §4.7). Cut after escaping, so a cut escape is dropped whole.
    return _whole_escapes(cut_words(shown_json(value, note=False), n)) + note


_CUT_ESCAPE = re.compile(r"(\\+)([uU][0-9a-f]*)?(…?)$")


def _whole_escapes(s: str) -> str:
    """``s`` (escaped text, maybe cut with "…") without an escape cut in half at its end."""
    m = _CUT_ESCAPE.search(s)
    if not m or not m.group(3) or len(m.group(1)) % 2 == 0:
        return s  # not cut, or every backslash there is a doubled literal one
    code = m.group(2) or ""
    if (code[:1] == "u" and len(code) == 5) or (code[:1] == "U" and len(code) == 9):
        return s
    return s[: m.start(1) + len(m.group(1)) - 1] + "…"


def cut_words(s: str, n: int) -> str:
    """``s`` with runs of spaces collapsed, cut to at most ``n`` characters with "…": at the last space
    before the limit when that keeps at least half of it, else at the limit."""
    s = " ".join(s.split(" "))
    if len(s) <= n:
        return s
    head = s[: n - 1]
    space = head.rfind(" ")
    return (head[:space] if space >= n // 2 else head) + "…"


def exact(value: Any, n: int) -> str:
    """``value`` as escaped JSON, whitespace kept, cut after ``n`` characters with a pointer to the rest."""
    s = shown_json(value, note=False)
    note = NOTE if hidden_in(value) else ""
    return (s if len(s) <= n else s[:n] + f"… ({len(s) - n} more characters: palui approvals show ID)") + note


def call_outcome(e: ToolCallEvent) -> tuple[str, str]:
    """(mark, outcome words) of a ``tool_call`` event: ``("✓", "ok")``, ``("✗", "error: …")``,
    ``("⊘", "not run: left out by budgets.tools (30): …")``, ``("✗", "denied")``…"""
    verdict, result = e.get("verdict"), e.get("result") or ""
    if e.get("denied"):
        return "✗", "denied" + (f": {short(result, ERROR_CHARS)}" if result.startswith("The person denied") and
                                 result != "The person denied this action." else "")
    if e.get("cancelled"):
        return "⊘", "stopped while it ran; it may have run"
    if e.get("not_dispatched"):
        return "⊘", f"not run: {short(e.get('reason', ''), ERROR_CHARS)}"
    if verdict in ("off", "unavailable") or result.startswith("Error: the call was not run"):
        return "⊘", f"not run: {short(e.get('reason', ''), ERROR_CHARS)}"
    head = "" if verdict != "ask" else "approved in advance · " if "approved in advance by rule" in str(
        e.get("reason", "")) else "approved · "  # a standing approval answered it (spec §5.9)
    if e.get("is_error"):
        return "✗", f"{head}error: {short(result.removeprefix('Error: '), ERROR_CHARS)}"
    return "✓", f"{head}ok" + (f": {short(result, RESULT_CHARS)}" if result else "")


def call_line(e: ToolCallEvent) -> str:
    """One compact line for a ``tool_call`` event (docs/decisions/0118-compact-tool-lines.md)."""
    mark, words = call_outcome(e)
    return f"  {mark} {short(e['tool'], 200)} {short(e.get('args', {}), ARGS_CHARS)} → {words}"


def left_out_line(e: ToolsLeftOutEvent, limit: int = 5) -> str:
    """A ``tools_left_out`` event on one line: the reason and the first few names."""
    names = [str(n) for n in e.get("tools") or []]
    more = f" +{len(names) - limit} more" if len(names) > limit else ""
    return (f"  · {len(names)} tool(s) {shown(e.get('reason') or 'left out by budgets.tools', one_line=True)}: "
            f"{shown(', '.join(names[:limit]), one_line=True)}{more}")


def event_lines(e: TurnEvent, *, expires: str | None = None) -> list[str]:
    """The lines one stored turn event prints as it happens (streamed text pieces are not events here)."""
    if e["type"] == "tool_call":
        return [call_line(e)]
    if e["type"] == "tainted":
        return [f"  ⚠ this conversation is now tainted by {short(e['source'], 300)}: writes ask first"]
    if e["type"] == "approval":
        return approval_prompt({"id": e["approval"], "tool": e["tool"], "class": e.get("class", "?"),
                                "reason": e["reason"], "args": e["args"],
                                "untrusted_args": e.get("untrusted_args", []),
                                "expires_at": e.get("expires_at", "")}, expires=expires).split("\n")
    if e["type"] == "elicitation" and e.get("status") != "pending":
        return [f"  ⊘ {shown(e['connector'], one_line=True)} asked «{short(e.get('message', ''), 200)}»: declined by"
                f" Palui ({short(e.get('reason') or '', 300)})"]
    if e["type"] == "elicitation_answer":
        return [f"  · question {e['elicitation']}: {e['action']}"
                + (f" (fields: {shown(', '.join(e['fields']), one_line=True)})" if e.get("fields") else "")]
    if e["type"] == "connector_error":
        return [f"  ⚠ connector {e['connector']} is not available: {short(e['error'], 300)}"]
    if e["type"] == "tools_left_out":
        return [left_out_line(e)]
    if e["type"] == "retry":
        return [f"  … retrying the provider in {e.get('in_seconds', 0)} s ({shown(e.get('reason'), one_line=True)})"]
    if e["type"] == "paused":
        return [f"  [paused: {shown(e.get('reason'), one_line=True)}; the turn goes on at the next start]"]
    if e["type"] == "last_step":
        return [f"  · tool use ended ({shown(e['reason'], one_line=True)}): the model answers without tools"]
    return []


def outcome_lines(r: TurnResult, *, answer_shown: bool = False, in_chat: bool = False) -> list[str]:
    """A turn's result: the answer (unless it was streamed already) and how it ended."""
    out: list[str] = []
    if r.get("answer") and not answer_shown:
        out.append(shown(r["answer"]))
    left = [e for e in r.get("events") or [] if e["type"] == "tools_left_out" and e.get("tools")]
    if left:
        out.append(f"[{len(left[-1]['tools'])} tool(s) {shown(left[-1].get('reason'), one_line=True)}"
                   + ("; /why lists them]" if in_chat else "]"))
    status = r["status"]
    if status == "awaiting_approval" and not in_chat:
        ids = ", ".join(a["id"] for a in r.get("pending_approvals", []))
        if ids:
            out.append(f"[waiting for your approval: {ids}; answer with palui approvals approve|deny ID]")
        qs = ", ".join(q["id"] for q in r.get("pending_elicitations", []))
        if qs:
            out.append(f"[waiting for your answer to {qs}; answer with palui elicitations answer ID FIELD=VALUE…]")
    elif status == "budget":
        out.append(f"[turn ended: {shown(r.get('budget'), one_line=True)}]")
    elif status == "error":
        out.append(f"[turn failed: {shown(r.get('error'), one_line=True)}]")
    elif status == "stopped":
        out.append("[turn stopped]")
    elif status == "queued" and r.get("queued_behind"):
        out.append(f"[{r['queued_reason']}]")
    elif status == "queued":
        when = f"; it can start after {r['start_after']}" if r.get("start_after") else ""
        out.append(f"[queued: the {r.get('queued_reason') or 'a cap'} is reached{when}]")
    return out


class Printer:
    """Prints a turn as it happens for ``palui run`` and ``palui approvals approve|deny``: streamed text
    piece by piece, compact tool lines, then the result (:meth:`outcome`)."""

    shows_text = True  # the turn's model requests are streamed for it (palui.types.wants_text)

    def __init__(self, err: bool = False, header: str | None = None, tz: tzinfo | None = None) -> None:
        self.err = err
        self.tz = tz  # caps.timezone for approval expiries (None: the machine's zone)
        self.header = header  # printed once, before the first event or the outcome
        self.stream: StreamShown | None = None

    def _head(self) -> None:
        if self.header is not None:
            click.echo(self.header, err=self.err)
            self.header = None

    def _end_stream(self, mark: str = "") -> None:
        if self.stream is not None:
            click.echo(self.stream.end() + mark, err=self.err)
            self.stream = None

    def __call__(self, e: TurnEvent) -> None:
        self._head()
        if e["type"] == "text_delta":
            if self.stream is None:
                self.stream = StreamShown()
            click.echo(self.stream.feed(e["text"]), nl=False, err=self.err)
            return
        if e["type"] == "text_discarded":
            self._end_stream(" [discarded (retrying)]")
            return
        if e["type"] == "text":
            if self.stream is None:  # not streamed (another process ran it): the whole text now
                click.echo(shown(e["text"]), err=self.err)
            self._end_stream()
            return
        expires = None
        if e["type"] == "approval" and e.get("expires_at"):  # in the person's words, as the chat says it
            import time

            from palui.text.when import expiry

            expires = expiry(e["expires_at"], time.time(), self.tz)
        lines = event_lines(e, expires=expires)
        if lines:
            self._end_stream()
        for line in lines:
            click.echo(line, err=self.err)

    def outcome(self, r: TurnResult) -> None:
        self._head()
        self._end_stream()
        for line in outcome_lines(r, answer_shown=True):
            click.echo(line, err=r["status"] == "error")


def outcome(r: TurnResult, in_chat: bool = False) -> None:
    """Print a turn's result (the answer and how it ended) when no events were printed."""
    for line in outcome_lines(r, in_chat=in_chat):
        click.echo(line, err=r["status"] == "error")
