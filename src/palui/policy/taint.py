"""Marking approval arguments that appeared in untrusted content (spec §4.6). Pure.

A mark is a signal to the person ("this IBAN came from the web page you fetched"), so it is kept for
what can be hijacked and left off what cannot:

- values are compared after :func:`palui.text.escape.normalize_for_marks` (NFKC, hidden code points
  removed, case-folded, whitespace collapsed) on both sides, so a zero-width character or a
  different case or width does not dodge a mark;
- a value the tool's input schema fixes (an ``enum`` member or the ``const`` at that argument) or
  that the person wrote themselves (in their own messages of the conversation) is not marked;
- a value of 4+ characters found in untrusted content is marked, or else a word of 8+ characters
  inside it (an IBAN in a sentence); a shorter value only when its argument is an identifier
  (``id``, ``file_id``, ``fileId``) and it is a whole word of untrusted content ("Delete the file
  with ID '13'").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from palui.text.escape import normalize_for_marks

MIN_LEN = 4
MIN_TOKEN = 8  # a word inside a longer value is marked from this length on (IBANs, e-mails, URLs)
_EDGE = "\"'()[]{}<>.,;:!?"
_REF_DEPTH = 8  # local $ref hops followed at one schema position (a cycle stops there)

Key = str | int  # a dict key or a list index on an argument's path


def normalize(text: str) -> str:
    """The comparison form of spec §4; the same as :func:`palui.text.escape.normalize_for_marks`."""
    return normalize_for_marks(text)


def string_values(args: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string value in ``args`` with its JSON path (``"to"``, ``"items[0].iban"``)."""
    return [(p, v) for p, _, v in _leaves(args, path, ())]


def _leaves(args: Any, path: str, keys: tuple[Key, ...]) -> list[tuple[str, tuple[Key, ...], str]]:
    out: list[tuple[str, tuple[Key, ...], str]] = []
    if isinstance(args, str):
        out.append((path or "$", keys, args))
    elif isinstance(args, dict):
        for k, v in args.items():
            out.extend(_leaves(v, f"{path}.{k}" if path else str(k), (*keys, str(k))))
    elif isinstance(args, list):
        for i, v in enumerate(args):
            out.extend(_leaves(v, f"{path}[{i}]", (*keys, i)))
    return out


def is_identifier_key(key: str) -> bool:
    """Whether an argument named ``key`` holds an identifier: ``id``, ``*_id``, ``*Id`` (and their
    plurals ``ids``, ``file_ids``, ``fileIds``, and ``-id``/``ID`` spellings)."""
    low = key.lower()
    return (low in ("id", "ids") or low.endswith(("_id", "_ids", "-id", "-ids"))
            or key.endswith(("Id", "ID", "Ids", "IDs")))


def _resolve(root: dict[str, Any], node: Any) -> Any:
    """``node`` with local ``$ref``s (``#/$defs/Kind``) followed, as pydantic-made schemas use them."""
    for _ in range(_REF_DEPTH):
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            return node
        target: Any = root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return node
        node = target
    return node


def _alternatives(root: dict[str, Any], nodes: list[Any]) -> list[dict[str, Any]]:
    """The schemas at one position: each node and, one level deep, its anyOf/oneOf/allOf members."""
    out: list[dict[str, Any]] = []
    for node in nodes:
        node = _resolve(root, node)
        if not isinstance(node, dict):
            continue
        out.append(node)
        for combinator in ("anyOf", "oneOf", "allOf"):
            members = node.get(combinator)
            if isinstance(members, list):
                out.extend(m for m in (_resolve(root, m) for m in members) if isinstance(m, dict))
    return out


