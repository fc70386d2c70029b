"""What each JSON route takes, as pydantic models: the one declaration of the API's input (spec §8.1).

A route's query string is a :class:`Query` (values arrive as text and are converted: ``limit=5`` is the
number 5, ``all=1`` true), its JSON body a :class:`Body` (``strict``: ``"model": 5`` is not a string and
``"stream": "yes"`` not a boolean; a key the route does not take is refused). Every number has a range and
every string a length, so nothing unbounded reaches the service; the OpenAPI document
(:mod:`palui.server.openapi`) is generated from these same models, and a refusal names the field
(:func:`palui.server.api.validation_answer`). The web page's forms use them too (:mod:`palui.web.forms`).

Bounds: a message at most :data:`MESSAGE_CHARS` characters (the top of the ``limits.message_chars`` setting's
range: the service refuses one longer than the setting, saying its length and the limit, spec §8.1); ids and
names at most :data:`ID_CHARS`; a denial's reason at most 1,000 characters (spec §5.5).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator, model_validator

from palui.config_rules import Text
from palui.config_schema import RANGES

#: The longest message a route's schema takes, in characters: the top of ``limits.message_chars``'s range. The
#: setting itself (default 100,000) is checked by the service's one door for starting a turn.
MESSAGE_CHARS = RANGES["limits.message_chars"][0]
#: The longest id or name a route takes in a query or body (a turn, a conversation, a connector, a channel).
ID_CHARS = 200
#: The longest model string (``provider:name`` or ``script:PATH``).
MODEL_CHARS = 1_000
#: The longest denial reason (spec §5.5).
REASON_CHARS = 1_000
#: The longest wait of ``GET /api/approvals/{id}/wait``, in seconds.
WAIT_SECONDS = 60.0
#: The longest body a route takes, in bytes (413 over it), unless it declares another: 1 MiB, as the web page's
#: forms. A body is read only up to its limit (spec §8.1).
BODY_BYTES = 1_048_576
#: The longest body of a route that takes a message: any message the schema takes, however its characters
#: are written (an escaped astral character is 12 bytes), and the rest of the body.
MESSAGE_BODY_BYTES = 12 * MESSAGE_CHARS + BODY_BYTES


Id = Annotated[str, StringConstraints(min_length=1, max_length=ID_CHARS)]
Message = Annotated[str, StringConstraints(min_length=1, max_length=MESSAGE_CHARS, pattern=r"\S")]
#: Where a conversation is started: a short lower-case word (the service's own check, spec §8.2).
Channel = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,39}$")]


class Query(BaseModel):
    """A query string: text values converted to the declared types; a parameter the route does not take is
    refused, as a body key is (a route without a query model takes none: this model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Body(BaseModel):
    """A JSON body: no conversion (``strict``) and no key the route does not take (``extra="forbid"``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# -- queries ---------------------------------------------------------------------------------------------------


class InboxQuery(Query):
    limit: int = Field(100, ge=1, le=1_000, description="the newest messages to return")


class AuditQuery(Query):
    turn: Id | None = Field(None, description="only this turn's rows")
    limit: int = Field(500, ge=1, le=20_000, description="the newest rows to return")


class RulesQuery(Query):
    status: Literal["active", "suspended", "expired", "removed"] | None = Field(
        None, description="only those of this status (default: every one but the removed)")


class ToolsQuery(Query):
    connector: Id | None = Field(None, description="only this connector's tools")


class ConversationsQuery(Query):
    limit: int = Field(50, ge=1, le=1_000, description="the newest conversations to return")
    channel: Id | None = Field(None, description="only those started on this channel")


class FollowQuery(Query):
    after: int = Field(0, ge=0, le=1_000_000, description="the index (seq) of the first event to send")


class ListQuery(Query):
    all: bool = Field(False, description="every one, not only those pending")


class ApprovalsQuery(ListQuery):
    limit: int = Field(100, ge=1, le=1_000, description="with all: the newest approvals to return (a page)")
    before: Id | None = Field(None, description="with all: the page after this approval (the last id of a page)")

    @field_validator("limit", "before")
    @classmethod
    def _pages_need_all(cls, value: Any, info: ValidationInfo) -> Any:
        # The pending list is whole: a page asked of it would be silently ignored (``all`` is read first).
        if not info.data.get("all"):
            raise ValueError(f"{info.field_name} pages the list of every approval: add all=1")
        return value


class WaitQuery(Query):
    timeout: float = Field(25.0, ge=0, le=WAIT_SECONDS, description="seconds to wait at most")


# -- bodies ----------------------------------------------------------------------------------------------------


class Streamed(Body):
    stream: bool = Field(False, description="answer with the turn's events as NDJSON lines, the result last")


class StartTurn(Streamed):
    message: Message = Field(description="the person's words (not only white space)")
    conversation: Id | None = Field(None, description="an existing conversation; a new one when left out")
    model: Annotated[str, StringConstraints(min_length=1, max_length=MODEL_CHARS), Text(secret=True)] | None = Field(
        None, description="a model string (no control characters: a script: path); the service's model when left "
                          "out")
    channel: Channel | None = Field(None, description="where the conversation is started (default api)")
    start: bool = Field(True, description="false: store the turn only; the service starts it when its turn comes")


class NewConversationBody(Body):
    channel: Channel | None = Field(None, description="where the conversation is started (default api)")


class StopBody(Body):
    """One of: a ``conversation``, a ``turn``, or ``"all": true``."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": ["conversation"], "properties": {"conversation": {"type": "string"}}},
        {"required": ["turn"], "properties": {"turn": {"type": "string"}}},
        {"required": ["all"], "properties": {"all": {"const": True}}},
    ]})

    conversation: Id | None = Field(None, description="stop this conversation's turns")
    turn: Id | None = Field(None, description="stop this turn")
    all: bool = Field(False, description="the emergency brake: every turn, and the jobs paused (spec §5.7)")

    @model_validator(mode="after")
    def _says_what(self) -> StopBody:
        if not (self.conversation or self.turn or self.all):
            raise ValueError("stop needs a conversation, a turn, or all: true")
        return self


