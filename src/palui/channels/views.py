"""What a chat channel shows the person, as plain text (spec §8.3): approvals, answers, outcomes.

Every text from a model, a server or a sender goes through :mod:`palui.text.display` first
(hidden characters escaped and marked, spec §4.7); a channel then applies its own format
(Telegram HTML-escapes it, Matrix sends the plain body). Pure: no I/O, the clock is passed in.

- :func:`approval_view`: the approval message — tool, class and its source, the reason, the
  exact arguments (escaped, untrusted values marked), the expiry in the person's zone and
  relative ("expires 08:30, in 29 min") — and the argument messages that go first when the
  arguments do not fit (numbered, nothing cut).
- :func:`fingerprint` of what was shown: the first 16 hex of SHA-256 over (approval id, args
  hash, expires_at); Telegram's ``callback_data`` is ``ap:<id>:<fp16>:<y|n|a|s>`` (≤ 64 bytes): approve,
  deny, always (approve, and from now on the same), deny and stop.
- :func:`answer_text`: a turn's answer with one line per tool call; :func:`outcome_text`: how an
  approval ended, for the edit of its message ("approved in the terminal", "expired — denied").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from palui.channels.text import split_message
from palui.text.display import shown, shown_json
from palui.text.prompts import mark_line

if TYPE_CHECKING:
    from palui.results import Approval, TurnEvent, TurnResult

CALLBACK = re.compile(r"^ap:([A-Za-z0-9_-]{1,40}):([0-9a-f]{16}):([ynas])$")
#: A button's answer letter: approve, deny, always (approve, and from now on the same: every argument pinned, spec
#: §5.9), deny and stop (spec §5.10).
KINDS = {"y": "approve", "n": "deny", "a": "always", "s": "denystop"}
LETTERS = {v: k for k, v in KINDS.items()}
#: The labels of an approval's buttons, in order (a platform shows the first two on one row where it has rows).
BUTTONS = (("approve", "Approve"), ("deny", "Deny"), ("always", "Always"), ("denystop", "Deny and stop"))
VIA_WORDS = {"cli": "in the terminal", "web": "on the web page", "api": "through the API"}


def fingerprint(a: Approval) -> str:
    """16 hex digits naming exactly what an approval message showed (id, arguments, expiry)."""
    raw = "\0".join((a["id"], a["args_hash"], a["expires_at"]))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def callback_data(a: Approval, approve: bool | str) -> str:
    """``ap:<id>:<fp16>:<y|n|a|s>`` (Telegram allows 1-64 bytes; with a 34-character approval id it is 56)."""
    return button_data(a["id"], fingerprint(a), approve)


def button_data(approval_id: str, fp: str, approve: bool | str) -> str:
    """:func:`callback_data` of the approval ``approval_id`` as shown with the fingerprint ``fp``; ``approve`` True,
    False, or a kind of :data:`KINDS` (``always``, ``denystop``)."""
    kind = approve if isinstance(approve, str) else "approve" if approve else "deny"
    return f"ap:{approval_id}:{fp}:{LETTERS[kind]}"


def parse_callback(data: str) -> tuple[str, str, str] | None:
    """``(approval id, fingerprint, kind)`` of a button's data (kind: ``approve``, ``deny``, ``always``,
    ``denystop``), None when it is not ours."""
    m = CALLBACK.match(data or "")
    return (m.group(1), m.group(2), KINDS[m.group(3)]) if m else None


def expiry_text(expires_at: str, now: datetime, zone: tzinfo | None) -> str:
    """``expires 08:30, in 29 min`` (the person's zone; the date too when it is not today;
    ``in 2 h 5 min`` past an hour; ``expired`` once past)."""
    when = datetime.fromisoformat(expires_at).astimezone(zone)
    here = now.astimezone(zone)
    left = (when - here).total_seconds()
    if left <= 0:
        return f"expired at {when.strftime('%H:%M')}"
    minutes = max(1, round(left / 60))
    rel = f"in {minutes} min" if minutes < 60 else f"in {minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60
                                                                                  else "")
    day = "" if when.date() == here.date() else when.strftime("%a %d %b ")
    return f"expires {day}{when.strftime('%H:%M')}, {rel}"


@dataclass
class ApprovalView:
    """An approval as messages: ``before`` (argument parts, numbered), then ``text`` (the message
    that carries the buttons and names them)."""

    approval_id: str
    fingerprint: str
    text: str
    before: list[str] = field(default_factory=list)


def approval_view(a: Approval, *, now: datetime, zone: tzinfo | None, limit: int,
                  measure: Callable[[str], int] = len, how_to_answer: str) -> ApprovalView:
    """The approval ``a`` (the ``palui approvals list --json`` shape) as a channel shows it.

    ``limit`` is the platform's message size in ``measure`` units; ``how_to_answer`` the
    channel's last line (buttons, reactions). Arguments too long for one message go first as
    numbered messages; the button message then says where they are.
    """
    head = [f"Approval {a['id']}: {shown(a['tool'], one_line=True)} wants to run",
            f"class: {a['class']} ({a['class_source']})",
            f"why: {shown(a['reason'], one_line=True)}"]
    args = shown_json(a["args"], indent=2)
    marks = [mark_line(m) for m in a.get("untrusted_args") or []]
    tail = [expiry_text(a["expires_at"], now, zone), how_to_answer]
    whole = "\n".join([*head, "arguments:", args, *marks, *tail])
    fp = fingerprint(a)
    if measure(whole) <= limit:
        return ApprovalView(a["id"], fp, whole)
    label = f"Arguments of approval {a['id']} (part {{n}} of {{total}}):\n"
    room = limit - measure(label.format(n=99, total=99))
    parts = split_message(args, room, measure)
    before = [label.format(n=i, total=len(parts)) + p for i, p in enumerate(parts, 1)]
    note = (f"arguments: in the {len(parts)} numbered messages above ({len(args)} characters), exactly as the "
            "call would send them")
    text = "\n".join([*head, note, *marks, *tail])
    if measure(text) > limit:  # very many marks: they go first too, nothing is cut
        before += [f"Marks of approval {a['id']}:\n" + p for p in split_message("\n".join(marks), room, measure)]
        text = "\n".join([*head, note, f"untrusted values: {len(marks)} marked in the messages above", *tail])
    return ApprovalView(a["id"], fp, text, before)


def outcome_text(a: Approval, channel: str, titles: dict[str, str]) -> str:
    """How an approval ended, for the edit of its message: ``Approval a-1 (tool): approved in the
    terminal.`` / ``expired — denied`` / ``cancelled: <reason>``."""
    via = a.get("answered_via") or ""
    where = "here" if via == channel else VIA_WORDS.get(via) or (f"in {titles.get(via, via)}" if via else "")
    status = a["status"]
    if status == "expired":
        what = "expired — denied"
    elif status == "cancelled":
        what = f"cancelled: {shown(a.get('cancel_reason') or 'cancelled', one_line=True)}"
    elif status in ("approved", "denied"):
        what = f"{status} {where}".strip()
        if status == "denied" and a.get("deny_reason"):
            what += f" ({shown(a['deny_reason'], one_line=True)})"
    else:
        what = status
    return f"Approval {a['id']} ({shown(a['tool'], one_line=True)}): {what}."


def tool_line(e: TurnEvent) -> str | None:
    """One line for a tool-call event of a finished turn: ``· recall__add_memory: run → ok``,
    ``· recall__forget_memory: ask → approved → ok`` / ``ask → denied`` / ``ask → approved → interrupted, may
    have run`` (a crash cut it: never sent twice, spec §5.4) (tainted turns say so)."""
    if e["type"] != "tool_call":
        return None  # "approval" events: the approval message itself showed it
    verdict = str(e.get("verdict", ""))
    if e.get("denied"):
        outcome = "denied"
    else:
        outcome = "error" if e.get("is_error") else "ok"
        if e.get("cancelled"):  # in flight when the process ended, or when the turn was stopped
            cut = "interrupted" if "interrupted" in str(e.get("reason", "")) else "stopped"
            outcome = f"{cut}, may have run"
        if verdict == "ask":  # answered by the person, or in advance by a standing approval (spec §5.9)
            by_rule = "approved in advance by rule" in str(e.get("reason", ""))
            outcome = f"{'approved in advance' if by_rule else 'approved'} → {outcome}"
    return f"· {shown(str(e.get('tool')), one_line=True)}: {verdict} → {outcome}" + (
        " (tainted)" if e.get("tainted") else "")


def answer_text(r: TurnResult) -> str:
    """A finished turn (:meth:`TurnsPart.result`) as the channel's reply: the tool lines, then the
    answer (or what stopped it)."""
    lines = [x for x in (tool_line(e) for e in r.get("events") or []) if x]
    if r["status"] == "error":
        body = f"The turn failed: {shown(r.get('error') or 'unknown error')}"
    elif r["status"] == "stopped":
        body = "Stopped."
    else:
        body = shown(r.get("answer") or "") or "(no answer)"
        if r.get("budget"):
            body += f"\n[stopped: {shown(r['budget'], one_line=True)}]"
    return "\n".join([*lines, body]) if lines else body


def notice_text(kind: str, text: str) -> str:
    """A notice for the person (job result, webhook summary, pause, review flag, a message), escaped."""
    return shown(text)
