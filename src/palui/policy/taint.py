"""Marking approval arguments that appeared in untrusted content (SPEC §4). Pure."""

from __future__ import annotations

import re
from typing import Any, Iterable

MIN_LEN = 4
_WS = re.compile(r"\s+")


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
        ``[{"path", "value", "source"}]``, one per marked value (first source that has it).
    """
    sources = [(src, normalize(text)) for src, text in untrusted]
    marks: list[dict[str, str]] = []
    for path, value in string_values(args):
        needle = normalize(value)
        if len(needle) < MIN_LEN:
            continue
        for src, hay in sources:
            if needle in hay:
                marks.append({"path": path, "value": value, "source": src})
                break
    return marks
