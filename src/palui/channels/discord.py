"""The Discord channel (spec §8.3): a bot, through discord.py (docs/decisions/0167-discord-py.md says why).

discord.py's ``Client`` runs the gateway: it identifies, keeps the heartbeat, and when the connection drops
it reconnects and **resumes** the session (replaying what was missed) by itself; Palui only listens to its
events and keeps no gateway state of its own. Receiving:

- ``on_message``: in a DM with the bot (no guild) the person's words are the message's ``content``; a
  forwarded message (``message_snapshots``) is someone else's words — quoted, untrusted, and Discord does
  not say who wrote it; a reply quotes the message replied to (trusted only when the person wrote it,
  nothing when it is Palui's answer in this conversation). Guild messages are the person's only when the
  paired person wrote them and groups are allowed; anyone else's are untrusted room context. Palui's own
  and other bots' messages are not read. The key is the message id: a message seen again is dropped.
- ``on_raw_message_edit``: an edit, answered once per message (embeds added by a link preview are no edit).
- ``on_interaction``: a press on an approval's button (a message component) carries its ``custom_id``
  ``ap:<id>:<fp16>:<y|n>``, bound to the approval as shown; the answer is an ephemeral response.

Sending: ``allowed_mentions`` is empty on every message, so nothing a model or a stranger wrote can ping
``@everyone``, ``@here``, a role or a user, and the text is escaped (a backslash before Discord's markdown and
mention characters, :func:`escape`) so it shows as it is. Messages are split at 2,000 characters of escaped
text. Each part is sent with its stable key as the message ``nonce`` with ``enforce_nonce``: Discord returns
the first message for a nonce seen again within a few minutes, so a part resent soon after a crash or a lost
answer is the same message; later, the one part in flight may show twice. The approval's buttons are built
with ``discord.ui`` and not kept by discord.py's view store (Palui handles every press itself).

The API base is Discord's unless the channel was added with ``--api-base`` (loopback only: the tests' fake):
discord.py keeps its REST base (``http.Route.BASE``) and gateway (``DiscordWebSocket.DEFAULT_GATEWAY``) as
class attributes, so the option points the whole process at that fake (one fake per test process).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from palui.channels import views
from palui.channels.base import Channel, Inbound, Quoted, Retry
from palui.channels.platform import Backoff
from palui.channels.redaction import Redactor
from palui.errors import PaluiError, UsageError

if TYPE_CHECKING:
    from palui.results import ChatChannel, OutboxPart
    from palui.service.api import Service

log = logging.getLogger("palui.channels.discord")
DISCORD_TEXT_LIMIT = 2000
DEFAULT_REST = Route.BASE
DEFAULT_GATEWAY = DiscordWebSocket.DEFAULT_GATEWAY
#: A bot token: three base64url parts joined by dots (the bot's id, a timestamp, an HMAC).
TOKEN = re.compile(r"^[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{20,}$")
#: Markdown and mention characters of Discord, escaped with a backslash (Discord shows ``\X`` as ``X`` for any
#: punctuation ``X``); a number and a dot at a line's start would make a list.
_SPECIAL = re.compile(r"([\\*_~`|<>#\-\[\]()@:])|^(\s*\d+)\.", re.MULTILINE)
INTENTS = discord.Intents(guilds=True, dm_messages=True, guild_messages=True, message_content=True)
FORWARDED = "someone (a message forwarded from another chat: Discord does not say who wrote it)"


def escape(text: str) -> str:
    """``text`` so that Discord shows it as it is: no markdown, no mention, no emoji shortcode."""
    return _SPECIAL.sub(lambda m: f"\\{m.group(1)}" if m.group(1) else f"{m.group(2)}\\.", text)


def check_discord_token(token: str) -> str:
    """``token`` without blanks when it has a bot token's shape; else UsageError (never echoing it)."""
    t = token.strip().removeprefix("Bot ").strip()
    if not TOKEN.match(t):
        raise UsageError("that is not a Discord bot token: it is three parts joined by dots (Developer Portal → "
                         "your application → Bot → Reset Token); nothing was sent")
    return t


def point_at(api_base: str | None) -> None:
    """Point discord.py (REST and gateway, process-wide) at ``api_base``, or back at Discord's."""
    if api_base:
        base = api_base.rstrip("/")
        Route.BASE = f"{base}/api/v10"
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(base.replace("http", "ws", 1) + "/gateway/")
    else:
        Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = DEFAULT_REST, DEFAULT_GATEWAY


async def check_token(token: str, api_base: str | None, redact: Redactor) -> dict[str, Any]:
    """Log in over REST (``GET /users/@me``): ``{"id","username"}``. Raises PaluiError, token-free."""
    token = check_discord_token(token)
    point_at(api_base)
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        me = await http.static_login(token)
    except discord.LoginFailure:
        raise PaluiError("Discord rejected the bot token (make a new one: Developer Portal → Bot → Reset Token)") \
            from None
    except (discord.HTTPException, aiohttp.ClientError, OSError) as e:
        raise PaluiError(f"Discord is unreachable: {redact(f'{type(e).__name__}: {e}')}") from None
    finally:
        await http.close()
    return {"id": str(me["id"]), "username": str(me["username"])}


