"""A tool's input schema: checked as a definition when it is stored, and a call's arguments checked against
it before the call is decided further (spec §3.3, §7.6). Pure: a function of the arguments, the schema and
the limits, no I/O (no ``$ref`` is ever fetched) and no clock.

- :func:`definition_problem` — why a definition is flagged when a server lists it (spec §7.6, decision 0027's
  flow: the tool stays off until the person has seen it): a number JSON cannot carry (``NaN``, ``Infinity``), a
  ``$ref`` to anything outside the schema (Palui never fetches one), a schema that is not valid under its
  ``$schema`` (2020-12 when it names none or one Palui does not know), or more than
  ``connectors.max_schema_chars`` characters once every ``description`` in it is cut as a tool's is
  (decision 0082).
- :func:`json_problem`, :func:`argument_problem` — why a call's arguments are refused as the model's error:
  not a JSON object, nested deeper than :data:`MAX_DEPTH`, a non-finite number, an integer JSON does not carry
  exactly (:data:`MAX_SAFE_INTEGER`), a string with a lone surrogate (the first function: what strict JSON
  cannot carry), more than ``limits.argument_chars`` characters, or not valid under the tool's input schema.
  The message names the place (``$.items[2].id``) and the rule, never a value the caller sent (decision
  0017): the caller may be hostile and the text goes to a model and a log.
- :func:`for_model` — the schema as a model is sent it: every ``description`` inside cut like the tool's.

Validation is `jsonschema`'s, with the validator its ``$schema`` names; ``format`` is not asserted (an
annotation, as 2019-09 and 2020-12 define it), nor is ``pattern`` (a server's regular expression run by Python's
``re`` could backtrack for hours on a model's string, holding the interpreter: the server checks its own
patterns), and a ``$ref`` is resolved only inside the schema: the registry refuses every retrieval, so no
schema ever makes Palui fetch anything.
"""

from __future__ import annotations

import math
import re
from typing import Any

from palui.text.escape import escape
from palui.text.strict_json import dumps, non_finite

#: Arguments nested deeper than this (objects and arrays) are refused: no tool needs more, and the parsers,
#: hashes and marks on the way are recursive.
MAX_DEPTH = 64
#: The largest integer every JSON reader carries exactly: RFC 8259 §6 and I-JSON (RFC 7493 §2.2) bound
#: interoperable integers by the IEEE 754 double's 53 bits; a server in JavaScript rounds a larger one, so the
#: value the person approved would not be the value that ran. (Python's own bound, 4,300 digits, fails the
#: parse earlier: such a call arrives as invalid JSON.)
MAX_SAFE_INTEGER = 2**53 - 1
#: A tool's description is cut here for the model (decision 0082); a schema's descriptions are cut the same.
DESCRIPTION_CHARS = 4_000
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
#: How a schema flagged only for its size is told, and known (:func:`schema_usable`).
SIZE_PROBLEM = "its input schema is too long:"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_VALIDATORS: dict[str, Any] = {}  # the canonical schema -> its validator (a few hundred at most)


def visible(text: str) -> str:
    """A name from a schema or from arguments as a message shows it: hidden characters escaped, on one line."""
    return escape(text, one_line=True)


def cut_description(text: str) -> str:
    """``text`` when it has at most :data:`DESCRIPTION_CHARS` characters; otherwise its first ones and a note
    saying how long it was (decision 0082)."""
    if len(text) <= DESCRIPTION_CHARS:
        return text
    return f"{text[:DESCRIPTION_CHARS]} … [cut by Palui: the description has {len(text):,} characters]"


def for_model(schema: Any) -> Any:
    """``schema`` with every string under a ``description`` key cut by :func:`cut_description` (the same object
    when none is longer): what a model is sent, and what ``connectors.max_schema_chars`` measures."""
    if isinstance(schema, dict):
        out = {k: (cut_description(v) if k == "description" and isinstance(v, str) else for_model(v))
               for k, v in schema.items()}
        return schema if all(out[k] is schema[k] for k in schema) else out
    if isinstance(schema, list):
        items = [for_model(v) for v in schema]
        return schema if all(a is b for a, b in zip(items, schema, strict=True)) else items
    return schema


