"""The Telegram channel (spec §8.3): a bot, through python-telegram-bot's low-level ``Bot``.

Receiving is :class:`~palui.channels.telegram_poll.TelegramPoller` (each update once). Each
update becomes an :class:`~palui.channels.base.Inbound`:

- the person's words are the message's ``text`` (or ``caption``), except for a forward
  (``forward_origin``), whose text is someone else's: it is quoted, untrusted, and the person's
  words are empty;
- ``reply_to_message`` (or the selected ``quote`` of it) and ``external_reply`` are quoted:
  untrusted unless the person wrote it, or it is Palui's answer in this conversation
  (:meth:`Channel.reply_quote`);
- a button press (``callback_query``) carries its ``callback_data``; edits are not read (the
  person is told so, once per message edited).

Sending uses HTML parse mode: every text is split on line boundaries at 4,096 UTF-16 code units
of *visible* text first, then HTML-escaped, so tool output can never break the markup.
The API base is ``https://api.telegram.org`` unless a channel was added with ``--api-base``
(loopback only: the tests' fake Bot API).
"""

from __future__ import annotations

import html
import logging
import os
from typing import TYPE_CHECKING, Any

os.environ.setdefault("PTB_TIMEDELTA", "1")  # RetryAfter.retry_after as a timedelta, without a warning

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, MessageOrigin, Update, User  # noqa: E402
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter, TimedOut  # noqa: E402
from telegram.request import HTTPXRequest  # noqa: E402

from palui.channels import check_telegram_token, views  # noqa: E402
from palui.channels.base import Channel, Inbound, Quoted  # noqa: E402
from palui.channels.redaction import Redactor  # noqa: E402
from palui.channels.telegram_poll import TOKEN_REJECTED, TelegramPoller, retry_after_seconds  # noqa: E402
from palui.channels.text import TELEGRAM_TEXT_LIMIT, utf16_len  # noqa: E402
from palui.errors import PaluiError  # noqa: E402

if TYPE_CHECKING:
    from palui.results import ChatChannel, OutboxPart
    from palui.service.api import Service

log = logging.getLogger("palui.channels.telegram")
DEFAULT_API = "https://api.telegram.org"


def make_bot(token: str, api_base: str | None) -> Bot:
    """A ``telegram.Bot`` on ``api_base`` (default Telegram's), with a pool big enough for the long
    poll and concurrent sends."""
    base = (api_base or DEFAULT_API).rstrip("/")
    request = HTTPXRequest(connection_pool_size=8, read_timeout=15, connect_timeout=10)
    return Bot(token, base_url=f"{base}/bot", base_file_url=f"{base}/file/bot", request=request,
               get_updates_request=HTTPXRequest(connection_pool_size=1))


async def check_token(token: str, api_base: str | None, redact: Redactor) -> dict[str, Any]:
    """``getMe`` with ``token``: ``{"id","username"}``. Raises PaluiError with a token-free message
    (PTB's own ``InvalidToken`` text holds the token); UsageError for a token of the wrong shape, before any
    request."""
    token = check_telegram_token(token)
    bot = make_bot(token, api_base)
    try:
        me = await bot.get_me()
    except InvalidToken:
        raise PaluiError("Telegram rejected the bot token (check it with @BotFather)") from None
    except (TimedOut, NetworkError) as e:
        raise PaluiError(f"Telegram is unreachable: {redact(str(e))}") from None
    finally:
        try:
            # get_me alone never initializes the bot, so bot.shutdown() would leave its HTTP client (and the
            # connection get_me made) open: close the client that made the request.
            await bot.request.shutdown()
        except Exception:  # noqa: BLE001 - closing a client that never connected
            pass
    return {"id": me.id, "username": me.username}


def _origin_name(origin: MessageOrigin) -> str:
    """Who wrote a forwarded message, from its ``forward_origin``."""
    user = getattr(origin, "sender_user", None)
    if user is not None:
        return f"{user.full_name} (@{user.username}, {user.id})" if user.username else f"{user.full_name} ({user.id})"
    if name := getattr(origin, "sender_user_name", None):
        return str(name)
    chat = getattr(origin, "sender_chat", None) or getattr(origin, "chat", None)
    if chat is not None:
        return f"{chat.title or chat.username or 'a chat'} ({chat.id})"
    return "someone"


