"""The email channel (spec §8.3): a mailbox the person gives Palui, read over IMAP, written to over SMTP.

Receiving (:mod:`.mail_imap`, IMAPClient in a worker thread): the folder is opened read-only and watched with
``IDLE`` where the server offers it, polled otherwise. The restart position is the folder's ``UIDVALIDITY``
and the last UID read (the channel's cursor, ``V:U``); the first start, and a changed ``UIDVALIDITY``, start
at the folder's end, so nothing old is read as new. Each mail is handled once (its ``uid:V:U`` key recorded
with what it caused), and a mail whose ``Message-ID`` was seen before (a replay) is dropped.

**Whose mail.** A mail is the person's only when the receiving server the person named vouches for it
(:mod:`.mail_auth`: the topmost ``Authentication-Results`` of that authserv-id says ``dmarc=pass`` or an
aligned ``dkim=pass``), its ``From`` is the paired address, and it names Palui's address in ``To`` or ``Cc``
(a signed mail the person sent elsewhere, delivered here again, is not theirs to Palui). Pairing needs such
a mail (``/pair CODE`` as its first line). Anything else is ignored and logged once a day; the person is
told once a day of a mail with their address that fails. ``Auto-Submitted`` mail (vacation replies,
bounces) and ``Precedence: bulk`` are never read.

**Whose words** (:mod:`.mail_text`): only the new text; quoted lines and forwarded blocks are untrusted
quotes (a quote of Palui's own answer in this conversation adds nothing). Commands are the first line:
``/stop``, ``/status``, ``/approvals``, ``/new`` (the lines under it start the new conversation's first
turn), ``/help``. Attachments and attached mails are never fetched, only counted.

**Approvals** are answered by replying: each approval mail's ``Reply-To`` is ``LOCAL+a-SECRET@DOMAIN``
with a 128-bit secret (an HMAC of the outbox part's key under the channel's own key, so a part sent again
carries the same one); the service keeps its hash with the approval's fingerprint as shown
(:mod:`palui.service.mail_records`). A reply to it from the person answers with its first new line
(``approve`` / ``yes``, ``deny [reason]`` / ``no``, ``always [ARG=HOW …] [confirm]`` for "approve, and from now on
the same", ``stop [reason]`` or ``deny and stop [reason]``), once: a second reply, an address Palui never made,
or an approval changed since are refused. ``/approve ID`` typed in a mail is refused: only a reply answers.

**Sending** (:mod:`.mail_send`): plain text, one mail per outbox part with a fixed ``Message-ID``; answers
and replies thread under the person's latest mail (``In-Reply-To``/``References``, ``Re:`` its subject),
approvals and notices start their own thread, and an approval's outcome (answered here or elsewhere,
expired) is a short mail in its thread: mail cannot be edited. A part in flight at a crash is sent again
with the same ``Message-ID``: at most one repeat. Answers longer than 32 KiB are split into mails of one
thread, each decoding to exactly its part (nothing cut).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email
import email.policy
import hashlib
import hmac
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from palui.channels import views
from palui.channels.base import Channel, Inbound, Quoted
from palui.channels.mail_auth import Judgement, judge
from palui.channels.mail_imap import FETCH_BATCH, NETWORK_ERRORS, Fetched, LoginRefused, Mailbox, Opened, decode_text
from palui.channels.mail_send import Outgoing, SendFailed, build, message_id, send, subject_line
from palui.channels.mail_setup import test_channel
from palui.channels.mail_text import MailWords, answer_of, html_to_text, split_words
from palui.channels.platform import Backoff
from palui.channels.redaction import Redactor
from palui.channels.text import utf8_len
from palui.text.display import shown

if TYPE_CHECKING:
    from palui.results import OutboxItem, OutboxPart
    from palui.service.api import Service

__all__ = ["EmailChannel", "answer_secret", "test_channel"]

log = logging.getLogger("palui.channels.email")

#: Bytes of UTF-8 in one mail (as Matrix): longer answers are split into mails of one thread. Gmail clips a body
#: over about 100 KB behind "View entire message"; a part this size is always shown whole.
TEXT_LIMIT = 32 * 1024
_MSGID = re.compile(r"<[^<>\s]{1,250}>")


@dataclass
class _Mail:
    """What the channel read of one mail besides its Inbound."""

    message_id: str = ""
    refs: list[str] = field(default_factory=list)
    subject: str = ""
    secret: str | None = None
    words: MailWords = field(default_factory=lambda: MailWords(""))


def answer_secret(key: bytes, part_key: str) -> str:
    """The 128-bit secret of an approval mail's answer address (26 base32 letters, lower case): an HMAC of the
    outbox part's stable key, so the part sent again after a crash carries the same address."""
    digest = hmac.new(key, b"answer-address:" + part_key.encode(), hashlib.sha256).digest()[:16]
    return base64.b32encode(digest).decode().rstrip("=").lower()


