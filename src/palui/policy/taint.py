"""Marking approval arguments that appeared in untrusted content (SPEC §4). Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MIN_LEN = 4
MIN_TOKEN = 8  # a word inside a longer value is marked from this length on (IBANs, e-mails, URLs)
_WS = re.compile(r"\s+")
_EDGE = "\"'()[]{}<>.,;:!?"


def normalize(text: str) -> str:
    """Case-folded, whitespace collapsed (SPEC §4)."""
    return _WS.sub(" ", text.casefold()).strip()


def string_values(args: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string value in ``args`` with its JSON path (``"to"``, ``"items[0].iban"``)."""
    out: list[tuple[str, str]] = []
    if isinstance(args, str):
        out.append((path or "$", args))
    elif isinstance(args, dict):
        for k, v in args.items():
            out.extend(string_values(v, f"{path}.{k}" if path else str(k)))
    elif isinstance(args, list):
        for i, v in enumerate(args):
            out.extend(string_values(v, f"{path}[{i}]"))
    return out


def untrusted_args(args: Any, untrusted: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    """Argument values of 4+ characters that also appear in untrusted content.

    Args:
        args: the call's arguments (JSON-like).
        untrusted: pairs of (source, text) of untrusted content in the conversation,
            e.g. ``("web__fetch_page at step 2", "<page text>")``.

    Returns:
        ``[{"path", "value", "match", "source"}]``, one per marked value (first source that
        has it). ``match`` is the part found: the whole value (SPEC §4), or else a word of
        ``MIN_TOKEN``+ characters inside it — so "Pay to IBAN DE89…" is marked when the
        page had the IBAN (a hijacked argument is rarely the page's text verbatim).
    """
    sources = [(src, normalize(text)) for src, text in untrusted]
    marks: list[dict[str, str]] = []
    for path, value in string_values(args):
        needle = normalize(value)
        if len(needle) < MIN_LEN:
            continue
        hit = next(((src, needle) for src, hay in sources if needle in hay), None)
        if hit is None:
            words = {w.strip(_EDGE) for w in needle.split(" ")}
            for word in sorted((w for w in words if len(w) >= MIN_TOKEN), key=len, reverse=True):
                hit = next(((src, word) for src, hay in sources if word in hay), None)
                if hit:
                    break
        if hit:
            marks.append({"path": path, "value": value, "match": hit[1], "source": hit[0]})
    return marks
