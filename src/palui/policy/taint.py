"""Marking approval arguments that appeared in untrusted content (spec §4.6). Pure.

A mark is a signal to the person ("this IBAN came from the web page you fetched"), so it is kept for
what can be hijacked and left off what cannot:

- values are compared after :func:`palui.text.escape.normalize_for_marks` (NFKC, hidden code points
  removed, case-folded, whitespace collapsed) on both sides, so a zero-width character or a
  different case or width does not dodge a mark; numbers and booleans as their JSON text (``7``,
  ``7.5``, ``true``), like strings;
- a value the tool's input schema fixes (an ``enum`` member, the ``const``, or any value of a
  ``boolean`` argument, an enum of two) or that the person wrote themselves (in their own messages
  of the conversation) is not marked;
- a whole value is marked when it stands as a whole word in untrusted content: from 4 characters
  on (:data:`MIN_LEN`), or at any length under an argument that names an identifier
  (:func:`is_identifier_key`: ``id``, ``file_id``) or a person, address or account
  (:func:`is_person_key`: ``recipient``, ``to``, ``iban``, ``recipient_email``, ``toAddress``); a short
  number there (``7``, ``"26"``) only where it stands as a token of its own (never the day of a date, a time, a
  decimal), and the person's words leave it unmarked only when they name the same object with it
  (:func:`short_number_source`);
- otherwise the parts of a string value that stand in untrusted content are marked *as those parts*
  (:mod:`palui.policy.spans`: runs of 3+ words, 2-word fields, addresses, URLs, numbers, long words),
  and the approval quotes them rather than the whole value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from palui.policy.haystack import Haystack, has_word, prepare
from palui.policy.offsets import OffsetMap
from palui.policy.spans import Span, find_spans
from palui.text.escape import normalize_for_marks

MIN_LEN = 4  # characters of a whole value marked under any argument
#: Words of an argument's name that make it name a person, an address or an account: its value is
#: marked at any length (``"Bob"``). Matched against each word of the name (``recipient_email``,
#: ``toAddress``, ``cc_list``), singular or plural.
PERSON_WORDS = frozenset({
    "recipient", "to", "cc", "bcc", "from", "sender", "email", "mail", "iban", "bic", "swift",
    "account", "payee", "beneficiary", "url", "uri", "link", "href", "host", "hostname", "domain", "phone",
    "name", "user", "username", "login", "handle", "address", "contact", "participant", "attendee",
    "invitee", "member", "owner", "assignee", "author", "channel",
})
_REF_DEPTH = 8  # local $ref hops followed at one schema position (a cycle stops there)

Key = str | int  # a dict key or a list index on an argument's path


def normalize(text: str) -> str:
    """The comparison form of spec §4; the same as :func:`palui.text.escape.normalize_for_marks`."""
    return normalize_for_marks(text)


def _leaves(args: Any, path: str, keys: tuple[Key, ...]) -> list[tuple[str, tuple[Key, ...], str | int | float]]:
    """Every string, number and boolean in ``args`` with its JSON path and the keys on that path."""
    out: list[tuple[str, tuple[Key, ...], str | int | float]] = []
    if isinstance(args, str | int | float):
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


def _name_words(key: str) -> list[str]:
    """The words of an argument name, lower case: ``toAddress`` → ``to``, ``address``; ``recipient_email``
    → ``recipient``, ``email``; ``IBAN`` → ``iban``."""
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", key)]


def is_person_key(key: str) -> bool:
    """Whether an argument named ``key`` names a person, an address or an account: one of its words
    (:func:`_name_words`) is in :data:`PERSON_WORDS`, as written or as a plural (``recipients``,
    ``addresses``): ``to``, ``cc``, ``recipient_email``, ``toAddress``, ``user_name``, ``iban``, ``url``."""
    for w in _name_words(key):
        if w in PERSON_WORDS or (w.endswith("s") and w[:-1] in PERSON_WORDS) or \
                (w.endswith("es") and w[:-2] in PERSON_WORDS):
            return True
    return False


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


def _json_kind(v: Any) -> str:
    return "boolean" if isinstance(v, bool) else "number" if isinstance(v, int | float) else type(v).__name__


def _same(a: Any, b: Any) -> bool:
    """JSON equality of two scalars: ``1`` is not ``true`` nor ``"1"``; ``1`` is ``1.0``."""
    return _json_kind(a) == _json_kind(b) and a == b


def fixed_by_schema(schema: dict[str, Any] | None, keys: Sequence[Key], value: Any) -> bool:
    """Whether ``value`` equals (exactly, as JSON) an ``enum`` member or the ``const`` the schema gives
    at ``keys``, or is a boolean where the schema says ``"type": "boolean"`` (two values, both fixed)."""
    if not isinstance(schema, dict):
        return False
    for node in schema_at(schema, keys):
        if "const" in node and _same(node["const"], value):
            return True
        enum = node.get("enum")
        if isinstance(enum, list) and any(_same(m, value) for m in enum):
            return True
        kind = node.get("type")
        if isinstance(value, bool) and (kind == "boolean" or isinstance(kind, list) and "boolean" in kind):
            return True
    return False


def untrusted_args(args: Any, untrusted: Iterable[tuple[str, str]], *, schema: dict[str, Any] | None = None,
                   own_texts: Sequence[str] = (), tool: str | None = None) -> list[dict[str, Any]]:
    """Argument values, or parts of them, that also appear in untrusted content, to be marked in the
    approval prompt (the rules are in the module docstring).

    Args:
        args: the call's arguments (JSON-like).
        untrusted: pairs of (source, text) of untrusted content in the conversation,
            e.g. ``("web__fetch_page at step 2", "<page text>")``.
        schema: the tool's input schema (JSON Schema); a value equal to an ``enum`` member or the
            ``const`` at its argument's position is not marked (the tool fixes it, see :func:`schema_at`).
        own_texts: the person's own messages of the conversation; what they wrote is not marked.

    Returns:
        ``[{"path", "value", "match", "source", "spans"}]`` in argument order: one per value marked whole
        (``spans == [value]``, ``match`` its normalised form; the first source that has it), else one per
        source of the parts found in a string value (:func:`palui.policy.spans.find_spans`):
        ``spans`` lists those parts in the value's own spelling, left to right, ``match`` is the
        longest of them normalised. ``value`` is a string: a number or boolean as its JSON text.
    """
    sources = [Haystack(src, text) for src, text in untrusted]
    if not sources:
        return []
    own = Haystack("", "\n".join(own_texts), own=True)
    marks: list[dict[str, Any]] = []
    partial: list[tuple[int, str, str]] = []  # (place in marks, path, value) of strings not found whole
    for path, keys, raw in _leaves(args, "", ()):
        if fixed_by_schema(schema, keys, raw):
            continue
        value = raw if isinstance(raw, str) else json_text(raw)
        names = [k for k in keys if isinstance(k, str)]
        named = bool(names) and (is_identifier_key(names[-1]) or is_person_key(names[-1]))
        if named and (short := short_number(raw)) is not None:  # spec §4.6: never a mark by coincidence
            src = short_number_source(short, sources, own, object_words(names[-1], tool))
            if src is not None:
                marks.append({"path": path, "value": value, "match": short, "source": src, "spans": [value]})
            continue
        whole = _whole_value(raw, sources, own, named)
        if whole is not None:
            marks.append({"path": path, "value": value, "match": whole[1], "source": whole[0], "spans": [value]})
        elif isinstance(raw, str):
            partial.append((len(marks), path, value))
    if not partial:
        return marks
    # one pass over each text for what every remaining value needs (linear in the texts' size)
    maps = [OffsetMap(value) for _, _, value in partial]
    prepare([*sources, own], [m.text for m in maps])
    for (at, path, value), where in zip(reversed(partial), reversed(maps), strict=True):
        by_source: dict[str, list[Span]] = {}  # from the end, so each place in marks stays right
        for span in find_spans(where, sources, own):
            by_source.setdefault(span.source, []).append(span)
        marks[at:at] = [{"path": path, "value": value, "match": max(spans, key=lambda s: len(s.match)).match,
                         "source": src, "spans": [s.text for s in spans]} for src, spans in by_source.items()]
    return marks


def _whole_value(raw: str | int | float, sources: Sequence[Haystack], own: Haystack,
                 named: bool) -> tuple[str, str] | None:
    """(source, normalised value) when the whole value stands in untrusted content and is to be marked:
    :data:`MIN_LEN` characters or more, or ``named`` (an identifier or person argument), and not the person's."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        pattern = number_pattern(raw)
        shortest = len(_plain_number(raw))
        if not (named or shortest >= MIN_LEN) or pattern.search(own.text):
            return None
        src = next((h.source for h in sources if pattern.search(h.text)), None)
        return None if src is None else (src, _plain_number(raw))
    needle = normalize_for_marks(raw if isinstance(raw, str) else json_text(raw))
    if not needle or not (named or len(needle) >= MIN_LEN):
        return None
    # the person's own words: a short value only as a whole word (the identifier rule of old)
    if has_word(needle, own.text) if len(needle) < MIN_LEN else needle in own.text:
        return None
    src = next((h.source for h in sources if has_word(needle, h.text)), None)
    return None if src is None else (src, needle)