def secret_hash(secret: str) -> str:
    """SHA-256 (hex) of an answer address's secret: what the service keeps."""
    return hashlib.sha256(secret.lower().encode()).hexdigest()


class EmailChannel(Channel):
    """A mailbox run by the service (see the module docstring)."""

    kind = "email"
    title = "Email"
    text_limit = TEXT_LIMIT
    renew_options = "--address … --password-file FILE"
    unread_reply = ("Palui reads the text of a mail only (attachments are never opened): write what you want in "
                    "the mail itself.")
    how_to_answer = ("Reply to this mail with approve (or deny and your reason) as the first line; always to "
                     "approve and from now on the same, stop to deny and end the turn's tool use. The reply goes to "
                     "this approval's own address and works once.")

    def __init__(self, svc: Service, name: str, redact: Redactor) -> None:
        super().__init__(svc, name, redact)
        cfg = self.cfg = svc.channels.get(name)["config"]
        secrets = svc.channels.secrets(name)
        password = str(secrets.get("password") or "")
        redact.add(password)
        self.password = password
        self.reply_key = bytes.fromhex(str(secrets.get("reply_key") or ""))
        if len(self.reply_key) < 16:
            raise ValueError("the channel's secrets file has no reply_key: add the channel again")
        self.address = str(cfg["address"])
        self.local, _, self.domain = self.address.rpartition("@")
        self.authserv_id = str(cfg["authserv_id"])
        self.mailbox = Mailbox(cfg["imap_host"], int(cfg["imap_port"]), cfg["imap_security"], cfg["login"], password,
                               cfg.get("folder", "INBOX"), float(cfg.get("poll_seconds", 60)))
        self._to_me = re.compile(rf"(?<![A-Za-z0-9._%+-]){re.escape(self.local)}(?:\+[A-Za-z0-9_-]*)?@"
                                 rf"{re.escape(self.domain)}(?![A-Za-z0-9.-])", re.IGNORECASE)
        self._secret_re = re.compile(rf"{re.escape(self.local)}\+a-([a-z2-7]{{26}})@{re.escape(self.domain)}",
                                     re.IGNORECASE)
        self._mail = _Mail()
        self._item: OutboxItem | None = None

    @staticmethod
    def measure(text: str) -> int:
        return utf8_len(text)

    # -- receiving ------------------------------------------------------------------------------------

    async def run(self) -> None:
        backoff, refused = Backoff(cap=3.0), Backoff(cap=60.0)
        try:
            while True:
                try:
                    opened = await asyncio.to_thread(self.mailbox.open)
                except LoginRefused:
                    self.login_refused()
                    await asyncio.sleep(refused.next_delay())
                    continue
                except NETWORK_ERRORS as e:
                    self.set_state(f"error: the mail server is unreachable: {type(e).__name__}: {e}")
                    await asyncio.sleep(backoff.next_delay())
                    continue
                backoff.reset()
                refused.reset()
                try:
                    await self._read(opened)
                except NETWORK_ERRORS as e:
                    self.set_state(f"error: the mail server is unreachable: {type(e).__name__}: {e}")
                    await asyncio.sleep(backoff.next_delay())
        finally:
            self.mailbox.stop()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.mailbox.close)

    async def _read(self, opened: Opened) -> None:
        validity, last = self._position(opened)
        self._state()
        while True:
            batch = await asyncio.to_thread(self.mailbox.fetch_after, last)
            for m in batch:
                self._on_mail(validity, m)
                last = m.uid
                self.svc.channel_updates.set_cursor(self.name, f"{validity}:{last}")
            if len(batch) < FETCH_BATCH:
                self._state()
                await asyncio.to_thread(self.mailbox.wait)

    def login_refused(self) -> None:
        """The IMAP or SMTP server refuses the password (changed, or an app password revoked): said in the state
        with what to do, the person told once (:meth:`credentials_refused`); receiving is retried (at most a
        minute apart), deliveries wait."""
        self.credentials_refused("the password")

    def _position(self, opened: Opened) -> tuple[int, int]:
        """Where reading resumes: the stored ``UIDVALIDITY:UID``, or — first start, or the folder's
        ``UIDVALIDITY`` changed — the folder's end (nothing old read as new)."""
        cursor = self.svc.channel_updates.cursor(self.name) or ""
        v, _, u = cursor.partition(":")
        if v.isdigit() and u.isdigit() and int(v) == opened.uidvalidity:
            return int(v), int(u)
        if cursor:
            log.warning("%s: the folder's UIDVALIDITY changed (%s to %s): reading only mail that arrives from now",
                        self.name, v, opened.uidvalidity)
        last = max(0, opened.uidnext - 1)
        self.svc.channel_updates.set_cursor(self.name, f"{opened.uidvalidity}:{last}")
        return opened.uidvalidity, last

    def _state(self) -> None:
        self.set_state("connected" if self.svc.channels.get(self.name)["person_id"] else "unpaired")

    def _on_mail(self, validity: int, m: Fetched) -> None:
        key = f"uid:{validity}:{m.uid}"
        try:
            inb, mail = self.inbound(key, m)
        except Exception as e:  # a mail that cannot be read must not stop the loop
            log.warning("%s: mail %s could not be read: %s", self.name, key, self.redact(f"{type(e).__name__}: {e}"))
            self.svc.channel_updates.mark(self.name, key, "malformed")
            return
        if inb is None:
            return
        self._mail = mail
        try:
            self.receive(inb)
        finally:
            self._mail = _Mail()

    def inbound(self, key: str, m: Fetched) -> tuple[Inbound | None, _Mail]:
        """The mail as an :class:`Inbound` (sender ``unverified:ADDRESS`` unless vouched for), with what the
        channel keeps of it; None when it is not read (automatic mail)."""
        head = email.message_from_bytes(m.header, policy=email.policy.default)
        auto = str(head.get("Auto-Submitted", "no")).strip().lower()
        if auto != "no" or str(head.get("Precedence", "")).strip().lower() in ("bulk", "junk", "list"):
            self.svc.channel_updates.mark(self.name, key, "ignored: automatic mail")
            return None, _Mail()
        verdict = judge([str(v) for v in head.get_all("Authentication-Results") or []],
                        [str(v) for v in head.get_all("From") or []], self.authserv_id)
        person = self.svc.channels.get(self.name)["person_id"]
        if verdict.trusted and not any(self._to_me.search(str(v)) for h in ("To", "Cc") for v in head.get_all(h) or []):
            # a signed mail the person sent to someone else, delivered here again (a DKIM replay)
            verdict = Judgement(False, verdict.address, "it is not addressed to Palui (To, Cc)")
        if not verdict.trusted:
            log.info("%s: mail %s is not vouched for: %s", self.name, key, verdict.why)
            who = verdict.address or "an unreadable From"
            if person and verdict.address == person and self.svc.channels.note_stranger(self.name, f"unverified:{who}"):
                self.reply(person, f"A mail with your address as its sender did not pass the check of "
                           f"{self.authserv_id} ({shown(verdict.why, one_line=True)}): it was ignored. If you sent "
                           "it, check the channel's authserv-id (docs/channels.md). (Said once a day.)")
            return Inbound(key=key, chat=f"unverified:{who}", sender=f"unverified:{who}", sender_name=who,
                           private=False, text="(a mail)"), _Mail()
        address = verdict.address or ""
        mail = _Mail(message_id=_one_id(head.get("Message-ID")), subject=subject_line(str(head.get("Subject", ""))),
                     refs=_MSGID.findall(str(head.get("References", ""))))
        in_reply_to = _one_id(head.get("In-Reply-To"))
        if in_reply_to and in_reply_to not in mail.refs:
            mail.refs.append(in_reply_to)
        found = [self._secret_re.search(str(v)) for h in ("To", "Cc", "Delivered-To", "X-Original-To")
                 for v in head.get_all(h) or []]
        mail.secret = next((f.group(1).lower() for f in found if f), None)
        mail.words = self._words(m)
        target = in_reply_to if in_reply_to and self.svc.outbox.sent_message(self.name, address, in_reply_to) else None
        quoted: list[Quoted] = []
        if mail.words.quoted:
            q = (self.reply_quote(address, target, mail.words.quoted, by_palui=True, by_person=False, author="")
                 if target else Quoted(mail.words.quoted, "someone, quoted in the person's mail", "quoted"))
            if q is not None:
                quoted.append(q)
        quoted += [Quoted(text, author or "someone", "forwarded") for author, text in mail.words.forwarded if text]
        name = head["From"].addresses[0].display_name if head["From"] is not None else ""
        return Inbound(key=key, chat=address, sender=address, sender_name=name or address, private=True,
                       text=mail.words.words, quoted=quoted, target=target), mail

    def _words(self, m: Fetched) -> MailWords:
        plain = [decode_text(t) for t in m.texts]
        if m.html_only:
            pairs = [html_to_text(t) for t in plain]
            words = split_words("\n\n".join(p[0] for p in pairs))
            html_quotes = "\n".join(p[1] for p in pairs if p[1])
            words.quoted = "\n".join(x for x in (words.quoted, html_quotes) if x)
        else:
            words = split_words("\n\n".join(plain))
        if m.attachments or m.too_long:
            log.info("%s: mail %s: %d attachments and %d text parts over 1 MiB not fetched", self.name, m.uid,
                     m.attachments, m.too_long)
        return words

    def _decide(self, inb: Inbound) -> list[Any]:
        mail = self._mail
        if inb.private and mail.message_id and not self.svc.channel_updates.mark(self.name, f"mid:{mail.message_id}",
                                                                                  "seen"):
            log.warning("%s: mail %s carries the Message-ID of a mail read before: a replay, ignored", self.name,
                        inb.key)
            return []
        ch = self.svc.channels.get(self.name)
        if inb.private and (inb.sender == ch["person_id"] or inb.text.strip().lower().startswith("/pair ")):
            if mail.message_id:  # Palui's replies thread under the person's latest mail
                self.svc.mail_records.set_thread(self.name, inb.chat, mail.message_id, mail.refs, mail.subject)
        if inb.private and inb.sender == ch["person_id"] and mail.secret is not None:
            return self._answer_by_reply(inb, mail)
        return super()._decide(inb)

    def _answer_by_reply(self, inb: Inbound, mail: _Mail) -> list[Any]:
        """A reply to an approval's answer address (see the module docstring)."""
        said = answer_of(mail.words.words)
        if said is None:
            self.reply(inb.chat, "Your reply to an approval mail did not start with approve or deny (or always, or "
                       "stop): nothing was answered. Reply again with approve, or deny and your reason, as the first "
                       "line.")
            return []
        found = self.svc.mail_records.spend_answer_address(self.name, secret_hash(mail.secret or ""))
        if found is None:
            self.reply(inb.chat, "Refused: that reply address is not one Palui made; nothing was answered.")
            return []
        aid = found["approval_id"]
        a = self.svc.approvals.find(aid)
        if found["used_at"] is not None:
            now = f"is already {a['status']}" if a is not None else "is gone"
            self.reply(inb.chat, f"Refused: approval {aid} {now}; its reply address was used already, and "
                       "answers once.")
            return []
        if a is None or views.fingerprint(a) != found["fingerprint"]:
            self.reply(inb.chat, f"Refused: that mail does not match approval {aid} as it is now; nothing was "
                       "answered (/approvals sends it again).")
            return []
        return self._answer(inb.chat, aid, said.approves, said.reason or None, press_id=None, always=said.always,
                            confirm=said.confirm, stop=said.stop)

    def _text(self, inb: Inbound, words: str) -> list[Any]:
        first, _, rest = words.partition("\n")
        head = first.strip().split(" ", 1)[0].lower()
        target = self.svc.outbox.sent_message(self.name, inb.chat, inb.target) if inb.target else None
        if head in ("/approve", "/deny", "/always", "/denystop") or (target and target["approval_id"]
                                                                     and answer_of(words) is not None):
            self.reply(inb.chat, "To answer an approval, reply to its mail (the reply goes to that approval's own "
                       "address); a typed /approve or a mail to Palui's plain address answers nothing.")
            return []
        if head == "/new" and rest.strip():
            self.svc.channel_updates.conversation(self.name, inb.chat, new=True)
            return super()._text(inb, rest.strip())
        if first.strip().startswith("/"):
            return super()._text(inb, first.strip())  # a command is the first line; the rest is not read
        return super()._text(inb, words)

    # -- sending ---------------------------------------------------------------------------------------

    async def _deliver(self, item: OutboxItem) -> None:
        self._item = item  # the item whose parts send_message sends: what they answer, how they thread
        try:
            await super()._deliver(item)
        finally:
            self._item = None

    def _threading(self, chat: str, part: OutboxPart) -> tuple[str, str | None, tuple[str, ...]]:
        item = self._item
        kind = item["kind"] if item else part["kind"]
        if kind in ("answer", "reply"):
            t = self.svc.mail_records.thread(self.name, chat)
            if t is not None:
                subject = t["subject"] if t["subject"].lower().startswith("re:") else f"Re: {t['subject']}"
                return subject, t["message_id"], tuple(t["refs"])
            return "Palui", None, ()
        first = part["text"].split("\n", 1)[0]
        if kind == "edit" and item and item["target_ref"]:
            return f"Re: {first}", item["target_ref"], ()
        return first if kind in ("approval", "edit") else f"Palui: {first}", None, ()

    async def send_message(self, chat: str, part: OutboxPart) -> str:
        """One plain-text mail per part, with the fixed ``Message-ID`` of its key; an approval's carries its
        answer address as ``Reply-To``."""
        subject, in_reply_to, refs = self._threading(chat, part)
        reply_to = None
        if part["approval_id"] and part["fingerprint"]:
            secret = answer_secret(self.reply_key, part["key"])
            self.svc.mail_records.add_answer_address(self.name, secret_hash(secret), part["approval_id"],
                                                     part["fingerprint"])
            reply_to = f"{self.local}+a-{secret}@{self.domain}"
        mid = message_id(part["key"], self.domain)
        return await self._send(Outgoing(chat, subject, part["text"], mid, in_reply_to, refs, reply_to))

    async def edit(self, chat: str, ref: str, part: OutboxPart) -> str:
        """Mail cannot be edited: the outcome goes as a short mail in the approval mail's thread."""
        subject, _, _ = self._threading(chat, part)
        return await self._send(Outgoing(chat, subject, part["text"], message_id(part["key"], self.domain), ref))

    async def _send(self, mail: Outgoing) -> str:
        msg = build(mail, self.address)
        cfg = self.cfg
        try:
            await asyncio.to_thread(send, msg, host=cfg["smtp_host"], port=int(cfg["smtp_port"]),
                                    security=cfg["smtp_security"], login=cfg["login"], password=self.password,
                                    sender=self.address)
        except SendFailed as e:
            if e.login:
                self.login_refused()
            raise
        return mail.message_id

    def retry_delay(self, exc: BaseException) -> float | None:
        if isinstance(exc, SendFailed):
            return None if exc.code >= 500 and not exc.login else 0.0
        return super().retry_delay(exc)

    def maybe_delivered(self, exc: BaseException) -> bool:
        return isinstance(exc, SendFailed) and exc.maybe_delivered


def _one_id(value: object) -> str:
    found = _MSGID.findall(str(value or ""))
    return found[0] if found else ""