def schema_chars(schema: Any) -> int:
    """The characters of ``schema``'s canonical JSON as a model is sent it (descriptions cut); ``tools show``
    prints it."""
    from palui.text.strict_json import finite

    return len(dumps(for_model(finite(schema)), sort_keys=True, separators=(",", ":"), ensure_ascii=False))


def definition_problem(schema: Any, max_chars: int) -> str | None:
    """Why a tool's input ``schema`` (as its server listed it) is flagged, or None. ``max_chars`` is
    ``connectors.max_schema_chars``."""
    if non_finite(schema):
        return "its input schema holds a number JSON cannot carry (NaN or Infinity)"
    remote = _remote_ref(schema)
    if remote is not None:
        return f"its input schema has a $ref outside it ({visible(remote[:200])}), which Palui never fetches"
    from jsonschema.exceptions import SchemaError

    try:
        _validator_class(schema).check_schema(schema)
    except SchemaError as e:
        return f"its input schema is not a valid JSON Schema: at {_arg_path(e.path)}: the {e.validator!r} rule fails"
    except Exception as e:  # a schema the library cannot even read (a $schema that is not text…)
        return f"its input schema is not a valid JSON Schema ({type(e).__name__})"
    size = schema_chars(schema)
    if size > max_chars:
        return (f"{SIZE_PROBLEM} {size:,} characters (descriptions cut to {DESCRIPTION_CHARS:,}), more than "
                f"connectors.max_schema_chars ({max_chars:,})")
    return None


