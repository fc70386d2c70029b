"""The person's answers as results: approvals (spec §5) and a server's questions (spec §7.8)."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict

from palui.types import JSON


class UntrustedArg(TypedDict):
    """An argument value of an asked call that appears in untrusted content (spec §4.6): ``path`` into the
    arguments (``text``, ``to.0``), the ``value`` there (a string: numbers as their JSON text), the longest
    ``match`` found in the content, the ``spans`` of the value found there (``[value]`` when found whole;
    absent from marks stored before parts were marked), its ``source``."""

    path: str
    value: Any
    match: str
    spans: NotRequired[list[str]]
    source: str


#: A call's class and where it came from (spec §2): ``class`` is read / write / destructive, ``class_source``
#: user / builtin / hints / unknown.
ClassFields = TypedDict("ClassFields", {"class": str, "class_source": str})


class TurnApproval(ClassFields):
    """An approval as stored (spec §5.1), as a turn's result lists it (``pending_approvals``).

    ``status`` pending / approved / denied / expired / cancelled (spec §11); ``args`` the exact arguments
    asked about and ``args_hash`` their SHA-256 (canonical JSON); ``created_at``, ``expires_at`` and
    ``answered_at`` ISO times; ``answered_via`` the front end or channel that answered (``cli``, ``web``,
    ``api``, a channel's name), ``cancel_reason`` why it was cancelled, ``deny_reason`` the person's words
    given with a denial; ``used`` once the approved call ran (spec §5.4); ``rule`` the standing approval that
    answered it in advance (``answered_via`` ``rule``, spec §5.9), ``rule_made`` the one made from this answer
    ("approve, and from now on the same"); ``stop`` a denial answered "deny and stop" (spec §5.10).
    """

    id: str
    turn: str
    origin: str
    tool: str
    args: JSON
    reason: str
    status: str
    created_at: str
    expires_at: str
    untrusted_args: list[UntrustedArg]
    tool_call_id: str
    args_hash: str
    used: bool
    answered_via: str | None
    cancel_reason: str | None
    answered_at: str | None
    deny_reason: str | None
    rule: str | None
    rule_made: str | None
    stop: bool


class Approval(TurnApproval):
    """An approval as ``ApprovalsPart.get`` / ``list`` / ``answer`` return it: a
    :class:`TurnApproval` with its turn's ``conversation``."""

    conversation: str | None


class TurnElicitation(TypedDict):
    """A question an MCP server asked the person (spec §7.8), as a turn's result lists it.

    ``era`` ``input_required`` (the call paused, the turn resumes with the answer) or ``in_call`` (asked
    inside an open call); ``round`` counts the call's rounds from 1; ``mode`` ``form`` or ``url``;
    ``message``, ``schema`` and ``url`` are the server's own words (shown escaped); ``fields`` the form's
    field names; ``status`` pending / accepted / declined / cancelled / expired; ``action`` what the server
    is (or will be) sent, None while pending; ``sent`` once it was; times ISO 8601 UTC.
    """

    id: str
    turn: str
    tool_call_id: str
    tool: str
    connector: str
    era: str
    round: int
    key: str
    mode: str
    message: str
    schema: JSON | None
    fields: list[str]
    url: str | None
    url_host: str | None
    elicitation_ref: str | None
    origin: str
    status: str
    action: str | None
    reason: str | None
    answered_via: str | None
    sent: bool
    created_at: str | None
    expires_at: str | None
    answered_at: str | None


class Elicitation(TurnElicitation):
    """A server's question as ``ElicitationsPart.get`` / ``list`` / ``answer`` return it:
    a :class:`TurnElicitation` with its turn's ``conversation``."""

    conversation: str | None


class StandingApproval(TypedDict):
    """A standing approval (spec §5.9): the person's answer given in advance to the asks its constraints describe.

    ``id`` ``r-…``; ``tool`` the model-visible name it is bound to, ``connector`` its connector, ``tool_class`` the
    effective class and ``definition_hash`` the definition it was made under; ``context`` ``chat``, ``tainted
    chat``, ``job`` or ``gateway:NAME``; ``constraints`` per argument: ``{"pin": value}``, ``{"one_of": [..]}``,
    ``{"prefix": text}`` or ``{"any": true}``, ``described`` the same in one line and ``widened`` the arguments not
    pinned; ``confirmed`` a destructive or unknown tool the person confirmed; ``status`` active / suspended / expired /
    removed and ``status_reason`` why; ``made_from`` the approval it was made from and ``made_via`` where (``cli``,
    ``web``, ``api``, a channel's name); ``uses`` the asks it answered, ``last_used_at`` the last; times ISO 8601 UTC.
    """

    id: str
    tool: str
    connector: str
    tool_class: str
    definition_hash: str
    context: str
    constraints: dict[str, Any]
    described: str
    widened: list[str]
    confirmed: bool
    status: str
    status_reason: str | None
    made_from: str | None
    made_via: str
    created_at: str
    expires_at: str
    changed_at: str
    uses: int
    last_used_at: str | None
