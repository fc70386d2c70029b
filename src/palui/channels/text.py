"""Text rules the chat channels share: splitting at a platform's limit, Matrix replies and
reaction keys.

- Telegram's limit is 4,096 characters after entity parsing; counting UTF-16 code units (the
  unit of its entity offsets) is never more permissive than counting code points, so
  :func:`split_message` with :func:`utf16_len` is safe. Matrix: an event is at most 65,536 bytes
  of JSON; Palui keeps a body to 32 KiB of UTF-8 (:func:`utf8_len`).
- Matrix replies (``m.relates_to.m.in_reply_to``) may carry a *fallback*: the quoted original in
  the body (``> <@alice:example.org> original`` lines and a blank line) and an ``<mx-reply>``
  block in ``formatted_body``. The fallback is the other sender's words: strip it from the
  person's words and treat the replied-to event as quoted (untrusted unless the person wrote it).
  Fallbacks are deprecated since Matrix 1.13 (MSC2781), so a reply may come without one.
  A thread message (``rel_type: m.thread``) carries ``m.in_reply_to`` too, with
  ``is_falling_back: true`` when it is *not* a reply.
- Reaction keys: ``✅`` is U+2705 and may come with U+FE0F (emoji presentation) appended, as
  some keyboards and Element's picker send it; ``❌`` likewise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "ALWAYS",
    "APPROVE",
    "DENY",
    "DENY_STOP",
    "MATRIX_BODY_LIMIT",
    "TELEGRAM_TEXT_LIMIT",
    "is_edit",
    "normalize_reaction_key",
    "reaction_verdict",
    "reply_target",
    "split_message",
    "strip_reply_fallback",
    "strip_reply_fallback_html",
    "utf8_len",
    "utf16_len",
]

TELEGRAM_TEXT_LIMIT = 4096
MATRIX_BODY_LIMIT = 32 * 1024
APPROVE = "\u2705"  # ✅ WHITE HEAVY CHECK MARK
DENY = "\u274c"  # ❌ CROSS MARK
ALWAYS = "\U0001f501"  # 🔁 CLOCKWISE RIGHTWARDS AND LEFTWARDS OPEN CIRCLE ARROWS: approve, and from now on the same
DENY_STOP = "\U0001f6d1"  # 🛑 OCTAGONAL SIGN: deny and stop
_VARIATION_SELECTORS = dict.fromkeys(map(ord, "\ufe0e\ufe0f"))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def split_message(text: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    """Split ``text`` into parts of at most ``limit`` (as ``measure`` counts), on line boundaries;
    a single longer line is hard-split (never inside a surrogate pair or a code point). Joining
    the parts with nothing gives back ``text``: nothing is cut silently."""
    if limit < 2:
        raise ValueError("limit too small")
    parts: list[str] = []
    current = ""
    for line in text.splitlines(keepends=True):
        if measure(current + line) <= limit:
            current += line
            continue
        if current:
            parts.append(current)
            current = ""
        while measure(line) > limit:
            cut = _longest_prefix(line, limit, measure)
            parts.append(line[:cut])
            line = line[cut:]
        current = line
    if current or not parts:
        parts.append(current)
    return parts


def _longest_prefix(line: str, limit: int, measure: Callable[[str], int]) -> int:
    lo, hi = 1, len(line)
    while lo < hi:  # the largest n with measure(line[:n]) <= limit
        mid = (lo + hi + 1) // 2
        if measure(line[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def normalize_reaction_key(key: str) -> str:
    """The key without variation selectors (U+FE0E, U+FE0F) and surrounding spaces."""
    return key.translate(_VARIATION_SELECTORS).strip()


def reaction_verdict(key: str) -> str | None:
    """``"approve"`` for ✅, ``"deny"`` for ❌, ``"always"`` for 🔁 (approve, and from now on the same, every argument
    pinned: spec §5.9), ``"denystop"`` for 🛑 (deny and stop: spec §5.10), with or without U+FE0F; else None."""
    k = normalize_reaction_key(key)
    return {APPROVE: "approve", DENY: "deny", ALWAYS: "always", DENY_STOP: "denystop"}.get(k)


def reply_target(content: Mapping[str, Any]) -> str | None:
    """The event id a message replies to, or None (also for a thread's fallback reply)."""
    rel = content.get("m.relates_to")
    if not isinstance(rel, Mapping):
        return None
    if rel.get("rel_type") == "m.thread" and rel.get("is_falling_back") is True:
        return None
    in_reply_to = rel.get("m.in_reply_to")
    if isinstance(in_reply_to, Mapping) and isinstance(in_reply_to.get("event_id"), str):
        return str(in_reply_to["event_id"])
    return None


def is_edit(content: Mapping[str, Any]) -> bool:
    """An edit (``rel_type: m.replace``): its text is in ``m.new_content``."""
    rel = content.get("m.relates_to")
    return isinstance(rel, Mapping) and rel.get("rel_type") == "m.replace"


def strip_reply_fallback(body: str) -> str:
    """Remove the quoted fallback (leading ``>`` lines and the blank line after them)."""
    lines = body.split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith(">"):
        i += 1
    if i == 0:
        return body
    if i < len(lines) and lines[i] == "":
        i += 1
    return "\n".join(lines[i:])


_MX_REPLY_RE = re.compile(r"^\s*<mx-reply>.*?</mx-reply>", re.DOTALL | re.IGNORECASE)


def strip_reply_fallback_html(formatted_body: str) -> str:
    """Remove a leading ``<mx-reply>…</mx-reply>`` block."""
    return _MX_REPLY_RE.sub("", formatted_body, count=1)
