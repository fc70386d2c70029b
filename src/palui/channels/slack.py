"""The Slack channel (spec §8.3): a Slack app over Socket Mode, through the official ``slack_sdk``.

Socket Mode needs no public URL (a self-hosted agent has none): the app-level token (``xapp-…``) opens a
websocket (``apps.connections.open``), over which Slack sends the app's events and button presses, each
acknowledged by its envelope id; the bot token (``xoxb-…``) sends through the Web API. Both tokens come from
``palui channels add slack`` (files or variables, never the command line); ``auth.test`` checks them first.

Each envelope becomes an :class:`~palui.channels.base.Inbound`:

- ``message`` events: in a DM with the app (``channel_type: im``) the person's words are the text, decoded
  from Slack's format (``&lt;``, ``<@U…>`` mentions, ``<url|label>`` links); a shared message (an
  attachment with ``is_share``) is someone else's words: quoted, untrusted, its author named. In channels,
  messages (and ``app_mention``, which is the same message: both carry its ``ts``, recorded once) are
  the person's words only if the paired person wrote them and groups are allowed; anyone else's are
  untrusted room context. An edit (``message_changed``) is answered once per message; Palui's own and
  other bots' messages are not read.
- Slack takes a message that starts with ``/`` as a slash command, so the commands come as the app's one
  slash command ``/palui`` (``/palui pair CODE``, ``/palui stop``, ``/palui approve ID``…): Palui answers
  it in the person's DM with the app (``conversations.open``), wherever it was typed. A message that starts
  with a space then ``/`` is a command too.
- A press on an approval's Block Kit button (``block_actions``) carries the button's value
  ``ap:<id>:<fp16>:<y|n>``, bound to the approval as shown (a forged or stale one is refused); the answer is
  an ephemeral message to the presser.

Sending: the text is escaped as Slack requires (``&``, ``<``, ``>``, so no ``<!channel>``, ``<!here>``,
``<@U…>`` or link can be formed), with ``mrkdwn``, ``link_names`` and unfurling off, so a model's or a
stranger's text shows as it is and pings nobody; an approval carries a ``section`` block (``plain_text``)
and an ``actions`` block with Approve / Deny. Messages are split at 3,000 characters of escaped text (a
``plain_text`` block's limit). ``chat.postMessage`` has no idempotency key: the one part in flight at a
crash may show twice. The Web API client is made with no retry handlers (each call made once: the outbox
retries). The API base is ``https://slack.com/api/`` unless the channel was added with ``--api-base``
(loopback only: the tests' fake).
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from palui.channels import views
from palui.channels.base import Channel, Inbound, Quoted
from palui.channels.platform import Backoff
from palui.channels.redaction import Redactor
from palui.errors import PaluiError, UsageError

if TYPE_CHECKING:
    from palui.results import ChatChannel, OutboxPart
    from palui.service.api import Service

log = logging.getLogger("palui.channels.slack")
DEFAULT_API = "https://slack.com/api/"
SLACK_TEXT_LIMIT = 3000
BOT_TOKEN = re.compile(r"^xoxb-[A-Za-z0-9-]{10,}$")
APP_TOKEN = re.compile(r"^xapp-[A-Za-z0-9-]{10,}$")
#: Web API errors that mean the token itself is refused (the app removed, the token revoked).
TOKEN_ERRORS = frozenset({"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive",
                          "missing_scope", "no_permission"})
#: Errors that sending again cannot change.
PERMANENT = frozenset({"channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text",
                       "invalid_blocks", "invalid_blocks_format", "cannot_dm_bot", "user_not_found",
                       "invalid_arguments", "restricted_action"})
_TOKEN_IN_TEXT = re.compile(r"<(@[UW][A-Z0-9]+|#C[A-Z0-9]+|![a-z^][^>|]*|[a-z][a-z0-9+.-]*:[^>|]*)(?:\|([^>]*))?>")


def escape(text: str) -> str:
    """``text`` as Slack's ``text`` field needs it: ``&``, ``<`` and ``>`` as entities, so nothing in it can
    form a mention, a channel ping or a link (Slack's "formatting text" rules)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def words_of(text: str) -> str:
    """What a person typed, from Slack's format: ``<@U1>`` → ``@U1``, ``<#C1|general>`` → ``#general``,
    ``<https://x|label>`` → ``label (https://x)``, ``<!here>`` → ``@here``, entities decoded."""
    def token(m: re.Match[str]) -> str:
        inner, label = m.group(1), m.group(2)
        if inner.startswith(("@", "#")):
            return inner[0] + label if label else inner
        if inner.startswith("!"):
            return label or "@" + inner[1:].split("^")[0]
        return f"{label} ({inner})" if label and label != inner else inner
    return html.unescape(_TOKEN_IN_TEXT.sub(token, text))


def check_tokens(bot: str, app: str) -> tuple[str, str]:
    """The two tokens without blanks when they have the right shapes (a bot token ``xoxb-…``, an app-level
    token ``xapp-…``); else UsageError saying which is wrong, never echoing it. Checked before any request."""
    bot, app = bot.strip(), app.strip()
    if not BOT_TOKEN.match(bot):
        raise UsageError("that is not a Slack bot token: it starts with xoxb- (OAuth & Permissions → Bot User "
                         "OAuth Token); nothing was sent")
    if not APP_TOKEN.match(app):
        raise UsageError("that is not a Slack app-level token: it starts with xapp- (Basic Information → App-Level "
                         "Tokens, with the connections:write scope); nothing was sent")
    return bot, app


def web_client(token: str, api_base: str | None) -> AsyncWebClient:
    """A Web API client on ``api_base`` (default Slack's) that makes each call once (no retry handlers)."""
    base = (api_base.rstrip("/") + "/api/") if api_base else DEFAULT_API
    return AsyncWebClient(token=token, base_url=base, timeout=30, retry_handlers=[])


async def check_token(bot: str, app: str, api_base: str | None, redact: Redactor) -> dict[str, Any]:
    """``auth.test`` with the bot token and ``apps.connections.open`` with the app token (the websocket is
    not opened): ``{"bot_user_id","team","user"}``. Raises PaluiError with a token-free message."""
    bot, app = check_tokens(bot, app)
    client = web_client(bot, api_base)
    try:
        me = await client.auth_test()
        await client.apps_connections_open(app_token=app)
    except SlackApiError as e:
        raise PaluiError(f"Slack refused the tokens: {redact(str(e.response.get('error')))}") from None
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        raise PaluiError(f"Slack is unreachable: {redact(f'{type(e).__name__}: {e}')}") from None
    return {"bot_user_id": me["user_id"], "team": me.get("team") or "", "user": me.get("user") or ""}


async def test_channel(c: ChatChannel, secret: dict[str, Any], redact: Redactor) -> str:
    """``palui channels test``: the tokens, and a test message to the person when paired."""
    api_base = c["config"].get("api_base")
    me = await check_token(str(secret.get("bot_token") or ""), str(secret.get("app_token") or ""), api_base, redact)
    out = f"ok: Slack answers as {me['user']} ({me['bot_user_id']}) in {me['team']}"
    if not c["person_chat"]:
        return out + f"; not paired yet (palui channels pair {c['name']})"
    try:
        await web_client(str(secret["bot_token"]), api_base).chat_postMessage(
            channel=c["person_chat"], text="Palui test message: this channel works.", mrkdwn=False)
    except (SlackApiError, aiohttp.ClientError, OSError) as e:
        raise PaluiError(f"auth.test worked, but sending to the person failed: {redact(str(e))}") from None
    return out + f"; a test message was sent to {c['person']}"


class SlackChannel(Channel):
    """A Slack app in Socket Mode (see the module docstring)."""

    kind = "slack"
    title = "Slack"
    text_limit = SLACK_TEXT_LIMIT
    how_to_answer = ("Press Approve or Deny below, Always to approve and from now on the same, Deny and stop to end "
                     "the turn's tool use (or /palui approve {id}, or /palui deny {id} REASON).")
    renew_options = "--token-file BOT_TOKEN_FILE --app-token-file APP_TOKEN_FILE"

    def __init__(self, svc: Service, name: str, redact: Redactor) -> None:
        super().__init__(svc, name, redact)
        ch = svc.channels.get(name)
        secret = svc.channels.secrets(name)
        self.bot_token, self.app_token = str(secret.get("bot_token") or ""), str(secret.get("app_token") or "")
        redact.add(self.bot_token)
        redact.add(self.app_token)
        self.api_base = ch["config"].get("api_base")
        self.me = str(ch["config"].get("bot_user_id") or "")
        self.web = web_client(self.bot_token, self.api_base)
        self.presses: dict[str, tuple[str, str]] = {}  # press id -> (channel, user), for the ephemeral answer
        self.dms: dict[str, str] = {}  # user -> the DM channel with the app

    @staticmethod
    def measure(text: str) -> int:
        return len(escape(text))

    # -- receiving -------------------------------------------------------------------------------------

    async def run(self) -> None:
        client = SocketModeClient(self.app_token, web_client=self.web, ping_interval=2, logger=log)
        client.socket_mode_request_listeners.append(self._on_request)
        backoff = Backoff(cap=30.0)
        try:
            while True:
                try:
                    if not await client.is_connected():
                        await client.connect_to_new_endpoint(force=True)
                    backoff.reset()
                    self.set_state("connected" if self.svc.channels.get(self.name)["person_id"] else "unpaired")
                    await asyncio.sleep(1.0)
                    continue
                except SlackApiError as e:
                    if e.response.get("error") in TOKEN_ERRORS:
                        self.credentials_refused("the tokens")
                    else:
                        self.set_state(f"error: Slack refused the connection: {e.response.get('error')}")
                except (aiohttp.ClientError, OSError, TimeoutError) as e:
                    self.set_state(f"error: Slack is unreachable: {type(e).__name__}: {e}")
                await asyncio.sleep(backoff.next_delay())
        finally:
            await client.close()  # type: ignore[no-untyped-call]  # slack_sdk leaves its close() unannotated

    async def _on_request(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        try:
            inb = await self.inbound(req.type, req.payload)
        except Exception as e:  # a malformed envelope must not stop the socket
            log.warning("%s: dropped a malformed %s envelope: %s", self.name, req.type, self.redact(str(e)))
            self.svc.channel_updates.mark(self.name, f"envelope:{req.envelope_id}", "malformed")
            return
        if inb is None:
            self.svc.channel_updates.mark(self.name, f"envelope:{req.envelope_id}", "ignored")
            return
        self.receive(inb)

    async def inbound(self, kind: str, payload: dict[str, Any]) -> Inbound | None:
        """An envelope's payload as an :class:`Inbound`, or None when Palui has nothing to do with it."""
        if kind == "events_api":
            event = payload.get("event") or {}
            if event.get("type") in ("message", "app_mention"):
                return self._message(event)
            return None
        if kind == "interactive" and payload.get("type") == "block_actions":
            return self._block_action(payload)
        if kind == "slash_commands":
            return await self._slash(payload)
        return None

    def _message(self, e: dict[str, Any]) -> Inbound | None:
        chat, subtype = str(e.get("channel") or ""), e.get("subtype")
        private = e.get("channel_type") == "im" or chat.startswith("D")
        if subtype == "message_changed":
            m = e.get("message") or {}
            if m.get("bot_id") or not m.get("user"):
                return None
            return Inbound(key=f"msg:{chat}:{e.get('ts')}", chat=chat, sender=str(m["user"]),
                           sender_name=str(m["user"]), private=private, edit_of=str(m.get("ts")))
        if e.get("bot_id") or subtype not in (None, "thread_broadcast", "file_share") or not e.get("user"):
            return None  # Palui's own and other bots' messages, joins, deletions…
        user = str(e["user"])
        words = words_of(str(e.get("text") or ""))
        if self.me:  # a mention of Palui says who the message is for, it is no word of the person's
            words = words.replace(f"@{self.me}", "").strip()
        quoted = [Quoted(words_of(str(a.get("text") or a.get("fallback") or "")),
                         f"{a.get('author_name') or 'someone'} ({a.get('author_id') or '?'})", "forwarded")
                  for a in e.get("attachments") or [] if a.get("is_share") or a.get("is_msg_unfurl")]
        if quoted and words.strip() == "":
            words = ""
        return Inbound(key=f"msg:{chat}:{e.get('ts')}", chat=chat, sender=user, sender_name=user,
                       private=private, text=words.lstrip() if words.lstrip().startswith("/") else words,
                       quoted=[q for q in quoted if q.text.strip()], target=str(e.get("thread_ts") or "") or None)

    def _block_action(self, p: dict[str, Any]) -> Inbound | None:
        actions = p.get("actions") or []
        user = str((p.get("user") or {}).get("id") or "")
        container = p.get("container") or {}
        chat = str(container.get("channel_id") or (p.get("channel") or {}).get("id") or "")
        if not actions or not user or not chat:
            return None
        a = actions[0]
        press_id = f"{a.get('action_ts')}:{user}"
        self.presses[press_id] = (chat, user)
        return Inbound(key=f"press:{press_id}", chat=chat, sender=user, sender_name=user,
                       private=chat.startswith("D"), press=str(a.get("value") or ""), press_id=press_id,
                       target=str(container.get("message_ts") or "") or None)

    async def _slash(self, p: dict[str, Any]) -> Inbound | None:
        user = str(p.get("user_id") or "")
        if not user:
            return None
        chat = await self._dm(user)
        verb = str(p.get("text") or "").strip()
        return Inbound(key=f"cmd:{p.get('trigger_id')}", chat=chat, sender=user, sender_name=user, private=True,
                       text="/" + verb if verb else "/help")

    async def _dm(self, user: str) -> str:
        """The DM channel of the app with ``user`` (``conversations.open``, remembered)."""
        if user not in self.dms:
            resp = await self.web.conversations_open(users=user)
            self.dms[user] = str(resp["channel"]["id"])
        return self.dms[user]

    # -- sending --------------------------------------------------------------------------------------

    def retry_delay(self, exc: BaseException) -> float | None:
        if isinstance(exc, SlackApiError):
            error = str(exc.response.get("error") or "")
            if exc.response.status_code == 429 or error == "ratelimited":
                return float(exc.response.headers.get("Retry-After", 1))
            if error in TOKEN_ERRORS:
                self.credentials_refused("the tokens")
                return 0.0  # waits for a new token: nothing in the outbox is dropped
            if error in PERMANENT:
                return None
            return 0.0
        if isinstance(exc, (aiohttp.ClientError, OSError, TimeoutError)):
            return 0.0
        return super().retry_delay(exc)

    def maybe_delivered(self, exc: BaseException) -> bool:
        # A request that timed out or lost its connection may have been taken (Slack has no idempotency key).
        return isinstance(exc, (TimeoutError, aiohttp.ServerDisconnectedError))

    async def send_message(self, chat: str, part: OutboxPart) -> str:
        """``chat.postMessage``: the text escaped, markup, names and unfurls off; an approval with its buttons."""
        text = escape(part["text"]) if part["text"].strip() else "(empty)"
        blocks = None
        if part["approval_id"] and part["fingerprint"] and part["kind"] == "approval":
            blocks = approval_blocks(part["text"], part["approval_id"], part["fingerprint"])
        resp = await self.web.chat_postMessage(channel=chat, text=text, blocks=blocks, mrkdwn=False, link_names=False,
                                               unfurl_links=False, unfurl_media=False)
        return str(resp["ts"])

    async def edit(self, chat: str, ref: str, part: OutboxPart) -> str:
        await self.web.chat_update(channel=chat, ts=ref, text=escape(part["text"]), blocks=[], link_names=False)
        return ref

    async def answer_press(self, press_id: str, text: str) -> None:
        chat, user = self.presses.pop(press_id, ("", ""))
        if chat:
            await self.web.chat_postEphemeral(channel=chat, user=user, text=escape(text))


def approval_blocks(text: str, approval_id: str, fp: str) -> list[dict[str, Any]]:
    """An approval's Block Kit: its text as ``plain_text`` (shown as it is), and Approve / Always / Deny / Deny and
    stop buttons whose values are bound to the approval as shown (:func:`palui.channels.views.button_data`)."""
    return [
        {"type": "section", "text": {"type": "plain_text", "text": text, "emoji": False}},
        {"type": "actions", "block_id": f"palui-{approval_id}", "elements": [
            {"type": "button", "action_id": kind, "text": {"type": "plain_text", "text": label},
             "value": views.button_data(approval_id, fp, kind),
             **({"style": "primary"} if kind == "approve" else {"style": "danger"} if kind == "deny" else {})}
            for kind, label in views.BUTTONS
        ]},
    ]


__all__ = ["SlackChannel", "approval_blocks", "check_token", "check_tokens", "escape", "test_channel", "words_of"]
