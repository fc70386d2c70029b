"""A server's question to the person (MCP elicitation), as every front end reads, checks and shows it.

Pure (no I/O): the runner decides with it what to decline, the service validates answers with it,
and the CLI, the web page and the chat channels render and parse with it (spec §7; MCP 2025-11-25,
"Elicitation", "Requested Schema").

A requested schema Palui shows is a **flat object of the spec's primitive schemas**: ``string``
(``minLength``, ``maxLength``, ``format`` email/uri/date/date-time), ``number``/``integer``
(``minimum``, ``maximum``), ``boolean``, single-select enums (``enum``, ``oneOf`` of
``{const, title}``, the legacy ``enumNames``) and multi-select enums (``type: array`` whose
``items`` are an ``enum`` or an ``anyOf`` of ``{const, title}``, ``minItems``/``maxItems``).
Each may carry ``title``, ``description`` and ``default``. Anything else (a nested object, a
``$ref``, an unknown keyword) is refused: :func:`schema_problem` says why, and Palui declines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from palui.text.display import shown
from palui.text.formats import format_problem
from palui.text.secret_fields import secret_fields

#: The MCP spec's string formats, and ``password``: some servers mark a secret field so; such a field is a
#: secret one (:mod:`palui.text.secret_fields`), refused unless the person allowed secret questions.
STRING_FORMATS = frozenset({"email", "uri", "date", "date-time", "password"})
_COMMON = frozenset({"type", "title", "description", "default"})
_TRUE = {"yes", "y", "true", "1", "on"}
_FALSE = {"no", "n", "false", "0", "off"}


@dataclass(frozen=True)
class Field:
    """One field of a form as the person sees it.

    ``kind`` is ``string``, ``integer``, ``number``, ``boolean``, ``choice`` (one of ``options``)
    or ``choices`` (any number of ``options``); ``options`` are ``(value, label)`` pairs.
    """

    name: str
    kind: str
    title: str
    description: str
    required: bool
    default: Any = None
    has_default: bool = False
    options: tuple[tuple[str, str], ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    fmt: str | None = None


# -- the requested schema ---------------------------------------------------------------------


def _titled(options: Any) -> list[tuple[str, str]] | None:
    if not isinstance(options, list) or not options:
        return None
    out = []
    for opt in options:
        if not isinstance(opt, dict) or not isinstance(opt.get("const"), str) or set(opt) - {"const", "title"}:
            return None
        title = opt.get("title")
        out.append((opt["const"], title if isinstance(title, str) else opt["const"]))
    return out


def options_of(prop: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``(value, label)`` of an enum field (single or multi select); None for a free field."""
    if prop.get("type") == "array":
        raw = prop.get("items")
        items: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        if isinstance(items.get("enum"), list):
            return [(str(v), str(v)) for v in items["enum"]]
        return _titled(items.get("anyOf"))
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames")
        values = [str(v) for v in prop["enum"]]
        if isinstance(names, list) and len(names) == len(values):
            return [(v, str(n)) for v, n in zip(values, names, strict=True)]
        return [(v, v) for v in values]
    if "oneOf" in prop:
        return _titled(prop["oneOf"])
    return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _property_problem(name: str, prop: Any) -> str | None:
    if not isinstance(prop, dict):
        return f"field {name!r} is not a schema"
    kind = prop.get("type")
    keys = set(prop)
    if kind == "string" and "enum" in prop:
        enum = prop["enum"]
        if not isinstance(enum, list) or not enum or not all(isinstance(v, str) for v in enum):
            return f"field {name!r}: enum must be a list of strings"
        names = prop.get("enumNames")
        if names is not None and (not isinstance(names, list) or len(names) != len(enum)
                                  or not all(isinstance(n, str) for n in names)):
            return f"field {name!r}: enumNames must match enum"
        extra = keys - _COMMON - {"enum", "enumNames"}
    elif kind == "string" and "oneOf" in prop:
        if _titled(prop["oneOf"]) is None:
            return f"field {name!r}: oneOf must be a list of {{const, title}}"
        extra = keys - _COMMON - {"oneOf"}
    elif kind == "string":
        if prop.get("format") is not None and prop.get("format") not in STRING_FORMATS:
            return f"field {name!r}: format {prop.get('format')!r} is not one a form can ask for"
        for k in ("minLength", "maxLength"):
            if k in prop and (not isinstance(prop[k], int) or isinstance(prop[k], bool) or prop[k] < 0):
                return f"field {name!r}: {k} must be a whole number"
        extra = keys - _COMMON - {"minLength", "maxLength", "format"}
    elif kind in ("number", "integer"):
        for k in ("minimum", "maximum"):
            if k in prop and not _number(prop[k]):
                return f"field {name!r}: {k} must be a number"
        extra = keys - _COMMON - {"minimum", "maximum"}
    elif kind == "boolean":
        extra = keys - _COMMON
    elif kind == "array":
        items = prop.get("items")
        if not isinstance(items, dict) or options_of(prop) is None:
            return f"field {name!r}: a list must be a multi-select enum"
        if "enum" in items and (items.get("type") != "string" or set(items) - {"type", "enum"}
                                or not all(isinstance(v, str) for v in items["enum"])):
            return f"field {name!r}: multi-select items must be {{type: string, enum: [strings]}}"
        if "anyOf" in items and set(items) - {"anyOf", "type"}:
            return f"field {name!r}: multi-select items must be {{anyOf: [{{const, title}}]}}"
        extra = keys - _COMMON - {"items", "minItems", "maxItems"}
    else:
        return f"field {name!r} has type {kind!r}, which is not a primitive a form can ask for"
    if extra:
        return f"field {name!r} uses {sorted(extra)[0]!r}, which a flat form cannot show"
    if "default" in prop and prop["default"] is not None and _value_problem(name, prop, prop["default"]):
        return f"field {name!r}: its default does not fit the field"
    return None


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a requested schema a form can show (a sentence naming the field), or None.

    The rule is MCP 2025-11-25 "Requested Schema": a flat object of primitive schemas (see the
    module docstring). Palui declines a question whose schema has a problem.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "the requested schema is not an object"
    props = schema.get("properties")
    if not isinstance(props, dict):
        return "the requested schema has no properties"
    extra = set(schema) - {"type", "properties", "required", "title", "description", "$schema"}
    if extra:
        return f"the requested schema uses {sorted(extra)[0]!r}, which a flat form cannot show"
    required = schema.get("required", [])
    if not isinstance(required, list) or any(not isinstance(r, str) or r not in props for r in required):
        return "the requested schema's required list names a field it does not have"
    for name, prop in props.items():
        problem = _property_problem(str(name), prop)
        if problem:
            return problem
    return None