#: Words that introduce an identifier: ``ID '13'``, ``#13``, ``no. 7``, ``number 7``.
ID_WORDS = ("id", "ids", "no", "nr", "num", "number", "ref")
_ID_WORDS = "|".join(ID_WORDS)
#: A number standing as a token of its own: not part of a longer number, a date (``2024-05-26``), a time
#: (``10:00``), a decimal (``98.70``), a phone number or a version (``1.7``); the ``{n}`` is the number.
_TOKEN = r"(?<![\w])(?<!\d[-:./,])(?:{n})(?![\w])(?![-:./,]\d)"


def short_number(raw: str | int | float) -> str | None:
    """``raw`` as its digits when it is a short number (a JSON integer, or a string of digits, shorter than
    :data:`MIN_LEN`): the values marked only as a whole value or an identifier (spec §4.6). Else None."""
    if isinstance(raw, bool):
        return None
    text = str(raw) if isinstance(raw, int) else raw if isinstance(raw, str) else None
    return text if text is not None and text.isascii() and text.isdigit() and len(text) < MIN_LEN else None


def object_words(key: str, tool: str | None) -> list[str]:
    """The words that name the object an identifier argument points at: the argument's own words but ``id``
    (``email_id`` → ``email``), else the tool's (``mcp-x__update_scheduled_transaction`` → ``update``,
    ``scheduled``, ``transaction``); words of 3 characters or more."""
    words = [w for w in _name_words(key) if w not in ID_WORDS and len(w) >= 3]
    if not words and tool:
        words = [w for w in _name_words(tool.split("__", 1)[-1]) if len(w) >= 3]
    return words


