"""The Matrix channel (spec §8.3): an account on any homeserver, through matrix-nio (no e2e extra).

``palui channels add matrix`` logs in once with the password and stores the access token and the
device id (never the password). The service then syncs with the stored ``since`` token
(:meth:`ChannelUpdatesPart.cursor`): the timeline of the very first sync is history and is not
answered; every later timeline event is handled once (its event id is recorded in the same
transaction as its work) and the token is stored after the whole batch.

- **Invites** are joined only while a pairing code is live, or from the person once paired; an invite
  that came first waits (``channel_invites``) and is joined as soon as a code is made.
- **Whose words.** A reply (``m.in_reply_to``) carries a quote fallback (``> <@x> …`` lines)
  that is stripped from the person's words; the replied-to event is fetched and quoted — trusted
  only when the person wrote it, skipped when it is Palui's answer in this conversation. In a
  room with other members (only when the person allowed groups), their messages are untrusted
  context. Forwards in Matrix are plain copies: they look like the person's own words.
- **Approvals** are answered with a reaction ✅ / ❌ (with or without U+FE0F) on the approval
  message, or a reply ``/approve`` / ``/deny [reason]`` to it (the id may be left out).
- **Encrypted rooms** cannot be read (no olm here): Palui sends one unencrypted notice, leaves,
  and the state says ``error: encrypted room`` until the person writes in an unencrypted room.

Bodies are plain text (``m.text``; no ``formatted_body``, so nothing can break markup; an empty
``m.mentions``, so no text in them notifies anyone: Matrix 1.7's intentional mentions), split on
line boundaries at 32 KiB of UTF-8. Edits are sent as ``m.replace`` events. Every event is sent with
the outbox part's stable transaction id, kept for the part's life (after a crash, a timeout, or a failure
nio's own retries ended in), so one sent again is the same event; an
unreachable homeserver is tried again every few seconds (receiving resumes within 5 s of its answer).
nio is reached only through :mod:`palui.channels.matrix_client`, which converts its untyped objects
into typed values.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from palui.channels import check_matrix_user
from palui.channels.base import Channel, Inbound, Retry
from palui.channels.matrix_client import NETWORK_ERRORS, Event, MatrixClient, Refused, Sync
from palui.channels.platform import Backoff
from palui.channels.redaction import Redactor
from palui.channels.text import (
    MATRIX_BODY_LIMIT,
    is_edit,
    reaction_verdict,
    reply_target,
    strip_reply_fallback,
    utf8_len,
)
from palui.errors import PaluiError

if TYPE_CHECKING:
    from palui.results import ChatChannel, OutboxPart
    from palui.service.api import Service

log = logging.getLogger("palui.channels.matrix")
#: Seconds between two syncs while the homeserver is unreachable, at most: receiving resumes within about
#: as long (plus jitter) once it answers again (spec §8.3).
SYNC_BACKOFF_CAP = 3.0
#: Refusals that sending again cannot change; any other refusal (a 5xx, a token refused for now) is retried.
PERMANENT = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_NOT_JSON", "M_TOO_LARGE", "M_INVALID_PARAM",
                       "M_UNKNOWN"})
#: The homeserver's answers to an access token it no longer takes (logged out, the device deleted).
TOKEN_REFUSED = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"})
ENCRYPTED_NOTICE = ("This room is encrypted; Palui cannot read it yet: create the chat with encryption off "
                    "(in Element: start a new direct chat and turn off 'Enable end-to-end encryption').")


def _unreachable(homeserver: str, e: BaseException, redact: Redactor) -> PaluiError:
    return PaluiError(f"the homeserver {homeserver} is unreachable: {redact(type(e).__name__ + ': ' + str(e))}")


async def login(homeserver: str, user: str, password: str, redact: Redactor) -> dict[str, str]:
    """Log in once with a password: ``{"user_id","device_id","access_token"}``. Raises PaluiError
    (wrong password, unreachable homeserver), without the password; UsageError for a user that is not
    ``@local:server``, before any request."""
    client = MatrixClient(homeserver, check_matrix_user(user))
    try:
        resp = await client.login(password, device_name="Palui")
    except NETWORK_ERRORS as e:
        raise _unreachable(homeserver, e, redact) from None
    finally:
        await client.close()
    if isinstance(resp, Refused):
        raise PaluiError(f"Matrix login as {user} failed: {redact(resp.message)} ({resp.status_code})")
    redact.add(resp.access_token)
    return {"user_id": resp.user_id, "device_id": resp.device_id, "access_token": resp.access_token}


async def whoami(homeserver: str, user: str, token: str, redact: Redactor) -> dict[str, str]:
    """Check an access token: ``{"user_id","device_id"}``. Raises PaluiError (UsageError for a user that is
    not ``@local:server``, before any request)."""
    client = MatrixClient(homeserver, check_matrix_user(user))
    client.use_token(token)
    try:
        resp = await client.whoami()
    except NETWORK_ERRORS as e:
        raise _unreachable(homeserver, e, redact) from None
    finally:
        await client.close()
    if isinstance(resp, Refused):
        raise PaluiError(f"the homeserver refused the access token: {redact(resp.message)}")
    if resp.user_id != user:
        raise PaluiError(f"the access token is {resp.user_id}'s, not {user}'s")
    return {"user_id": resp.user_id, "device_id": resp.device_id or ""}


async def test_channel(c: ChatChannel, secret: dict[str, Any], redact: Redactor) -> str:
    """``palui channels test``: whoami, and a test message to the person when paired."""
    cfg = c["config"]
    found = await whoami(cfg["homeserver"], cfg["user_id"], str(secret.get("access_token") or ""), redact)
    out = f"ok: {cfg['homeserver']} answers as {found['user_id']} (device {found['device_id']})"
    if c["person_chat"]:
        client = _restored(cfg, str(secret.get("access_token") or ""))
        try:
            sent = await client.send(c["person_chat"],
                                     {"msgtype": "m.notice", "body": "Palui test message: this channel works."})
        finally:
            await client.close()
        if isinstance(sent, Refused):
            raise PaluiError(f"whoami worked, but sending to the person failed: {redact(sent.text)}")
        return out + f"; a test message was sent to {c['person']}"
    return out + f"; not paired yet (palui channels pair {c['name']})"


def _restored(cfg: dict[str, Any], token: str) -> MatrixClient:
    client = MatrixClient(cfg["homeserver"], cfg["user_id"], device_id=cfg.get("device_id"))
    client.restore_login(cfg.get("device_id") or "", token)
    return client


class MatrixChannel(Channel):
    """A Matrix account run by the service (see the module docstring)."""

    kind = "matrix"
    title = "Matrix"
    text_limit = MATRIX_BODY_LIMIT
    renew_options = "--homeserver URL --user USER --password-file FILE"
    how_to_answer = ("React \u2705 to approve or \u274c to deny, \U0001f501 to approve and from now on the same, "
                     "\U0001f6d1 to deny and stop (or reply /approve, or /deny REASON, to this message; or send "
                     "/approve {id} or /deny {id} REASON).")

    def __init__(self, svc: Service, name: str, redact: Redactor) -> None:
        super().__init__(svc, name, redact)
        self.cfg = svc.channels.get(name)["config"]
        token = str(svc.channels.secrets(name).get("access_token") or "")
        redact.add(token)
        self.client = _restored(self.cfg, token)
        self.me = self.cfg["user_id"]
        self.encrypted = False
        self.poll_ms = int(self.cfg.get("poll_ms", 30_000))

    @staticmethod
    def measure(text: str) -> int:
        return utf8_len(text)

    # -- receiving ------------------------------------------------------------------------------------

    async def run(self) -> None:
        backoff = Backoff(cap=SYNC_BACKOFF_CAP)
        try:
            since = self.svc.channel_updates.cursor(self.name)
            while True:
                try:
                    resp = await self.client.sync(0 if since is None else self.poll_ms, since=since,
                                                  full_state=since is None)
                except NETWORK_ERRORS as e:
                    self.set_state(f"error: the homeserver is unreachable: {type(e).__name__}: {e}")
                    await asyncio.sleep(backoff.next_delay())
                    continue
                if isinstance(resp, Refused):
                    if resp.status_code in TOKEN_REFUSED:
                        self.credentials_refused("the access token")
                    else:
                        self.set_state(f"error: sync failed: {resp.message} ({resp.status_code})")
                    await asyncio.sleep(backoff.next_delay())
                    continue
                backoff.reset()
                await self._batch(resp, history=since is None)
                self.svc.channel_updates.set_cursor(self.name, resp.next_batch)
                since = resp.next_batch
                self._state()
        finally:
            await self.client.close()

    def _state(self) -> None:
        if self.encrypted:
            self.set_state("error: encrypted room")
        else:
            self.set_state("connected" if self.svc.channels.get(self.name)["person_id"] else "unpaired")

    async def _batch(self, resp: Sync, history: bool) -> None:
        ch = self.svc.channels.get(self.name)
        for invite in resp.invites:
            room_id, inviter = invite.room_id, invite.inviter
            if self.svc.channels.pairing_open(self.name) or (ch["person_id"] and inviter == ch["person_id"]):
                await self.client.join(room_id)
                self.svc.channels.drop_invite(self.name, room_id)
                continue
            self.svc.channels.hold_invite(self.name, room_id, inviter)  # joined if a pairing code is made
            if self.svc.channels.note_stranger(self.name, f"invite:{inviter}"):
                log.warning("%s: an invite to %s from %s waits: not the person, no pairing code live (joined "
                            "once one is)", self.name, room_id, inviter)
        for room in resp.joined:
            if room.encrypted:
                await self._encrypted(room.room_id)
                continue
            if history:
                continue  # the first sync's timeline was sent before Palui listened: not answered
            for event in room.events:
                if event.sender == self.me or not event.event_id:
                    continue
                inb = await self._inbound(room.room_id, event, private=len(room.others) <= 1)
                if inb is not None:
                    self.receive(inb)

    async def tick(self) -> None:
        """Every second (the manager's round): while a pairing code is live, join the rooms whose invites
        came before it (the person often invites Palui first, then makes the code)."""
        if not self.svc.channels.pairing_open(self.name):
            return
        for room_id in self.svc.channels.held_invites(self.name):
            try:
                joined = await self.client.join(room_id)
            except NETWORK_ERRORS:
                return  # the homeserver is away: the next round tries again
            self.svc.channels.drop_invite(self.name, room_id)
            log.info("%s: %s the room %s invited to before the pairing code", self.name,
                     "joined" if joined else "could not join", room_id)

    async def _encrypted(self, room_id: str) -> None:
        self.encrypted = True
        if self.svc.channel_updates.mark(self.name, f"notice:{room_id}", "encrypted room"):
            log.warning("%s: room %s is encrypted: told the person, leaving it", self.name, room_id)
            try:
                await self.client.send(room_id, {"msgtype": "m.notice", "body": ENCRYPTED_NOTICE})
            finally:
                await self.client.leave(room_id)

    async def _inbound(self, room_id: str, event: Event, private: bool) -> Inbound | None:
        sender = event.sender
        base: dict[str, Any] = {"key": event.event_id, "chat": room_id, "sender": sender, "sender_name": sender,
                                "private": private}
        if event.kind == "encrypted":
            await self._encrypted(room_id)
            return None
        if event.kind == "reaction":
            verdict = reaction_verdict(event.key)
            if verdict is None:
                return None
            return Inbound(**base, reaction=verdict, target=event.reacts_to)
        if event.kind != "message":
            return None
        content = event.content
        if is_edit(content):
            return Inbound(**base, edit_of=str(content["m.relates_to"].get("event_id") or event.event_id))
        if private and sender == self.svc.channels.get(self.name)["person_id"]:
            self.encrypted = False  # the person writes in an unencrypted room: the channel works again
        target = reply_target(content)
        words = strip_reply_fallback(event.body) if target else event.body
        quoted = []
        if target:
            got = await self.client.event_text(room_id, target)
            if got is not None:
                who, body = got
                person = self.svc.channels.get(self.name)["person_id"]
                q = self.reply_quote(room_id, target, strip_reply_fallback(body), by_palui=who == self.me,
                                     by_person=who == person, author=who)
                if q is not None:
                    quoted.append(q)
        return Inbound(**base, text=words, quoted=quoted, target=target)

    # -- sending ---------------------------------------------------------------------------------------

    async def _send(self, room_id: str, content: dict[str, Any], key: str) -> str:
        try:
            resp = await self.client.send(room_id, content, tx_id=f"palui-{key}")
        except NETWORK_ERRORS as e:
            raise Retry(f"the homeserver is unreachable: {type(e).__name__}", maybe_delivered=True) from None
        if not isinstance(resp, Refused):
            return resp
        if resp.status_code == "M_LIMIT_EXCEEDED":
            wait = (resp.retry_after_ms or 1000) / 1000
            raise Retry(f"rate limited by the homeserver for {wait:.1f} s", wait)
        if resp.status_code in PERMANENT:
            raise RuntimeError(f"the homeserver refused the message: {resp.message} ({resp.status_code})")
        raise Retry(f"the homeserver refused the message for now: {resp.message} ({resp.status_code})")

    def maybe_delivered(self, exc: BaseException) -> bool:
        """Always: a part keeps its transaction id for its life. nio retries a send itself (the same
        transaction id, ``max_timeouts``) and raises only the last error, so "connection refused" says nothing
        about an earlier try that the homeserver stored before it died; and sending a transaction id again is
        harmless (the homeserver answers with the first event), so nothing is gained by rendering anew."""
        return True

    async def send_message(self, chat: str, part: OutboxPart) -> str:
        """An ``m.text`` event under the part's transaction id: sent again after a crash, it is the same event.
        ``m.mentions`` is empty: no text in the body (a model's ``@room``, a user id) notifies anyone."""
        return await self._send(chat, {"msgtype": "m.text", "body": part["text"] or "(empty)", "m.mentions": {}},
                                part["key"])

    async def edit(self, chat: str, ref: str, part: OutboxPart) -> str:
        text = part["text"]
        return await self._send(chat, {"msgtype": "m.text", "body": f"* {text}", "m.mentions": {},
                                       "m.new_content": {"msgtype": "m.text", "body": text, "m.mentions": {}},
                                       "m.relates_to": {"rel_type": "m.replace", "event_id": ref}}, part["key"])

    async def typing(self, chat: str) -> None:
        await self.client.typing(chat, timeout_ms=5000)