class ClassBody(Body):
    class_: Literal["read", "write", "destructive"] = Field(alias="class", description="the person's class")


class ReviewBody(Body):
    fingerprint: Annotated[str, StringConstraints(max_length=ID_CHARS)] | None = Field(
        None, description="the pending change accepted, as shown by the tool's details")


class ConnectorBody(Body):
    connector: Id | None = Field(None, description="only this connector's tools")


class Answer(Streamed):
    wait: bool = Field(True, description="false: answer, resume the turn here and return at once")


#: The longest widening of one argument (``prefix:TEXT``, ``one-of:A,B``), and the most arguments widened.
WIDEN_CHARS, WIDEN_ARGS = 2_000, 100
Widening = Annotated[str, StringConstraints(min_length=1, max_length=WIDEN_CHARS)]


class AlwaysBody(Body):
    """"Approve, and from now on the same" (spec §5.9): a standing approval made from this answer."""

    widen: dict[Id, Widening] = Field(default_factory=dict, max_length=WIDEN_ARGS,
                                      description="arguments widened: any, prefix:TEXT or one-of:A,B (the rest pinned)")
    confirm: bool = Field(False, description="a destructive or unknown tool: confirmed (chat only)")


class ApproveBody(Answer):
    via: Literal["api", "cli"] = Field("api", description="the front end that answers (recorded)")


class ApproveAlwaysBody(ApproveBody):
    always: AlwaysBody | None = Field(None, description="approve, and from now on the same (spec §5.9)")


class DenyBody(ApproveBody):
    reason: Annotated[str, StringConstraints(max_length=REASON_CHARS)] | None = Field(
        None, description="why: told to the model as the denial")
    stop: bool = Field(False, description="deny and stop: the turn's tool use ends (spec §5.10)")


class ElicitationAnswerBody(Answer):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = Field(None, description="field: value, checked against the server's schema")
    via: Literal["api", "cli", "web"] = Field("api", description="the front end that answers (recorded)")


class RunJobBody(Streamed):
    pass