def short_number_source(digits: str, sources: Sequence[Haystack], own: Haystack, objects: list[str]) -> str | None:
    """The first source where the short number ``digits`` stands as a whole value or an identifier-like token
    (a token of its own: never the day of a date, a time, a decimal or part of a longer number), unless the
    person's own words name that same object with it (``delete file 13`` for ``file_id``; any token of their
    words when the argument and the tool name no object). None: not marked (spec §4.6)."""
    number = re.escape(digits) + r"(?:\.0+)?"  # 7 is also 7.0 (a JSON number by value)
    token = re.compile(_TOKEN.format(n=number))
    if not any(token.search(h.text) for h in sources):
        return None
    if objects:
        named = "|".join(re.escape(w) for w in objects)
        said = re.compile(rf"(?:\b(?:{named})(?:e?s)?|\b(?:{_ID_WORDS})\b\.?|#)[\s:=#'\"]*"
                          + _TOKEN.format(n=number) + r"|['\"]" + number + r"['\"]")
        if said.search(own.text):
            return None
    elif token.search(own.text):
        return None
    return next(h.source for h in sources if token.search(h.text))


def json_text(v: int | float) -> str:
    """A number or boolean as JSON writes it (``json.dumps``): ``7``, ``7.5``, ``true``, ``1e+300``, ``NaN``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def _plain_number(v: int | float) -> str:
    """``v`` as written most simply: ``7``, ``7.5``, ``50`` for ``50.0``; JSON's text for the rest (``1e+300``)."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return json_text(v)


def number_pattern(v: int | float) -> re.Pattern[str]:
    """A regex for the number ``v`` as text may write it (normalised text): ``7`` also as ``7.0`` and
    ``7.00``, ``7.5`` also as ``7.50``; never inside a longer number (``17``, ``7.25``, ``1.7``) or word."""
    text = _plain_number(v)
    head, _, frac = text.partition(".")
    if "e" in text.lower() or not re.fullmatch(r"-?\d+", head) or not frac.isdigit() and frac:
        body = re.escape(text)
    else:
        body = re.escape(head) + (rf"\.{frac}0*" if frac else r"(?:\.0+)?")
    return re.compile(rf"(?<![\w.]){body}(?!\w|\.\d)")
