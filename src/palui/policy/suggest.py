"""A class suggested for a tool whose server sent no annotations (spec §2.4). Pure: no I/O.

Servers that send no annotations (github's 26 tools, sqlite, markitdown) leave every tool
``unknown``. From the tool's raw name and description this proposes a class with its reason; nothing
changes until the person accepts it (then it is a ``user`` class, spec §2). The rule, in order:

1. a word of the name that deletes or cannot be undone (``delete``, ``drop``, ``merge``, ``reset``,
   ``execute``…, with ``-s``/``-ed``/``-ing`` forms) → ``destructive``;
2. else the first word of the name that is a known verb decides: a writing verb (``create``,
   ``update``, ``add``, ``send``…) → ``write``, or ``destructive`` when the description says it
   deletes or overwrites; a reading verb (``get``, ``list``, ``search``…) → ``read``, unless a later
   word of the name is a writing verb or the description speaks of changing anything: then it stays
   unknown (unsure);
3. no known verb → unknown.

A suggestion is therefore never ``read`` for a name that also matches a write or destructive pattern,
and a server's description can only make a suggestion stricter or unsure, never looser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from palui.types import ToolClass

READ = frozenset({"get", "list", "search", "find", "read", "fetch", "show", "describe", "view", "lookup", "count",
                  "inspect", "browse", "retrieve", "query"})
WRITE = frozenset({"create", "update", "add", "set", "put", "post", "write", "edit", "insert", "upload", "send",
                   "save", "rename", "move", "copy", "fork", "comment", "assign", "label", "star", "push", "append",
                   "patch", "modify", "change", "submit", "publish", "schedule", "invite", "reply", "mark", "tag",
                   "import", "register", "apply", "commit", "open", "close", "archive", "enable", "disable",
                   "start", "stop", "restart", "upsert", "replace"})
DESTRUCTIVE = frozenset({"delete", "del", "remove", "rm", "drop", "destroy", "purge", "erase", "truncate", "merge",
                         "reset", "revoke", "kill", "terminate", "wipe", "overwrite", "force", "clear", "unlink",
                         "uninstall", "revert", "rollback", "squash", "rebase", "execute", "exec", "run", "eval",
                         "shell", "ban"})
# Words of a description that mean the tool changes something (a narrower set: "a set of", "a blog post"
# and "a copy of" are common in descriptions of read tools).
DESCRIPTION_WRITES = frozenset({"create", "update", "modify", "write", "insert", "upload", "send", "overwrite",
                                "delete", "remove", "drop", "destroy", "erase", "purge", "merge", "push"})
DESCRIPTION_DESTROYS = frozenset({"delete", "remove", "drop", "destroy", "erase", "purge", "overwrite", "truncate",
                                  "wipe"})
DESCRIPTION_PHRASES = ("permanently", "irreversib", "cannot be undone", "can't be undone", "can not be undone")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@dataclass(frozen=True)
class Suggestion:
    """``tool_class`` is None when unsure (the tool stays unknown); ``reason`` says why either way."""

    tool_class: ToolClass | None
    reason: str


def words(text: str) -> list[str]:
    """Lower-case words of a name or a text: ``snake_case``, ``kebab-case`` and ``camelCase`` split."""
    return [w.lower() for w in _WORD.findall(text)]


def _forms(word: str) -> set[str]:
    """``word`` and what it is without an ``-s``, ``-es``, ``-ed`` or ``-ing`` ending (``deleted`` → ``delete``)."""
    out = {word}
    for end in ("ing", "ed", "es", "s"):
        if word.endswith(end) and len(word) > len(end) + 1:
            base = word[: -len(end)]
            out |= {base, base + "e"}
            if len(base) > 2 and base[-1] == base[-2]:  # "dropped" → "drop"
                out.add(base[:-1])
    return out


def _match(word: str, vocabulary: frozenset[str]) -> bool:
    return bool(_forms(word) & vocabulary)


def suggest(name: str, description: str = "") -> Suggestion:
    """The class suggested for the tool with raw ``name`` and ``description`` (the module docstring gives
    the rule). The reason quotes the word that decided."""
    name_words = words(name)
    desc = description.lower()
    desc_words = words(description)
    for w in name_words:
        if _match(w, DESTRUCTIVE):
            return Suggestion(ToolClass.DESTRUCTIVE, f"the name has {w!r}: deletes or can't be undone")
    first = next(((i, w) for i, w in enumerate(name_words) if _match(w, READ) or _match(w, WRITE)), None)
    if first is None:
        return Suggestion(None, "no word of the name says what it does")
    i, verb = first
    if _match(verb, WRITE):
        destroys = next((w for w in desc_words if _match(w, DESCRIPTION_DESTROYS)), None) or next(
            (p for p in DESCRIPTION_PHRASES if p in desc), None)
        if destroys:
            return Suggestion(ToolClass.DESTRUCTIVE, f"the name has {verb!r} and the description says {destroys!r}")
        return Suggestion(ToolClass.WRITE, f"the name has {verb!r}: creates or changes something")
    later = next((w for w in name_words[i + 1:] if _match(w, WRITE)), None)
    if later:
        return Suggestion(None, f"the name starts like a read tool ({verb!r}) but also has {later!r}: unsure")
    changes = next((w for w in desc_words if _match(w, DESCRIPTION_WRITES)), None) or next(
        (p for p in DESCRIPTION_PHRASES if p in desc), None)
    if changes:
        return Suggestion(None, f"the name has {verb!r}, but the description says {changes!r}: unsure")
    return Suggestion(ToolClass.READ, f"the name has {verb!r}: looks things up")