def argument_problem(args: Any, schema: Any, max_chars: int, *, check_schema: bool = True) -> str | None:
    """Why a call's ``args`` are refused, or None. ``max_chars`` is ``limits.argument_chars``; ``check_schema``
    False skips the input schema (one the person switched on although it is flagged unusable: not valid, a
    ``$ref`` outside it, a non-finite number), the other checks still apply."""
    shape = json_problem(args)
    if shape is not None:
        return shape
    size = len(dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    if size > max_chars:
        return f"the arguments have {size:,} characters, more than limits.argument_chars ({max_chars:,})"
    if not check_schema or not isinstance(schema, dict) or not schema:
        return None
    try:
        validator = _validator(schema)
        errors = list(validator.iter_errors(args))
    except Exception as e:  # a $ref inside it that leads nowhere, a pattern Python cannot compile…
        return f"the tool's input schema could not be applied ({type(e).__name__}); the call was not decided"
    if not errors:
        return None
    from jsonschema.exceptions import best_match

    first = best_match(errors)
    return f"the arguments do not match the tool's input schema: at {_arg_path(first.absolute_path)}: {_rule(first)}"


def json_problem(args: Any) -> str | None:
    """Why ``args`` are not arguments strict JSON carries as they are, or None: not an object, nested deeper
    than :data:`MAX_DEPTH`, a non-finite number, an integer beyond :data:`MAX_SAFE_INTEGER`, a lone surrogate.
    Walked without recursion. A call is read with it (:func:`palui.runner.pending.read_call`): arguments it
    refuses are never stored, and the call is refused at its argument step."""
    if not isinstance(args, dict):
        return "the arguments must be a JSON object"
    stack: list[tuple[Any, tuple[Any, ...], int]] = [(args, (), 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict):
            if depth >= MAX_DEPTH:
                return f"the arguments are nested deeper than {MAX_DEPTH} levels"
            for k, v in value.items():
                if isinstance(k, str) and _lone_surrogate(k):
                    return f"a property name at {_arg_path(path)} holds a lone surrogate (not Unicode text)"
                stack.append((v, (*path, k), depth + 1))
        elif isinstance(value, list):
            if depth >= MAX_DEPTH:
                return f"the arguments are nested deeper than {MAX_DEPTH} levels"
            stack.extend((v, (*path, i), depth + 1) for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            return f"the arguments hold a number JSON cannot carry (NaN or Infinity) at {_arg_path(path)}"
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
            return (f"the arguments hold an integer beyond ±{MAX_SAFE_INTEGER:,}, which JSON does not carry "
                    f"exactly (RFC 8259 §6), at {_arg_path(path)}: send it as a string")
        elif isinstance(value, str) and _lone_surrogate(value):
            return f"the arguments hold a string with a lone surrogate (not Unicode text) at {_arg_path(path)}"
    return None


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _arg_path(path: Any) -> str:
    """``$.items[2].id`` for a place in the arguments: names escaped and cut, never a value."""
    out = "$"
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and _NAME.match(p):
            out += f".{p}"
        else:
            out += f"[{visible(str(p)[:64])!r}]"
    return out if len(out) <= 120 else f"{out[:120]}…"


def _rule(e: Any) -> str:
    """What a validation error's rule asks for, in words, with the keyword; never the instance's value."""
    kw, want, inst = e.validator, e.validator_value, e.instance
    if kw == "type":
        kinds = " or ".join(want) if isinstance(want, list) else str(want)
        return f"must be {kinds} (type)"
    if kw == "required" and isinstance(want, list) and isinstance(inst, dict):
        missing = [str(n) for n in want if n not in inst]
        return f"misses the required {visible(missing[0][:64]) if missing else 'property'} (required)"
    if kw == "additionalProperties" and isinstance(inst, dict):
        known = set((e.schema.get("properties") or {}) if isinstance(e.schema, dict) else ())
        extra = sorted(str(k) for k in inst if k not in known)
        return f"has {visible(extra[0][:64]) if extra else 'a property'}, which the schema does not allow " \
               "(additionalProperties)"
    if kw in ("enum", "const"):
        return f"is not a value the schema allows ({kw})"
    if kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
              "maxItems", "minProperties", "maxProperties", "multipleOf") and isinstance(want, (int, float)):
        return f"is outside what the schema allows ({kw} {want:g})"
    return f"fails the schema's {kw!r} rule"


def _remote_ref(schema: Any) -> str | None:
    """The first ``$ref`` (or ``$dynamicRef``, ``$recursiveRef``) that leaves the schema: one not starting with
    ``#``. Walked without recursion."""
    stack = [schema]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                if k in _REF_KEYS and isinstance(v, str) and not v.startswith("#"):
                    return v
                stack.append(v)
        elif isinstance(value, list):
            stack.extend(value)
    return None


def _validator_class(schema: Any) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    if isinstance(schema, dict) and not isinstance(schema.get("$schema", ""), str):
        return Draft202012Validator
    return validator_for(schema, default=Draft202012Validator)


def _unchecked(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
    """A keyword Palui does not assert (``pattern``): no error."""
    return iter(())


def schema_usable(problem: str | None) -> bool:
    """Whether a tool's input schema flagged with ``problem`` (:func:`definition_problem`) still checks arguments:
    a sound one, or one flagged only for its size; not one that is not valid, has a ``$ref`` outside it or held a
    non-finite number (spec §3.3)."""
    return problem is None or problem.startswith(SIZE_PROBLEM)


def _validator(schema: dict[str, Any]) -> Any:
    """The validator of ``schema`` (kept per schema), whose registry refuses every retrieval."""
    key = dumps(schema, sort_keys=True)
    hit = _VALIDATORS.get(key)
    if hit is None:
        import referencing
        import referencing.exceptions

        # referencing's classes are attrs classes: their keyword arguments are made at run time, unseen by mypy
        registry: Any = referencing.Registry
        refused: Any = referencing.exceptions.NoSuchResource

        def refuse(uri: str) -> Any:
            raise refused(ref=uri)

        from jsonschema.validators import extend

        checking = extend(_validator_class(schema), {"pattern": _unchecked})
        hit = checking(schema, registry=registry(retrieve=refuse))
        if len(_VALIDATORS) >= 256:
            _VALIDATORS.pop(next(iter(_VALIDATORS)))
        _VALIDATORS[key] = hit
    return hit