def fields(schema: Mapping[str, Any] | None) -> list[Field]:
    """The fields of a requested schema that passed :func:`schema_problem`, in the server's order."""
    if not schema:
        return []
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out = []
    for name, prop in props.items():
        opts = options_of(prop)
        kind = prop.get("type")
        if opts is not None:
            kind = "choices" if kind == "array" else "choice"
        title = prop.get("title") if isinstance(prop.get("title"), str) else name
        out.append(Field(
            name=name, kind=str(kind), title=title,
            description=prop.get("description") if isinstance(prop.get("description"), str) else "",
            required=name in required, default=prop.get("default"), has_default="default" in prop,
            options=tuple(opts or ()), minimum=prop.get("minimum", prop.get("minItems", prop.get("minLength"))),
            maximum=prop.get("maximum", prop.get("maxItems", prop.get("maxLength"))), fmt=prop.get("format")))
    return out


# -- answers ------------------------------------------------------------------------------------


def apply_defaults(schema: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """SEP-1034: every field the person left out that has a ``default`` gets it."""
    out = dict(content)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in out and isinstance(prop, dict) and "default" in prop:
            out[name] = prop["default"]
    return out


def _value_problem(name: str, prop: Mapping[str, Any], value: Any) -> str | None:
    kind = prop.get("type")
    options = [v for v, _ in options_of(prop) or []]
    if kind == "boolean":
        return None if isinstance(value, bool) else f"{name!r} must be yes or no"
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name!r} must be a whole number"
    elif kind == "number":
        if not _number(value):
            return f"{name!r} must be a number"
    elif kind == "string":
        if not isinstance(value, str):
            return f"{name!r} must be text"
        if len(value) < prop.get("minLength", 0) or len(value) > prop.get("maxLength", math.inf):
            return f"{name!r} has the wrong length"
        if options and value not in options:
            return f"{name!r} is not one of the choices"
        return format_problem(name, prop.get("format"), value)
    elif kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"{name!r} must be a list of choices"
        if any(v not in options for v in value):
            return f"{name!r} is not one of the choices"
        if not prop.get("minItems", 0) <= len(value) <= prop.get("maxItems", math.inf):
            return f"{name!r} has the wrong number of choices"
        return None
    low, high = prop.get("minimum", -math.inf), prop.get("maximum", math.inf)
    if kind in ("integer", "number") and not low <= value <= high:
        return f"{name!r} is out of range"
    return None