def schema_at(schema: dict[str, Any], keys: Sequence[Key]) -> list[dict[str, Any]]:
    """The subschemas of a JSON Schema that describe the argument at ``keys`` (``("items", 0, "iban")``).

    Follows ``properties`` (and an object ``additionalProperties``) for a key, ``items`` (an object,
    or the draft-4 list) and ``prefixItems`` for an index, and at every position the members of
    ``anyOf``/``oneOf``/``allOf`` one level deep and local ``$ref``s. Empty when the schema says
    nothing about that position.
    """
    nodes = _alternatives(schema, [schema])
    for key in keys:
        nxt: list[Any] = []
        for node in nodes:
            if isinstance(key, str):
                props = node.get("properties")
                if isinstance(props, dict) and key in props:
                    nxt.append(props[key])
                elif isinstance(node.get("additionalProperties"), dict):
                    nxt.append(node["additionalProperties"])
            else:
                items, prefix = node.get("items"), node.get("prefixItems")
                if isinstance(prefix, list) and key < len(prefix):
                    nxt.append(prefix[key])
                elif isinstance(items, list):
                    if key < len(items):
                        nxt.append(items[key])
                elif isinstance(items, dict):
                    nxt.append(items)
        nodes = _alternatives(schema, nxt)
    return nodes


def fixed_by_schema(schema: dict[str, Any] | None, keys: Sequence[Key], value: str) -> bool:
    """Whether ``value`` equals (exactly) an ``enum`` member or the ``const`` the schema gives at ``keys``."""
    if not isinstance(schema, dict):
        return False
    for node in schema_at(schema, keys):
        if "const" in node and node["const"] == value:
            return True
        enum = node.get("enum")
        if isinstance(enum, list) and any(isinstance(m, str) and m == value for m in enum):
            return True
    return False


def _has_word(word: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def untrusted_args(args: Any, untrusted: Iterable[tuple[str, str]], *, schema: dict[str, Any] | None = None,
                   own_texts: Sequence[str] = ()) -> list[dict[str, str]]:
    """Argument values that also appear in untrusted content, to be marked in the approval prompt.

    Args:
        args: the call's arguments (JSON-like).
        untrusted: pairs of (source, text) of untrusted content in the conversation,
            e.g. ``("web__fetch_page at step 2", "<page text>")``.
        schema: the tool's input schema (JSON Schema); a value equal to an ``enum`` member or the
            ``const`` at its argument's position is not marked (the tool fixes it, see :func:`schema_at`).
        own_texts: the person's own messages of the conversation; what they wrote is not marked.

    Returns:
        ``[{"path", "value", "match", "source"}]``, one per marked value (first source that has it).
        ``match`` is the part found, normalised: the whole value (spec §4), or else a word of
        ``MIN_TOKEN``+ characters inside it — so "Pay to IBAN DE89…" is marked when the page had the
        IBAN (a hijacked argument is rarely the page's text verbatim). A value shorter than
        ``MIN_LEN`` is marked only under an identifier argument (:func:`is_identifier_key`) and when
        it is a whole word of the untrusted text.
    """
    sources = [(src, normalize_for_marks(text)) for src, text in untrusted]
    if not sources:
        return []
    own = [normalize_for_marks(t) for t in own_texts]
    marks: list[dict[str, str]] = []
    for path, keys, value in _leaves(args, "", ()):
        needle = normalize_for_marks(value)
        if not needle or fixed_by_schema(schema, keys, value):
            continue
        hit: tuple[str, str] | None = None
        if len(needle) < MIN_LEN:
            names = [k for k in keys if isinstance(k, str)]
            if names and is_identifier_key(names[-1]) and not any(_has_word(needle, o) for o in own):
                hit = next(((src, needle) for src, hay in sources if _has_word(needle, hay)), None)
        elif not any(needle in o for o in own):
            hit = next(((src, needle) for src, hay in sources if needle in hay), None)
            if hit is None:
                words = {w.strip(_EDGE) for w in needle.split(" ")}
                for word in sorted((w for w in words if len(w) >= MIN_TOKEN), key=lambda w: (-len(w), w)):
                    if any(word in o for o in own):
                        continue
                    hit = next(((src, word) for src, hay in sources if word in hay), None)
                    if hit:
                        break
        if hit:
            marks.append({"path": path, "value": value, "match": hit[1], "source": hit[0]})
    return marks