async def test_channel(c: ChatChannel, secret: dict[str, Any], redact: Redactor) -> str:
    """``palui channels test``: the token, and a test message to the person when paired."""
    token = str(secret.get("token") or "")
    me = await check_token(token, c["config"].get("api_base"), redact)
    out = f"ok: Discord answers as @{me['username']} ({me['id']})"
    if not c["person_chat"]:
        return out + f"; not paired yet (palui channels pair {c['name']})"
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        await http.static_login(token)
        await http.send_message(int(c["person_chat"]), params=discord.http.handle_message_parameters(
            content="Palui test message: this channel works.", allowed_mentions=discord.AllowedMentions.none()))
    except (discord.HTTPException, aiohttp.ClientError, OSError) as e:
        raise PaluiError(f"the login worked, but sending to the person failed: {redact(str(e))}") from None
    finally:
        await http.close()
    return out + f"; a test message was sent to {c['person']}"


class _Client(discord.Client):
    """discord.py's client, handing its events to the channel."""

    def __init__(self, channel: DiscordChannel) -> None:
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False  # Palui has no voice: no warning
        super().__init__(intents=INTENTS, max_messages=None, chunk_guilds_at_startup=False)
        self.palui = channel

    async def on_ready(self) -> None:
        self.palui.connected()

    async def on_resumed(self) -> None:
        self.palui.connected()

    async def on_disconnect(self) -> None:
        self.palui.set_state("error: Discord is unreachable (discord.py reconnects and resumes)")

    async def on_message(self, message: discord.Message) -> None:
        self.palui.on_message(message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        self.palui.on_edit(payload)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        self.palui.on_interaction(interaction)


class DiscordChannel(Channel):
    """A Discord bot (see the module docstring)."""

    kind = "discord"
    title = "Discord"
    text_limit = DISCORD_TEXT_LIMIT
    how_to_answer = ("Press Approve or Deny below, Always to approve and from now on the same, Deny and stop to end "
                     "the turn's tool use (or send /approve {id} or /deny {id} REASON).")

    def __init__(self, svc: Service, name: str, redact: Redactor) -> None:
        super().__init__(svc, name, redact)
        ch = svc.channels.get(name)
        self.token = str(svc.channels.secrets(name).get("token") or "")
        redact.add(self.token)
        self.api_base = ch["config"].get("api_base")
        self.me = str(ch["config"].get("bot_id") or "")
        self.client: _Client | None = None
        self.ready = False  # logged in: REST works (the gateway may still be connecting)
        self.interactions: dict[str, discord.Interaction] = {}

    @staticmethod
    def measure(text: str) -> int:
        return len(escape(text))

    # -- receiving -------------------------------------------------------------------------------------

    async def run(self) -> None:
        point_at(self.api_base)
        backoff = Backoff(cap=60.0)
        while True:
            client = self.client = _Client(self)
            try:
                await client.login(self.token)
                self.ready = True
                await client.connect(reconnect=True)
            except discord.LoginFailure:
                self.credentials_refused("the bot token")
            except discord.PrivilegedIntentsRequired:
                self.set_state("error: turn on the Message Content intent (Developer Portal → Bot → Privileged "
                               "Gateway Intents)")
            except discord.ConnectionClosed as e:
                if e.code == 4004:  # "authentication failed": the token was reset
                    self.credentials_refused("the bot token")
                else:
                    self.set_state(f"error: Discord closed the gateway ({e.code})")
            except (discord.HTTPException, discord.GatewayNotFound, aiohttp.ClientError, OSError, TimeoutError) as e:
                self.set_state(f"error: Discord is unreachable: {type(e).__name__}: {e}")
            else:
                backoff.reset()
            finally:
                self.ready = False
                await client.close()
            await asyncio.sleep(backoff.next_delay())

    def connected(self) -> None:
        self.set_state("connected" if self.svc.channels.get(self.name)["person_id"] else "unpaired")

    def _mine(self, author_id: object) -> bool:
        return bool(self.client and self.client.user and str(author_id) == str(self.client.user.id))

    def on_message(self, m: discord.Message) -> None:
        if self._mine(m.author.id) or m.author.bot:
            return
        chat, person = str(m.channel.id), self.svc.channels.get(self.name)["person_id"]
        words = m.content
        quoted = [Quoted(s.content, FORWARDED, "forwarded") for s in m.message_snapshots if s.content.strip()]
        ref = m.reference
        replied = ref.resolved if ref is not None and isinstance(ref.resolved, discord.Message) else None
        if replied is not None and ref is not None and ref.type == discord.MessageReferenceType.reply:
            q = self.reply_quote(chat, str(replied.id), replied.content, by_palui=self._mine(replied.author.id),
                                 by_person=str(replied.author.id) == person,
                                 author=f"@{replied.author.name} ({replied.author.id})")
            if q is not None:
                quoted.append(q)
        self.receive(Inbound(key=f"msg:{m.id}", chat=chat, sender=str(m.author.id), sender_name=f"@{m.author.name}",
                             private=m.guild is None, text=words, quoted=quoted,
                             target=str(ref.message_id) if ref is not None and ref.message_id else None))

    def on_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        data: dict[str, Any] = dict(payload.data)
        author = data.get("author") or {}
        if not data.get("edited_timestamp") or not author.get("id") or author.get("bot") or self._mine(author["id"]):
            return  # a link preview added, or Palui's own edit
        self.receive(Inbound(key=f"edit:{payload.message_id}:{data['edited_timestamp']}", chat=str(payload.channel_id),
                             sender=str(author["id"]), sender_name=f"@{author.get('username')}",
                             private=payload.guild_id is None, edit_of=str(payload.message_id)))

    def on_interaction(self, i: discord.Interaction) -> None:
        if i.type != discord.InteractionType.component or i.channel_id is None:
            return
        press_id = str(i.id)
        self.interactions[press_id] = i
        data: dict[str, Any] = dict(i.data or {})
        self.receive(Inbound(key=f"press:{i.id}", chat=str(i.channel_id), sender=str(i.user.id),
                             sender_name=f"@{i.user.name}", private=i.guild_id is None,
                             press=str(data.get("custom_id") or ""), press_id=press_id,
                             target=str(i.message.id) if i.message is not None else None))

    # -- sending --------------------------------------------------------------------------------------

    def _channel(self, chat: str) -> discord.PartialMessageable:
        if self.client is None or not self.ready:
            raise Retry("not logged in to Discord yet")
        return self.client.get_partial_messageable(int(chat))

    def retry_delay(self, exc: BaseException) -> float | None:
        if isinstance(exc, discord.HTTPException):
            if exc.status == 401:
                self.credentials_refused("the bot token")
                return 0.0  # waits for a new token: nothing in the outbox is dropped
            if exc.status in (400, 403, 404, 413):
                return None  # a bad request, the person does not take DMs from the bot, an unknown channel
            return 0.0
        if isinstance(exc, (aiohttp.ClientError, OSError, TimeoutError)):
            return 0.0
        return super().retry_delay(exc)

    def maybe_delivered(self, exc: BaseException) -> bool:
        """Always: a part keeps its nonce, and Discord answers a nonce seen again with the first message."""
        return True

    async def send_message(self, chat: str, part: OutboxPart) -> str:
        """A message with no mentions allowed, the text escaped, the part's key as its nonce; an approval with
        Approve / Deny buttons."""
        channel = self._channel(chat)
        content = escape(part["text"]) if part["text"].strip() else "(empty)"
        none = discord.AllowedMentions.none()
        if part["kind"] == "approval" and part["approval_id"] and part["fingerprint"]:
            msg = await channel.send(content=content, view=approval_view(part["approval_id"], part["fingerprint"]),
                                     allowed_mentions=none, nonce=part["key"][:25])
        else:
            msg = await channel.send(content=content, allowed_mentions=none, nonce=part["key"][:25])
        return str(msg.id)

    async def edit(self, chat: str, ref: str, part: OutboxPart) -> str:
        await self._channel(chat).get_partial_message(int(ref)).edit(
            content=escape(part["text"]), view=None, allowed_mentions=discord.AllowedMentions.none())
        return ref

    async def typing(self, chat: str) -> None:
        await self._channel(chat).typing()

    async def answer_press(self, press_id: str, text: str) -> None:
        i = self.interactions.pop(press_id, None)
        if i is not None:
            await i.response.send_message(escape(text), ephemeral=True,
                                          allowed_mentions=discord.AllowedMentions.none())


def approval_view(approval_id: str, fp: str) -> discord.ui.View:
    """Approve / Always / Deny / Deny and stop buttons whose ``custom_id`` is bound to the approval as shown;
    stopped at once, so discord.py's view store keeps nothing (Palui's ``on_interaction`` answers every press)."""
    view = discord.ui.View(timeout=None)
    styles = {"approve": discord.ButtonStyle.success, "deny": discord.ButtonStyle.danger}
    for kind, label in views.BUTTONS:
        view.add_item(discord.ui.Button(label=label, style=styles.get(kind, discord.ButtonStyle.secondary),
                                        custom_id=views.button_data(approval_id, fp, kind)))
    view.stop()
    return view


__all__ = ["DiscordChannel", "approval_view", "check_discord_token", "check_token", "escape", "point_at",
           "test_channel"]