def answer_problems(schema: Mapping[str, Any], content: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``content`` as the answer to ``schema`` (empty: it may be sent).

    Each problem names the field, never the value (it goes into error messages).
    """
    props: Mapping[str, Any] = schema.get("properties") or {}
    problems = [f"{name!r} is required" for name in schema.get("required") or [] if content.get(name) is None]
    for name, value in content.items():
        prop = props.get(name)
        if not isinstance(prop, dict):
            problems.append(f"{name!r} is not asked for")
        elif value is not None:
            problem = _value_problem(name, prop, value)
            if problem:
                problems.append(problem)
    return problems


def parse_value(f: Field, text: str) -> Any:
    """The typed value of ``text`` typed by the person for field ``f``. Raises ValueError (naming the field)."""
    t = text.strip()
    if f.kind == "boolean":
        if t.lower() in _TRUE:
            return True
        if t.lower() in _FALSE:
            return False
        raise ValueError(f"{f.name!r} must be yes or no")
    if f.kind == "integer":
        try:
            return int(t)
        except ValueError:
            raise ValueError(f"{f.name!r} must be a whole number") from None
    if f.kind == "number":
        try:
            v = float(t)
        except ValueError:
            raise ValueError(f"{f.name!r} must be a number") from None
        if not math.isfinite(v):
            raise ValueError(f"{f.name!r} must be a number")
        return int(v) if v.is_integer() and "." not in t and "e" not in t.lower() else v
    if f.kind == "choice":
        return _choice(f, t)
    if f.kind == "choices":
        return [_choice(f, part) for part in t.split(",") if part.strip()]
    return text


def _choice(f: Field, text: str) -> str:
    t = text.strip()
    for value, _label in f.options:
        if t == value:
            return value
    for value, label in f.options:
        if t.casefold() in (value.casefold(), label.casefold()):
            return value
    raise ValueError(f"{f.name!r} must be one of: {', '.join(v for v, _ in f.options)}")


def parse_pairs(schema: Mapping[str, Any] | None, pairs: Iterable[str]) -> dict[str, Any]:
    """``field=value`` words (``/answer ID party_size=4 seating=terrace``) as typed content.

    Raises ValueError naming the problem fields (an unknown field, a missing ``=``, a value
    that does not fit).
    """
    by_name = {f.name: f for f in fields(schema)}
    out: dict[str, Any] = {}
    problems = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            problems.append(f"'{shown(name or pair, one_line=True)}' is not field=value")
            continue
        f = by_name.get(name)
        if f is None:
            problems.append(f"'{shown(name, one_line=True)}' is not asked for")
            continue
        try:
            out[name] = parse_value(f, value)
        except ValueError as e:
            problems.append(str(e))
    if problems:
        raise ValueError("; ".join(problems))
    return out


# -- how a question reads ---------------------------------------------------------------------------


def field_line(f: Field) -> str:
    """One field in words: ``party_size (whole number 1–12, default 2) — How many people``, escaped."""
    kind = {"string": "text", "integer": "whole number", "number": "number", "boolean": "yes/no"}.get(f.kind, "")
    if f.kind == "choice":
        kind = "one of: " + ", ".join(shown(v, one_line=True) for v, _ in f.options)
    elif f.kind == "choices":
        kind = "any of: " + ", ".join(shown(v, one_line=True) for v, _ in f.options)
    elif f.fmt:
        kind += f" ({f.fmt})"
    if f.kind in ("integer", "number") and (f.minimum is not None or f.maximum is not None):
        kind += f" {'' if f.minimum is None else f.minimum}–{'' if f.maximum is None else f.maximum}"
    bits = [kind.strip(), "required" if f.required else "optional"]
    if f.has_default and f.default is not None:
        default = str(f.default).lower() if isinstance(f.default, bool) else str(f.default)
        bits.append(f"default {shown(default, one_line=True)}")
    title = f" — {shown(f.title, one_line=True)}" if f.title and f.title != f.name else ""
    desc = f": {shown(f.description, one_line=True)}" if f.description else ""
    return f"{shown(f.name, one_line=True)} ({', '.join(bits)}){title}{desc}"


def url_host(url: str | None) -> str | None:
    """The host a URL-mode question points at (shown next to the full URL), None when it has none."""
    try:
        return urlsplit(url or "").hostname or None
    except ValueError:
        return None


def question_text(e: Mapping[str, Any], expires: str | None = None) -> str:
    """A pending question (the ``ElicitationsPart.get`` shape) as the person's channel tells it:
    self-contained, every text of the server escaped and marked as the server's words. ``expires`` says
    when it expires as the surface reads it (``expires 2026-12-07 21:39 JST``); by default its stored time."""
    until = expires or f"expires {e['expires_at']}"
    who = f"MCP server {e['connector']} (during {e['tool']})"
    lines = [f"Question {e['id']} from {who}. In the server's words:",
             f"  «{shown(e['message'], one_line=True)}»"]
    if e["mode"] == "url":
        lines.append("  It asks you to open this page yourself (Palui never opens it): "
                     + shown(e["url"], one_line=True))
        lines.append(f"  host: {shown(url_host(e['url']) or '(none)', one_line=True)}")
        lines.append(f"  /answer {e['id']} once you have opened it, or /deny {e['id']} ({until})")
        return "\n".join(lines)
    fs = fields(e.get("schema"))
    secret = secret_fields(e.get("schema"))
    for f in fs:
        mark = f" [secret: {secret[f.name]}, typed hidden]" if f.name in secret else ""
        lines.append("  - " + field_line(f) + mark)
    if secret:
        # A chat keeps what is typed in its history: a secret is typed only at a hidden prompt (spec §7.8).
        lines.append(f"  it asks for a secret: answer on the web page, with /answer {e['id']} in palui chat, or with "
                     f"palui elicitations answer {e['id']} (hidden input; never in a chat app), or /deny {e['id']} "
                     f"({until})")
        return "\n".join(lines)
    example = " ".join(f"{f.name}=…" for f in fs if f.required) or (f"{fs[0].name}=…" if fs else "")
    lines.append(f"  answer with /answer {e['id']} {example}".rstrip()
                 + f", or /deny {e['id']} ({until})")
    return "\n".join(lines)
