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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from palui.connectors.registry import canonical_json
from palui.types import CallState

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart

__all__ = ["CallState", "Outcome", "PendingCall", "QuestionRound", "args_hash", "from_part", "from_stored", "outcome"]


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
    (else ``failed`` when ``is_error``, ``success`` otherwise)."""

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


def from_part(p: ToolCallPart) -> PendingCall:
    """The held call for one tool call of a model response (``todo``); arguments that are not a JSON
    object are kept as ``{}`` with ``bad_args`` saying why (the call is answered with that error)."""
    bad: str | None
    try:
        args = p.args_as_dict()
        bad = None if isinstance(args, dict) else "arguments must be a JSON object"
    except (ValueError, TypeError) as e:
        args, bad = {}, f"arguments are not valid JSON: {e}"
    return {"id": p.tool_call_id, "tool": p.tool_name, "args": args, "state": CallState.TODO, "bad_args": bad}


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
    """SHA-256 of the canonical JSON of a call's arguments."""
    return hashlib.sha256(canonical_json(args).encode()).hexdigest()