def _user_name(user: User) -> str:
    return f"@{user.username}" if user.username else (user.full_name or str(user.id))


class TelegramChannel(Channel):
    """A paired Telegram bot (see the module docstring)."""

    kind = "telegram"
    title = "Telegram"
    text_limit = TELEGRAM_TEXT_LIMIT
    how_to_answer = ("Press Approve or Deny below, Always to approve and from now on the same, Deny and stop to end "
                     "the turn's tool use (or send /approve {id} or /deny {id} REASON).")
    unread_reply = "Palui reads text messages (and captions) only: send your words as text."

    def __init__(self, svc: Service, name: str, redact: Redactor) -> None:
        super().__init__(svc, name, redact)
        ch = svc.channels.get(name)
        self.token = str(svc.channels.secrets(name).get("token") or "")
        redact.add(self.token)
        self.bot = make_bot(self.token, ch["config"].get("api_base"))
        self.poll_timeout = int(ch["config"].get("poll_timeout", 30))

    @staticmethod
    def measure(text: str) -> int:
        return utf16_len(text)

    # -- receiving ------------------------------------------------------------------------------

    async def run(self) -> None:
        poller = TelegramPoller(self.bot, on_update=self._on_update, on_malformed=self._on_malformed,
                                on_state=self._on_state, next_offset=self.svc.channel_updates.next_offset(self.name),
                                redact=self.redact, poll_timeout=self.poll_timeout)
        try:
            await poller.run()
        finally:
            try:
                await self.bot.shutdown()
            except Exception:  # noqa: BLE001 - closing the HTTP pools only
                pass

    def _on_state(self, state: str) -> None:
        if state == "connected" and not self.svc.channels.get(self.name)["person_id"]:
            state = "unpaired"
        if state == TOKEN_REJECTED:
            return self.credentials_refused("the bot token")
        self.set_state(state)

    def _on_malformed(self, update_id: int, reason: str) -> None:
        log.warning("%s: dropped malformed update %s: %s", self.name, update_id, reason)
        self.svc.channel_updates.mark(self.name, str(update_id), "malformed", seq=update_id)

    def _on_update(self, update: Update) -> None:
        inb = self.inbound(update)
        if inb is None:
            self.svc.channel_updates.mark(self.name, str(update.update_id), "ignored", seq=update.update_id)
            return
        self.receive(inb)

    def inbound(self, update: Update) -> Inbound | None:
        """The update as an :class:`Inbound`, or None when Palui has nothing to do with it."""
        key, seq = str(update.update_id), update.update_id
        cq = update.callback_query
        if cq is not None:
            msg = cq.message
            chat = msg.chat if msg is not None else None
            return Inbound(key=key, seq=seq, chat=str(chat.id if chat else cq.from_user.id),
                           sender=str(cq.from_user.id), sender_name=_user_name(cq.from_user),
                           private=bool(chat and chat.type == "private"), press=cq.data or "",
                           press_id=cq.id, target=str(msg.message_id) if msg is not None else None)
        if update.edited_message is not None:
            m = update.edited_message
            if m.from_user is None:
                return None
            return Inbound(key=key, seq=seq, chat=str(m.chat.id), sender=str(m.from_user.id),
                           sender_name=_user_name(m.from_user), private=m.chat.type == "private",
                           edit_of=str(m.message_id))
        new = update.message
        if new is None or new.from_user is None:
            return None
        return self._message(key, seq, new)

    def _message(self, key: str, seq: int, m: Message) -> Inbound:
        assert m.from_user is not None
        chat = str(m.chat.id)
        words = m.text or m.caption or ""
        quoted: list[Quoted] = []
        if m.forward_origin is not None:
            if words:
                quoted.append(Quoted(words, _origin_name(m.forward_origin), "forwarded"))
            words = ""
        person = self.svc.channels.get(self.name)["person_id"]
        rt = m.reply_to_message
        selected = m.quote.text if m.quote is not None else None
        if rt is not None:
            author = rt.from_user
            text = selected or rt.text or rt.caption or ""
            q = self.reply_quote(chat, str(rt.message_id), text,
                                 by_palui=bool(author and author.id == self.bot.id),
                                 by_person=bool(author and str(author.id) == person),
                                 author=_user_name(author) + f" ({author.id})" if author else "someone")
            if q is not None:
                quoted.append(q)
        elif m.external_reply is not None:
            origin = _origin_name(m.external_reply.origin)
            text = selected or "(a message from another chat; its text was not shared)"
            quoted.append(Quoted(text, origin, "replied to"))
        target = str(rt.message_id) if rt is not None else None
        return Inbound(key=key, seq=seq, chat=chat, sender=str(m.from_user.id), sender_name=_user_name(m.from_user),
                       private=m.chat.type == "private", text=words, quoted=quoted, target=target)


    # -- sending -------------------------------------------------------------------------------------

    def retry_delay(self, exc: BaseException) -> float | None:
        if isinstance(exc, RetryAfter):
            return retry_after_seconds(exc)
        if isinstance(exc, (BadRequest, Forbidden)):
            return None  # a bad request, the bot blocked by the person: sending again changes nothing
        if isinstance(exc, (TimedOut, NetworkError, InvalidToken)):
            return 0.0  # unreachable, or a token rejected for now: the state says what to do
        return super().retry_delay(exc)

    def maybe_delivered(self, exc: BaseException) -> bool:
        # A timeout may come after Telegram took the message (a pool timeout is before the request left).
        return isinstance(exc, TimedOut) and "Pool timeout" not in str(exc)

    async def send_message(self, chat: str, part: OutboxPart) -> str:
        """One sendMessage in HTML parse mode (the text escaped, so tool output cannot break the markup),
        with Approve / Always / Deny / Deny and stop buttons when the part carries an approval; an
        ``approval-plain`` part as plain text without buttons. The Bot API has no idempotency key."""
        if part["kind"] == "approval-plain":
            msg = await self.bot.send_message(int(chat), part["text"])
            return str(msg.message_id)
        body = html.escape(part["text"], quote=False) if part["text"].strip() else "(empty)"
        markup = None
        if part["approval_id"] and part["fingerprint"]:
            # two rows: Approve, Deny; Always, Deny and stop (spec §5.9, §5.10)
            buttons = [InlineKeyboardButton(label, callback_data=views.button_data(part["approval_id"],
                                                                                   part["fingerprint"], kind))
                       for kind, label in views.BUTTONS]
            markup = InlineKeyboardMarkup([buttons[:2], buttons[2:]])
        msg = await self.bot.send_message(int(chat), body, parse_mode="HTML", reply_markup=markup)
        return str(msg.message_id)

    async def edit(self, chat: str, ref: str, part: OutboxPart) -> str:
        try:
            await self.bot.edit_message_text(html.escape(part["text"], quote=False), chat_id=int(chat),
                                             message_id=int(ref), parse_mode="HTML")
        except BadRequest as e:
            if "not modified" not in str(e).lower():
                raise
        return ref

    async def typing(self, chat: str) -> None:
        await self.bot.send_chat_action(int(chat), "typing")

    async def answer_press(self, press_id: str, text: str) -> None:
        await self.bot.answer_callback_query(press_id, text=text)


async def test_channel(c: ChatChannel, secret: dict[str, Any], redact: Redactor) -> str:
    """``palui channels test``: getMe, and a test message to the person when paired. Returns what
    happened. Raises PaluiError (token rejected, unreachable), with no token in the message."""
    token = str(secret.get("token") or "")
    me = await check_token(token, c["config"].get("api_base"), redact)
    out = f"ok: Telegram answers as @{me['username']} ({me['id']})"
    if c["person_chat"]:
        bot = make_bot(token, c["config"].get("api_base"))
        try:
            await bot.send_message(int(c["person_chat"]), "Palui test message: this channel works.")
        except Exception as e:  # noqa: BLE001 - reported, redacted
            raise PaluiError(f"getMe worked, but sending to the person failed: {redact(str(e))}") from None
        finally:
            try:
                await bot.shutdown()
            except Exception:  # noqa: BLE001
                pass
        out += f"; a test message was sent to {c['person']}"
    else:
        out += "; not paired yet (palui channels pair " + c["name"] + ")"
    return out
