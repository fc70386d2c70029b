"""matrix-nio behind a typed boundary, for the Matrix channel (spec §8.3).

nio ships no type information (mypy sees every nio object as ``Any``), so the channel never handles
nio's objects: :class:`MatrixClient` wraps one ``nio.AsyncClient`` and converts each answer here,
once, into the small typed values below (as pydantic-ai converts MCP types at its boundary). A
homeserver's error answer becomes :class:`Refused`; network errors (:data:`NETWORK_ERRORS`) pass
through as they are, for the channel to decide what they mean.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from nio import (
    AsyncClient,
    AsyncClientConfig,
    InviteMemberEvent,
    JoinResponse,
    LoginResponse,
    MegolmEvent,
    ReactionEvent,
    RoomGetEventResponse,
    RoomMessageNotice,
    RoomMessageText,
    RoomSendResponse,
    SyncResponse,
    WhoamiResponse,
)

NETWORK_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


def client_config(max_timeouts: int = 2) -> AsyncClientConfig:
    """nio's config for Palui: no encryption (no olm), Palui stores the sync token itself, and a
    refused connection fails after ``max_timeouts`` tries (nio's default retries forever)."""
    return AsyncClientConfig(encryption_enabled=False, store_sync_tokens=False, max_timeouts=max_timeouts,
                             max_limit_exceeded=0, request_timeout=45)


@dataclass(frozen=True)
class Refused:
    """A homeserver's error answer: its ``errcode`` (``M_LIMIT_EXCEEDED``…), message and, when rate
    limited, the wait in milliseconds; ``text`` is nio's wording (``RoomSendError: M_FORBIDDEN …``)."""

    status_code: str | None
    message: str
    retry_after_ms: int | None
    text: str

    @classmethod
    def of(cls, resp: Any) -> Refused:
        return cls(getattr(resp, "status_code", None), str(getattr(resp, "message", resp)),
                   getattr(resp, "retry_after_ms", None), str(resp))


@dataclass(frozen=True)
class LoggedIn:
    """A password login's result: the account, the new device and its access token."""

    user_id: str
    device_id: str
    access_token: str


@dataclass(frozen=True)
class Account:
    """Whom an access token belongs to (``/account/whoami``)."""

    user_id: str
    device_id: str | None


@dataclass(frozen=True)
class Event:
    """One timeline event as the channel reads it. ``kind`` is ``message`` (``m.text`` or ``m.notice``:
    ``body`` and the raw ``content``), ``reaction`` (``key`` on the event ``reacts_to``), ``encrypted``
    (Megolm: unreadable here) or ``other``."""

    kind: Literal["message", "reaction", "encrypted", "other"]
    event_id: str | None
    sender: str
    body: str = ""
    content: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""
    reacts_to: str = ""


@dataclass(frozen=True)
class JoinedRoom:
    """A joined room in a sync: whether it is encrypted, its other members (joined or invited, without
    this account; empty when the client does not know the room yet) and its new timeline events."""

    room_id: str
    encrypted: bool
    others: frozenset[str]
    events: tuple[Event, ...]


@dataclass(frozen=True)
class Invite:
    """An invitation of this account to ``room_id``; ``inviter`` None when the invite does not say."""

    room_id: str
    inviter: str | None


@dataclass(frozen=True)
class Sync:
    """One ``/sync`` answer: the token of the next one, the invites, the joined rooms' news."""

    next_batch: str
    invites: tuple[Invite, ...]
    joined: tuple[JoinedRoom, ...]


def _event(e: Any) -> Event:
    sender, event_id = str(getattr(e, "sender", "") or ""), getattr(e, "event_id", None)
    if isinstance(e, MegolmEvent):
        return Event("encrypted", event_id, sender)
    if isinstance(e, ReactionEvent):
        return Event("reaction", event_id, sender, key=e.key, reacts_to=e.reacts_to)
    if isinstance(e, (RoomMessageText, RoomMessageNotice)):
        return Event("message", event_id, sender, body=e.body, content=e.source.get("content", {}))
    return Event("other", event_id, sender)


class MatrixClient:
    """One account's connection to its homeserver (see the module docstring).

    Args:
        homeserver: the homeserver's URL.
        user: the account's user id (``@palui:example.org``).
        device_id: the stored device, when there is one (nio's default is ``""``).
    """

    def __init__(self, homeserver: str, user: str, device_id: str | None = "") -> None:
        self.user = user
        self._nio = AsyncClient(homeserver, user, device_id=device_id, config=client_config())

    def restore_login(self, device_id: str, token: str) -> None:
        """Use a stored device and access token (no request)."""
        self._nio.restore_login(self.user, device_id, token)

    def use_token(self, token: str) -> None:
        """Send ``token`` with the next requests (to check it with :meth:`whoami`)."""
        self._nio.access_token = token

    async def login(self, password: str, device_name: str) -> LoggedIn | Refused:
        resp = await self._nio.login(password, device_name=device_name)
        if isinstance(resp, LoginResponse):
            return LoggedIn(resp.user_id, resp.device_id, resp.access_token)
        return Refused.of(resp)

    async def whoami(self) -> Account | Refused:
        resp = await self._nio.whoami()
        if isinstance(resp, WhoamiResponse):
            return Account(resp.user_id, resp.device_id)
        return Refused.of(resp)

    async def sync(self, timeout_ms: int, since: str | None, full_state: bool) -> Sync | Refused:
        """One ``/sync``; the client's room state (encryption, members) is read right after it, as nio
        updates it only from syncs."""
        resp = await self._nio.sync(timeout=timeout_ms, since=since, full_state=full_state)
        if not isinstance(resp, SyncResponse):
            return Refused.of(resp)
        invites = tuple(
            Invite(room_id, next((e.sender for e in invite.invite_state if isinstance(e, InviteMemberEvent)
                                  and e.state_key == self.user and e.membership == "invite"), None))
            for room_id, invite in resp.rooms.invite.items())
        joined = []
        for room_id, info in resp.rooms.join.items():
            room = self._nio.rooms.get(room_id)
            others = frozenset({*room.users, *room.invited_users} - {self.user}) if room is not None else frozenset()
            joined.append(JoinedRoom(room_id, bool(room is not None and room.encrypted), others,
                                     tuple(_event(e) for e in info.timeline.events)))
        return Sync(resp.next_batch, invites, tuple(joined))

    async def send(self, room_id: str, content: dict[str, Any], tx_id: str | None = None) -> str | Refused:
        """Send an ``m.room.message`` event; its event id. The same ``tx_id`` sent again by this device is the
        same event (the homeserver answers with the first one's id): a send retried after a crash is no
        duplicate."""
        resp = await self._nio.room_send(room_id, "m.room.message", content, tx_id=tx_id)
        if isinstance(resp, RoomSendResponse):
            return str(resp.event_id)
        return Refused.of(resp)

    async def event_text(self, room_id: str, event_id: str) -> tuple[str, str] | None:
        """``(sender, body)`` of one event (body ``""`` when it has none), or None when it cannot be read."""
        got = await self._nio.room_get_event(room_id, event_id)
        if isinstance(got, RoomGetEventResponse):
            return got.event.sender, getattr(got.event, "body", "") or ""
        return None

    async def join(self, room_id: str) -> bool:
        """Join a room this account is invited to; False when the homeserver refused (an invite withdrawn)."""
        return isinstance(await self._nio.join(room_id), JoinResponse)

    async def leave(self, room_id: str) -> None:
        await self._nio.room_leave(room_id)

    async def typing(self, room_id: str, timeout_ms: int) -> None:
        await self._nio.room_typing(room_id, True, timeout=timeout_ms)

    async def close(self) -> None:
        await self._nio.close()
