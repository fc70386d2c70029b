"""Jobs, webhooks and chat channels (spec §8.3-§8.5)."""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from palui.types import JSON


class Job(TypedDict):
    """A job as ``palui jobs list --json`` shows it (spec §8.4). Times ISO 8601 in the job's zone ``tz``;
    ``token_cap`` the effective daily cap (``own_token_cap`` when the job set it), ``tokens_today`` used;
    ``last_status`` its last turn's status; ``postponed_by`` the cap that postponed its run; ``connectors``
    the connectors it is limited to (None: all)."""

    id: str
    name: str
    cron: str
    prompt: str
    token_cap: int
    own_token_cap: bool
    tz: str
    next_run: str | None
    last_run: str | None
    last_turn: str | None
    last_status: str | None
    postponed_by: str | None
    tokens_today: int
    created_at: str | None
    connectors: list[str] | None


class Webhook(TypedDict):
    """A webhook as ``palui webhooks list --json`` shows it (spec §8.5; never its secret): where it is
    reached, deliveries in the last 24 hours, the last one (ISO times)."""

    id: str
    name: str
    url: str
    created_at: str | None
    deliveries_24h: int
    last_delivery: str | None


class WebhookCreated(TypedDict):
    """A new webhook with its secret, shown only here (spec §8.5): ``whsec`` is the same secret as Standard
    Webhooks senders take it."""

    id: str
    name: str
    url: str
    secret: str
    whsec: str


class Named(TypedDict):
    """What was removed: a webhook's id and name."""

    id: str
    name: str


class DeliveryAccepted(TypedDict):
    """A webhook delivery accepted (spec §8.5): the queued turn it became."""

    status: Literal["accepted"]
    turn: str


class DeliveryDuplicate(TypedDict):
    """A webhook delivery seen within 24 hours (spec §8.5): the turn the first one became, if it became one."""

    status: Literal["duplicate"]
    turn: str | None


#: A webhook delivery checked by ``WebhooksPart.receive``, told by its ``status``.
Delivery = DeliveryAccepted | DeliveryDuplicate


class DeliveryReceipt(DeliveryAccepted):
    """``POST /hooks/{id}``'s 202 answer: the accepted delivery, whether its turn is ``running`` or ``queued``
    now, and the cap that holds it (``queued_reason``, spec §6.6)."""

    turn_status: Literal["running", "queued"]
    queued_reason: NotRequired[str]


# -- chat channels (spec §8.3) -----------------------------------------------------------------------------------


class ChatChannel(TypedDict):
    """A chat channel as ``palui channels list --json`` shows it: its ``state`` (unpaired, connected,
    ``error: …``) as the service running it last set it, at ``state_at``; the ``person`` paired with it,
    whether a pairing code is live, its last delivery failure (redacted), the deliveries ``waiting`` in its
    outbox; its settings (``config``, no secret). Times ISO 8601 UTC."""

    name: str
    kind: str
    state: str
    person: str | None
    person_id: str | None
    person_chat: str | None
    paired_at: str | None
    allow_groups: bool
    config: JSON
    pairing: bool
    last_failure: str | None
    last_failure_at: str | None
    state_at: str | None
    waiting: int


class PairCode(TypedDict):
    """A one-time pairing code (spec §8.3), valid until ``expires_at`` (ISO time); who it would replace."""

    code: str
    expires_at: str | None
    paired_with: str | None


class SentMessage(TypedDict):
    """A message a channel sent (a ``channel_messages`` row): what it was (``kind``), what it is about, the
    approval's ``fingerprint`` as shown and its ``state`` (sent, shown: buttons live, closed);
    ``created_at`` epoch seconds."""

    id: int
    channel: str
    chat_id: str
    ref: str
    kind: str
    turn_id: str | None
    conversation_id: str | None
    approval_id: str | None
    fingerprint: str | None
    state: str
    created_at: float


class ShownApproval(TypedDict):
    """An approval message whose buttons are still live, to edit when it is answered elsewhere (the message
    of ``approval_id``: only approval messages are shown with live buttons)."""

    id: int
    chat_id: str
    ref: str
    approval_id: str
    fingerprint: str | None


class MailAnswerAddress(TypedDict):
    """An approval's answer address on the email channel (spec §8.3): the approval and its ``fingerprint`` as
    the mail showed it, and when a reply spent it (``used_at`` epoch seconds, None while unused)."""

    approval_id: str
    fingerprint: str
    used_at: float | None


class MailThread(TypedDict):
    """The person's latest mail on an email channel's chat: Palui's replies thread under its ``message_id``."""

    message_id: str
    refs: list[str]
    subject: str


class OutboxPart(TypedDict):
    """One message of an outbox item (spec §8.3), in sending order ``n``: what it is (``kind``: answer,
    approval, approval-args, reply, a notice's kind), its ``text`` as the channel rendered it, its stable
    random ``key`` (Matrix's transaction id), the approval whose buttons it carries and their
    ``fingerprint``; ``tried`` while a send may have reached the platform, ``ref`` once it did."""

    id: int
    n: int
    kind: str
    text: str
    key: str
    approval_id: str | None
    fingerprint: str | None
    tried: bool
    ref: str | None


class OutboxItem(TypedDict):
    """A delivery to one chat of a channel, from its durable outbox (spec §8.3): ``kind`` answer / approval /
    edit / reply or a notice's kind, its ``subject`` (the answer's turn, the approval asked or edited), the
    ``text`` of a notice or reply, the message an edit replaces (``target_ref``), ``state`` pending / sent /
    failed / dropped and why (``error``), ``created_at`` epoch seconds, and its ``parts`` once rendered."""

    id: int
    channel: str
    chat_id: str
    kind: str
    subject: str | None
    text: str | None
    target_ref: str | None
    turn_id: str | None
    conversation_id: str | None
    state: str
    error: str | None
    created_at: float
    parts: list[OutboxPart]


class RenderedPart(TypedDict):
    """A message a channel rendered an outbox item into (what :meth:`OutboxPart.render` takes): its
    ``kind`` and ``text``, and for the message with an approval's buttons the approval and its fingerprint."""

    kind: str
    text: str
    approval_id: NotRequired[str]
    fingerprint: NotRequired[str]
