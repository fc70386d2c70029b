"""A held tool call: the calls of one model response not yet answered, decided in order (spec §4, §5).

A turn keeps them in ``Turn.pending`` and stores them as the JSON list ``turns.pending_json``: each
call is a :class:`PendingCall`, a dict whose keys and values are exactly what every earlier Palui
stored, so a turn paused by an earlier version resumes. Its ``state`` (:class:`palui.types.CallState`,
a shared word: the service reads it too) moves

    todo ──► asked ──► sent ──► done   approved, decided again and sent (spec §5)
      │        └──────────────► done   denied, expired, cancelled: never sent
      ├──────────────► sent ──► done   run
      │                 └──► eliciting ──► sent …, or done   a 2026-07-28 server asked the person (spec §7)
      └──────────────► done            refused, bad arguments, a loop, the time budget: never sent

A call found ``sent`` when a turn resumes was in flight when its process ended: it is never sent again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from palui.connectors.registry import canonical_json
from palui.policy.input_schema import json_problem
from palui.text.strict_json import finite
from palui.types import CallState

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart

__all__ = ["CallState", "Outcome", "PendingCall", "QuestionRound", "args_hash", "from_part", "from_stored", "outcome",
           "read_call"]


#: What a done call's model provider is told about it (pydantic-ai's ``ToolReturnPart.outcome``).
Outcome = Literal["success", "failed", "denied"]


class QuestionRound(TypedDict):
    """A call whose server asked the person (MCP 2026-07-28 ``input_required``): the round number, how
    many questions its rounds asked so far, the server's opaque ``request_state``, the ids of this round's
    stored questions (:mod:`palui.runner.elicitations`), and the verdict and reason the call was sent with."""

    round: int
    asked: int
    request_state: str | None
    ids: list[str]
    verdict: str
    reason: str


class PendingCall(TypedDict):
    """One held call as stored. ``args`` are the model's arguments (a JSON object unless ``bad_args``
    says why not); ``outcome`` (``failed``, ``denied``) overrides what the model's provider is told
    (else ``failed`` when ``is_error``, ``success`` otherwise). ``wire`` is a gateway call's result as its
    server sent it, held only until the session answers the client (never stored)."""

    id: str
    tool: str
    args: Any
    state: CallState
    bad_args: str | None
    result: NotRequired[str]
    is_error: NotRequired[bool]
    outcome: NotRequired[Outcome]
    approval: NotRequired[str]
    reason: NotRequired[str]
    elicit: NotRequired[QuestionRound]
    wire: NotRequired[dict[str, Any]]


def read_call(call_id: str, tool: str, args: Any, problem: str | None = None) -> PendingCall:
    """A call as a door reads it (``todo``): arguments strict JSON cannot carry (not an object, ``NaN``, a lone
    surrogate, too deep: :func:`palui.policy.input_schema.json_problem`), or ``problem`` found while parsing
    them, are kept as ``{}`` with ``bad_args`` saying why, so nothing stores them; the call is refused at its
    argument step (:mod:`palui.runner.governed_call`)."""
    bad = problem or json_problem(args)
    return {"id": call_id, "tool": tool, "args": {} if bad else args, "state": CallState.TODO, "bad_args": bad}


def from_part(p: ToolCallPart) -> PendingCall:
    """The held call for one tool call of a model response (:func:`read_call`). A provider's arguments arrive
    as a JSON string: one that is not valid JSON, or not an object, is a ``bad_args`` call too."""
    try:
        args: Any = p.args_as_dict(raise_if_invalid=True)
    except AssertionError:  # the model library's check that the JSON is an object
        return read_call(p.tool_call_id, p.tool_name, {}, "the arguments must be a JSON object")
    except (ValueError, TypeError, RecursionError) as e:
        return read_call(p.tool_call_id, p.tool_name, {}, f"the arguments are not valid JSON ({str(e)[:120]})")
    return read_call(p.tool_call_id, p.tool_name, args)


def keep_storable(p: ToolCallPart) -> None:
    """Keep a model's call in the history as it came, in a form the history can store (spec §3.3: the model's own
    message stays and is answered with the error). Arguments parsed into an object strict JSON cannot carry (a lone
    surrogate, which no JSON encoder writes; ``NaN``, which the model library would store as ``null``) are kept
    as the JSON text of that object instead, escaped (a provider that sends its arguments as a string keeps
    them so anyway)."""
    if isinstance(p.args, dict) and json_problem(p.args) is not None:
        try:
            p.args = json.dumps(p.args, ensure_ascii=True, allow_nan=True)  # the model's text, not stored JSON
        except (ValueError, RecursionError):
            p.args = "{}"


def from_stored(calls: list[Mapping[str, Any]]) -> list[PendingCall]:
    """The held calls of ``pending_json`` (as :func:`json.loads` gives them), written by this Palui or an
    earlier one: the same dicts with ``state`` as a :class:`CallState`. Raises ValueError for a state
    word no Palui wrote."""
    return [cast(PendingCall, {**c, "state": CallState(c["state"])}) for c in calls]


def outcome(call: PendingCall) -> Outcome:
    """What a done call's provider is told (Anthropic's ``is_error``) and what the error streak counts:
    ``success``, ``failed`` or ``denied``."""
    return call.get("outcome") or ("failed" if call.get("is_error") else "success")


def args_hash(args: Any) -> str:
    """SHA-256 of the canonical JSON of a call's arguments. A non-finite number (which no governed call
    carries past its argument check: an approval an earlier Palui stored, a refused call's loop count) is
    hashed as its string (:func:`palui.text.strict_json.finite`), a lone surrogate as its own code (UTF-8
    "surrogatepass"), and arguments nested too deep to serialise by their type alone: the hash is a key (of an
    approval, of the loop rules), and a call refused by its argument check still needs one."""
    try:
        text = canonical_json(finite(args))
    except RecursionError:
        text = f"too deeply nested {type(args).__name__}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
