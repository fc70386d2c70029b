"""What the JSON API answers beyond the service's own results (spec §8.1): the health check, a new
conversation's id, the turns stopped, and every refusal."""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict


class Health(TypedDict):
    """``GET /api/health`` (public: says only "a Palui service, this pid", so a client can check before it
    sends the token)."""

    ok: bool
    service: Literal["palui"]
    pid: int


class NewConversation(TypedDict):
    """``POST /api/conversations``: the new conversation's id (``c-…``)."""

    conversation: str


class Stopped(TypedDict):
    """``POST /api/stop`` for a conversation or a turn: the ids of the turns acted on (spec §5.7)."""

    stopped: list[str]


class ErrorAnswer(TypedDict):
    """Every refusal of the JSON API (400, 401, 403, 404, 409, 413, 429, 500): ``error`` one line for the
    person; ``kind`` ``usage`` (bad input: the CLI exits 2, spec §11) or ``error``; ``field`` the input
    that was refused (``limit``, ``message``, ``content.party_size``) when a declared input was; ``id`` an
    unexpected error's id, logged with its traceback in ``logs/palui.log`` (500 only)."""

    error: str
    kind: NotRequired[Literal["usage", "error"]]
    field: NotRequired[str]
    id: NotRequired[str]
