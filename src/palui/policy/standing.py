"""Standing approvals: the person's answer given in advance (spec §5.9). Pure: no I/O, no clock.

The matrix never changes (spec §3): where it says ``ask``, a standing approval may answer the ask the way the
person would, for the calls its constraints describe. What this module decides:

- **Its context** (:func:`context_of`): ``chat`` (an untainted chat turn), ``tainted chat``, ``job``, or
  ``gateway:NAME`` (a gateway client by name); a webhook turn has none (it has no tools).
- **Whether one may be made** (:func:`refusal_to_make`): never for a webhook; a destructive or unknown tool only in
  a chat context, and only with the person's explicit confirmation.
- **Its constraints** (:func:`constraints_for`), made from the call the person saw: every argument pinned to its
  exact value; the person may widen an argument they saw **unmarked** (spec §4.6) to one of a list, a path
  prefix, or any value. An argument that carried a mark is never widened.
- **Whether it answers a call** (:func:`answers`): the call's arguments are exactly the rule's (the same names),
  each within its constraint, the call carries **no** mark (a whole value or a span, in any argument), and a Rule
  of Two ask (spec §4.5) is answered only by a rule that pins every argument carrying an address (an ask for
  private text going out: every argument).

The caller (:mod:`palui.store.standing`) checks what needs the database: the binding (the tool's name,
effective class and definition hash), the expiry and the status.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from palui.policy.rule_of_two import hosts
from palui.text.escape import normalize_for_marks
from palui.text.prompts import marked_arguments
from palui.text.strict_json import dumps

#: The contexts a standing approval answers in; ``gateway:NAME`` names a gateway client.
CHAT, TAINTED_CHAT, JOB, GATEWAY = "chat", "tainted chat", "job", "gateway:"
#: The contexts where a destructive or unknown tool may have one (with an explicit confirmation).
CHAT_CONTEXTS = (CHAT, TAINTED_CHAT)
#: The forms of a constraint, as the person writes a widening: ``any``, ``prefix:TEXT``, ``one-of:A,B``.
WIDENINGS = ("any", "prefix:", "one-of:")
#: The most values a ``one-of`` may list, and the most characters of a ``prefix``.
MAX_ONE_OF, MAX_PREFIX = 50, 1000

Constraint = dict[str, Any]  # {"pin": v} | {"one_of": [v, …]} | {"prefix": s} | {"any": True}


def context_of(origin: str, tainted: bool, client: str | None = None) -> str | None:
    """The context a call of ``origin`` answers in: ``chat`` / ``tainted chat``, ``job``, ``gateway:NAME`` (the
    client's name); None for a webhook turn (no tools) or an unknown origin."""
    if origin == "chat":
        return TAINTED_CHAT if tainted else CHAT
    if origin == "job":
        return JOB
    if origin == "gateway" and client:
        return GATEWAY + client
    return None


def refusal_to_make(tool_class: str, context: str | None, confirmed: bool) -> str | None:
    """Why no standing approval may be made for a ``tool_class`` tool in ``context``, or None when it may.
    ``tool_class`` is the effective class (unknown is ``destructive``, spec §2)."""
    if context is None:
        return "a webhook turn has no tools, so nothing is answered in advance there"
    if tool_class == "destructive":
        if context not in CHAT_CONTEXTS:
            return ("a destructive or unknown tool is answered in advance only in a chat, never in a job or for a "
                    "gateway client")
        if not confirmed:
            return ("the tool is destructive or unknown (it deletes or cannot be undone): confirm that you want its "
                    "calls answered in advance (--confirm-destructive, the confirm word, the web page's box)")
    return None


def canonical(value: Any) -> str:
    """JSON text comparing values by value: keys sorted, a whole float as its int (``5`` is ``5.0``), booleans
    kept (``true`` is not ``1``)."""
    return dumps(_by_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _by_value(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _by_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_by_value(v) for v in value]
    return value


def parse_widening(arg: str, text: str, seen: Any) -> Constraint:
    """The constraint a widening's ``text`` gives argument ``arg``, whose value the person saw (``seen``).

    ``any``: any value. ``prefix:TEXT``: a string that starts with TEXT at a path boundary (TEXT ends with ``/``, or
    the rest starts with one) and goes into no ``..`` segment. ``one-of:A,B``: one of the listed values (numbers
    when the value seen is a number), which must list the value seen. Raises ValueError naming the argument."""
    if text == "any":
        return {"any": True}
    if text.startswith("prefix:"):
        prefix = text.removeprefix("prefix:")
        if not isinstance(seen, str):
            raise ValueError(f"{arg}: a prefix widens a text argument only")
        if not prefix or len(prefix) > MAX_PREFIX:
            raise ValueError(f"{arg}: a prefix holds 1 to {MAX_PREFIX:,} characters")
        if not within_prefix(seen, prefix):
            raise ValueError(f"{arg}: the value you saw does not start with that prefix")
        return {"prefix": prefix}
    if text.startswith("one-of:"):
        items = [i.strip() for i in text.removeprefix("one-of:").split(",")]
        if not all(items) or len(items) > MAX_ONE_OF:
            raise ValueError(f"{arg}: one-of lists 1 to {MAX_ONE_OF} values, separated by commas")
        values: list[Any] = items
        if isinstance(seen, int | float) and not isinstance(seen, bool):
            values = [_number(arg, i) for i in items]
        elif not isinstance(seen, str):
            raise ValueError(f"{arg}: one-of widens a text or number argument only")
        if canonical(seen) not in {canonical(v) for v in values}:
            raise ValueError(f"{arg}: one-of must list the value you saw")
        return {"one_of": values}
    raise ValueError(f"{arg}: a widening is any, prefix:TEXT or one-of:A,B")


def _number(arg: str, text: str) -> int | float:
    """A number of a ``one-of`` for a number argument (``7``, ``7.5``, ``-3``). Raises ValueError."""
    if re.fullmatch(r"-?\d{1,16}", text):
        return int(text)
    if re.fullmatch(r"-?\d{1,16}\.\d{1,16}", text) and math.isfinite(float(text)):
        return float(text)
    raise ValueError(f"{arg}: one-of lists numbers for a number argument")


def constraints_for(args: Any, widen: Mapping[str, str], marks: Sequence[Mapping[str, Any]]) -> dict[str, Constraint]:
    """The constraints of a standing approval made from a call with ``args`` the person saw with ``marks``: every
    argument pinned to its exact value, except those named in ``widen`` (argument → widening text,
    :func:`parse_widening`). Raises ValueError: ``args`` is not an object, a widening names an argument the call
    does not have, or one that carried a mark (it cannot be widened, spec §5.9)."""
    if not isinstance(args, dict):
        raise ValueError("the call's arguments are not an object")
    marked = marked_arguments(marks)
    out: dict[str, Constraint] = {k: {"pin": v} for k, v in args.items()}
    for arg, text in widen.items():
        if arg not in args:
            raise ValueError(f"{arg}: the call has no such argument")
        if arg in marked:
            raise ValueError(f"{arg}: it carried a mark of untrusted content, so it stays pinned to what you saw")
        out[arg] = parse_widening(arg, text, args[arg])
    return out


def within_prefix(value: str, prefix: str) -> bool:
    """Whether ``value`` starts with ``prefix`` at a path boundary and goes into no ``..`` segment below it."""
    if not value.startswith(prefix):
        return False
    rest = value[len(prefix):]
    if rest and not prefix.endswith(("/", "\\")) and not rest.startswith(("/", "\\")):
        return False
    # a ".." segment climbs out of the prefix, spelt plainly or percent-encoded (a server decodes it)
    parts = re.split(r"[/\\]", rest.lower().replace("%2e", ".").replace("%2f", "/").replace("%5c", "/"))
    return ".." not in parts and "\0" not in rest


def within(constraint: Constraint, value: Any) -> bool:
    """Whether ``value`` is within one argument's ``constraint``."""
    if constraint.get("any") is True:
        return True
    if "pin" in constraint:
        return canonical(constraint["pin"]) == canonical(value)
    if "one_of" in constraint:
        return canonical(value) in {canonical(v) for v in constraint["one_of"]}
    if "prefix" in constraint:
        return isinstance(value, str) and within_prefix(value, str(constraint["prefix"]))
    return False  # a form this Palui does not know: fail closed


def _address_arguments(args: Mapping[str, Any]) -> set[str]:
    """The arguments whose text carries an address or host (as the Rule of Two reads them, spec §4.5)."""
    out = set()
    for k, v in args.items():
        text = normalize_for_marks(v if isinstance(v, str) else canonical(v))
        if hosts(text):
            out.add(k)
    return out


def answers(constraints: Mapping[str, Constraint], args: Any, marks: Sequence[Mapping[str, Any]],
            rule_of_two: str | None = None) -> str | None:
    """Why a standing approval with ``constraints`` does not answer the call (``args``, its ``marks``), or None when
    it does. ``rule_of_two``: the Rule of Two's reason when that is what asked (spec §4.5)."""
    if marks:
        return "the call carries a mark of untrusted content"
    if not isinstance(args, dict) or set(args) != set(constraints):
        return "the call's arguments are not the ones it names"
    for k, c in constraints.items():
        if not within(c, args[k]):
            return f"{k} is outside it"
    if rule_of_two is not None:
        needed = set(args) if "private stores" in rule_of_two else _address_arguments(args)
        loose = sorted(k for k in needed if "pin" not in constraints[k])
        if loose:
            return f"a Rule of Two ask is answered only by pinning the address argument exactly ({', '.join(loose)})"
    return None


def describe(constraints: Mapping[str, Constraint], limit: int = 80) -> str:
    """The constraints in one line: ``to = 'bob@example.com', body: any, path: prefix '/notes/'`` (values cut at
    ``limit`` characters; the front end escapes the text)."""
    def cut(v: Any) -> str:
        text = v if isinstance(v, str) else canonical(v)
        text = text if len(text) <= limit else text[:limit] + "…"
        return f"'{text}'" if isinstance(v, str) else text

    parts = []
    for k, c in constraints.items():
        if c.get("any") is True:
            parts.append(f"{k}: any")
        elif "prefix" in c:
            parts.append(f"{k}: prefix {cut(c['prefix'])}")
        elif "one_of" in c:
            parts.append(f"{k}: one of {', '.join(cut(v) for v in c['one_of'])}")
        else:
            parts.append(f"{k} = {cut(c.get('pin'))}")
    return ", ".join(parts) or "no arguments"


def widened(constraints: Mapping[str, Constraint]) -> list[str]:
    """The arguments a standing approval does not pin."""
    return [k for k, c in constraints.items() if "pin" not in c]
