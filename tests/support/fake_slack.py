"""A fake of Slack's Web API and Socket Mode on 127.0.0.1, so the real ``slack_sdk`` runs against it.

Written from Slack's documents (the Web API method pages, "Using Socket Mode", "Formatting text for app
surfaces", Block Kit's reference); nothing copied. It serves, with aiohttp (a pinned dependency):

- ``POST /api/<method>`` (form, JSON or query parameters; the token as ``Authorization: Bearer`` or a
  ``token`` parameter), answering ``{"ok": true, …}`` or ``{"ok": false, "error": …}`` with HTTP 200 as Slack
  does, and HTTP 429 with ``Retry-After`` when rate limited: ``auth.test``, ``apps.connections.open`` (an
  app-level ``xapp-`` token only), ``chat.postMessage`` (text ≤ 40,000 characters, at most 50 blocks, a
  ``section`` text ≤ 3,000, a button's ``value`` ≤ 2,000 and ``action_id`` ≤ 255, ``actions`` ≤ 25
  elements), ``chat.update``, ``chat.postEphemeral``, ``conversations.open``;
- the Socket Mode websocket (``ws://…/link/?ticket=…``): ``hello`` on connect, then envelopes
  (``events_api``, ``interactive``, ``slash_commands``) with an ``envelope_id`` each, whose
  acknowledgements ``{"envelope_id": …}`` are recorded. Envelopes pushed while no socket is connected wait
  for the next one.

What a person sees of a message (:func:`visible`) is rendered as Slack renders it: ``&lt;`` ``&gt;``
``&amp;`` decoded; ``<@U…>``, ``<#C…|name>``, ``<!here>`` and links as their labels; a message with blocks
as its sections' text (``plain_text`` literally). :func:`pings` lists what a message would notify:
``<!channel>``, ``<!here>``, ``<!everyone>``, ``<@U…>`` tokens in ``text`` or ``mrkdwn``, and a bare
``@channel``/``@here``/``@everyone`` or ``@name`` when ``link_names`` is on.

Not modelled (docs/channels.md says so): OAuth and app installation, scopes (every token has every scope),
event retries when an envelope is not acknowledged within 3 s, ``disconnect`` warnings before a refresh,
threads, files, reactions, user groups, Enterprise Grid, rate-limit tiers (only an injected 429), and
``mrkdwn`` formatting beyond entities and tokens.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import WSMsgType, web

from support.tcp import free_port
from support.waiting import guard

__all__ = ["Call", "FakeSlack", "pings", "visible"]

_TOKEN = re.compile(r"<(@[UW][A-Z0-9]+|#C[A-Z0-9]+|![a-z^][^>|]*|[a-z][a-z0-9+.-]*:[^>|]*)(?:\|([^>]*))?>")
_BARE = re.compile(r"(?<![\w<])@(channel|here|everyone|[a-z][a-z0-9._-]*)\b")


def _render_tokens(text: str) -> str:
    def token(m: re.Match[str]) -> str:
        inner, label = m.group(1), m.group(2)
        if inner.startswith(("@", "#")):
            return inner[0] + (label or inner[1:])
        if inner.startswith("!"):
            return "@" + inner[1:].split("^")[0]
        return label or inner
    return html.unescape(_TOKEN.sub(token, text))


def visible(params: dict[str, Any]) -> str:
    """The text a person sees of a ``chat.postMessage``/``chat.update`` (see the module docstring)."""
    blocks = params.get("blocks")
    if blocks:
        texts = [b["text"]["text"] if b["text"]["type"] == "plain_text" else _render_tokens(b["text"]["text"])
                 for b in blocks if b.get("type") == "section" and isinstance(b.get("text"), dict)]
        return "\n".join(texts)
    return _render_tokens(str(params.get("text") or ""))


def pings(params: dict[str, Any]) -> list[str]:
    """What a message would notify (see the module docstring)."""
    texts = [str(params.get("text") or "")]
    texts += [b["text"]["text"] for b in params.get("blocks") or []
              if b.get("type") == "section" and isinstance(b.get("text"), dict) and b["text"]["type"] == "mrkdwn"]
    found = [m.group(1) for t in texts for m in _TOKEN.finditer(t) if m.group(1).startswith(("!", "@"))]
    if str(params.get("link_names")).lower() in ("1", "true"):
        found += ["@" + m.group(1) for t in texts for m in _BARE.finditer(html.unescape(t))]
    return found


@dataclass
class Call:
    """One Web API request: its method, parameters (blocks decoded), token, answer."""

    index: int
    method: str
    params: dict[str, Any]
    token: str
    ok: bool
    error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    status: int = 200


class FakeSlack:
    """The fake (see the module docstring). ``start()``/``stop()`` may be called again (same port)."""

    def __init__(self) -> None:
        self.bot_token = "xoxb-" + secrets.token_hex(12)
        self.app_token = "xapp-1-A0PALUI-" + secrets.token_hex(12)
        self.team, self.bot_user, self.bot_id, self.app_id = "T0PALUI", "U0PALUIBOT", "B0PALUI", "A0PALUI"
        self.port = 0
        self.calls: list[Call] = []
        self.envelopes: list[dict[str, Any]] = []  # every envelope pushed, in order
        self.acked: set[str] = set()
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.users: dict[str, str] = {}  # id -> name
        self.errors: list[BaseException] = []
        self._failures: list[tuple[str, str, int, Callable[[dict[str, Any]], bool] | None]] = []
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._ts = itertools.count(1)
        self._waiting: list[dict[str, Any]] = []
        self._sockets: set[web.WebSocketResponse] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-slack", daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def start(self) -> Self:
        if not self.port:
            self.port = free_port()
        self._call(self._start())
        return self

    def stop(self) -> None:
        """Close the sockets and stop listening (connections refused); what it holds is kept."""
        self._call(self._stop())

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_get("/link/", self._socket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def _stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        self._sockets.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def revoke(self) -> None:
        """The app's tokens are revoked (the app reinstalled): new ones are made, the old refused, the
        sockets closed."""
        self.bot_token = "xoxb-" + secrets.token_hex(12)
        self.app_token = "xapp-1-A0PALUI-" + secrets.token_hex(12)
        self._call(self._close_sockets())

    async def _close_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    def fail_next(self, method: str, error: str, status: int = 200,
                  match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Answer the next call of ``method`` (whose parameters ``match`` accepts) with ``error``."""
        with self._lock:
            self._failures.append((method, error, status, match))

    # -- test-facing: what people do ------------------------------------------------------------------------

    def user(self, uid: str, name: str) -> None:
        self.users[uid] = name

    def dm(self, uid: str) -> str:
        return "D" + uid[1:]

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def push(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Deliver an envelope of ``kind`` over the socket (or when one connects). Returns it, with
        ``calls_mark``: the number of Web API calls made before it."""
        env = {"envelope_id": secrets.token_hex(8), "type": kind, "payload": payload,
               "accepts_response_payload": kind != "events_api"}
        if kind == "events_api":
            env.update(retry_attempt=0, retry_reason="")
        with self._lock:
            env_record = {**env, "calls_mark": len(self.calls)}
            self.envelopes.append(env_record)
            self._waiting.append(env)
        asyncio.run_coroutine_threadsafe(self._flush(), self._loop)
        return env_record

    def _event(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.push("events_api", {"token": "verification-token", "team_id": self.team,
                                        "api_app_id": self.app_id, "event": event, "type": "event_callback",
                                        "event_id": "Ev" + secrets.token_hex(5).upper(),
                                        "event_time": int(time.time())})

    def message(self, uid: str, text: str, channel: str | None = None, **extra: Any) -> dict[str, Any]:
        """``uid`` writes ``text`` in ``channel`` (default: their DM with the app)."""
        channel = channel or self.dm(uid)
        ts = self._next_ts()
        msg = {"type": "message", "channel": channel, "user": uid, "text": text, "ts": ts, "event_ts": ts,
               "channel_type": "im" if channel.startswith("D") else "channel", **extra}
        with self._lock:
            self.messages[(channel, ts)] = msg
        return self._event(msg)

    def edit(self, envelope: dict[str, Any], text: str) -> dict[str, Any]:
        old = envelope["payload"]["event"]
        ts = self._next_ts()
        new = {**old, "text": text, "edited": {"user": old["user"], "ts": ts}}
        return self._event({"type": "message", "subtype": "message_changed", "hidden": True,
                            "channel": old["channel"], "channel_type": old["channel_type"], "ts": ts,
                            "event_ts": ts, "message": new, "previous_message": old})

    def share(self, uid: str, text: str, author: str, words: str = "") -> dict[str, Any]:
        """``uid`` shares (forwards) a message ``author`` wrote, in their DM with the app."""
        return self.message(uid, words, attachments=[{
            "is_share": True, "is_msg_unfurl": True, "author_id": author, "author_name": self.users.get(author, author),
            "text": text, "fallback": text, "ts": self._next_ts(), "channel_id": "C0GENERAL",
            "from_url": "https://example.slack.com/archives/C0GENERAL/p1"}])

    def slash(self, uid: str, text: str, channel: str | None = None) -> dict[str, Any]:
        """``uid`` types ``/palui TEXT`` (in ``channel``; default their DM with the app)."""
        channel = channel or self.dm(uid)
        return self.push("slash_commands", {"token": "verification-token", "team_id": self.team,
                                            "channel_id": channel, "channel_name": "directmessage",
                                            "user_id": uid, "user_name": self.users.get(uid, uid),
                                            "command": "/palui", "text": text, "api_app_id": self.app_id,
                                            "response_url": f"{self.url}/respond/{secrets.token_hex(4)}",
                                            "trigger_id": f"{next(self._ts)}.{secrets.token_hex(6)}"})

    def press(self, uid: str, channel: str, ts: str, value: str) -> dict[str, Any]:
        """``uid`` presses a button with ``value`` under the app's message ``ts`` in ``channel`` (the value is
        not checked against the message: a forged press can be sent)."""
        with self._lock:
            msg = dict(self.messages.get((channel, ts)) or {})
        return self.push("interactive", {
            "type": "block_actions", "user": {"id": uid, "username": self.users.get(uid, uid), "team_id": self.team},
            "api_app_id": self.app_id, "token": "verification-token", "trigger_id": secrets.token_hex(6),
            "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": False},
            "team": {"id": self.team}, "channel": {"id": channel, "name": "directmessage"}, "message": msg,
            "response_url": f"{self.url}/respond/{secrets.token_hex(4)}",
            "actions": [{"action_id": "approve" if value.endswith(":y") else "deny", "block_id": "palui",
                         "type": "button", "value": value, "action_ts": f"{time.time():.6f}",
                         "text": {"type": "plain_text", "text": "Approve"}}]})

    # -- test-facing: what the app did ------------------------------------------------------------------------

    def mark(self) -> int:
        with self._lock:
            return len(self.calls)

    def wait_for(self, pred: Callable[[Call], bool], timeout: float = 10, after: int = 0) -> Call:
        end = time.monotonic() + guard(timeout)
        with self._changed:
            while True:
                found = next((c for c in self.calls[after:] if pred(c)), None)
                if found is not None:
                    return found
                if time.monotonic() > end:
                    seen = [(c.method, c.error) for c in self.calls[after:]]
                    raise TimeoutError(f"no matching Slack call; saw {seen}")
                self._changed.wait(0.5)

    # -- the socket ----------------------------------------------------------------------------------------------

    async def _flush(self) -> None:
        with self._lock:
            if not self._sockets:
                return
            waiting, self._waiting = self._waiting, []
        ws = next(iter(self._sockets))
        for env in waiting:
            await ws.send_str(json.dumps(env))

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self._lock:
            valid = ticket.startswith(self.app_token[-8:])
        ws = web.WebSocketResponse(heartbeat=None)
        await ws.prepare(request)
        if not valid:
            await ws.close(code=4001, message=b"invalid ticket")
            return ws
        self._sockets.add(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": len(self._sockets),
                                      "debug_info": {"host": "fake-slack"},
                                      "connection_info": {"app_id": self.app_id}}))
        await self._flush()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    try:
                        data = json.loads(msg.data)
                    except ValueError:
                        continue
                    with self._changed:
                        if isinstance(data, dict) and data.get("envelope_id"):
                            self.acked.add(str(data["envelope_id"]))
                        self._changed.notify_all()
        finally:
            self._sockets.discard(ws)
        return ws

    # -- the Web API -------------------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            body = await request.json()
            params.update(body if isinstance(body, dict) else {})
        elif request.can_read_body:
            params.update(dict(await request.post()))
        for key in ("blocks", "attachments"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else str(params.pop("token", ""))
        status, body = 200, {"ok": True}
        try:
            with self._lock:
                result = self._answer(method, params, token)
            body.update(result)
        except _Refused as e:
            status, body = e.status, {"ok": False, "error": e.error}
        except Exception as e:  # noqa: BLE001 - a bug of the fake: recorded, answered as Slack's fatal_error
            self.errors.append(e)
            body = {"ok": False, "error": "fatal_error"}
        with self._changed:
            self.calls.append(Call(len(self.calls), method, params, token, body["ok"], body.get("error"),
                                   body, status))
            self._changed.notify_all()
        headers = {"Retry-After": "1"} if status == 429 else None
        return web.json_response(body, status=status, headers=headers)

    def _answer(self, method: str, p: dict[str, Any], token: str) -> dict[str, Any]:
        for i, (m, error, status, match) in enumerate(self._failures):
            if m == method and (match is None or match(p)):
                del self._failures[i]
                raise _Refused(error, status)
        if method == "apps.connections.open":
            if token != self.app_token:
                raise _Refused("invalid_auth" if token.startswith("xapp-") else "not_allowed_token_type")
            return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={self.app_token[-8:]}{secrets.token_hex(4)}"
                           f"&app_id={self.app_id}"}
        if token != self.bot_token:
            raise _Refused("not_authed" if not token else "invalid_auth")
        if method == "auth.test":
            return {"url": "https://palui-test.slack.com/", "team": "Palui Test", "user": "palui", "team_id": self.team,
                    "user_id": self.bot_user, "bot_id": self.bot_id}
        if method == "conversations.open":
            users = str(p.get("users") or "").split(",")
            if len(users) != 1 or users[0] not in self.users:
                raise _Refused("user_not_found")
            return {"channel": {"id": self.dm(users[0])}}
        if method == "chat.postMessage":
            channel = self._channel(p)
            self._check_message(p)
            ts = self._next_ts()
            msg = {"type": "message", "user": self.bot_user, "bot_id": self.bot_id, "text": p.get("text") or "",
                   "ts": ts, "blocks": p.get("blocks") or []}
            self.messages[(channel, ts)] = msg
            return {"channel": channel, "ts": ts, "message": msg}
        if method == "chat.update":
            channel = self._channel(p)
            msg = self.messages.get((channel, str(p.get("ts"))))
            if msg is None:
                raise _Refused("message_not_found")
            if msg.get("user") != self.bot_user:
                raise _Refused("cant_update_message")
            self._check_message(p)
            msg.update(text=p.get("text") or "", blocks=p.get("blocks") or [])
            return {"channel": channel, "ts": p["ts"], "text": msg["text"]}
        if method == "chat.postEphemeral":
            self._channel(p)
            if str(p.get("user") or "") not in self.users:
                raise _Refused("user_not_in_channel")
            if not str(p.get("text") or "").strip():
                raise _Refused("no_text")
            return {"message_ts": self._next_ts()}
        raise _Refused("unknown_method")

    def _channel(self, p: dict[str, Any]) -> str:
        channel = str(p.get("channel") or "")
        if not channel.startswith(("D", "C")) or (channel.startswith("D") and "U" + channel[1:] not in self.users):
            raise _Refused("channel_not_found")
        return channel

    @staticmethod
    def _check_message(p: dict[str, Any]) -> None:
        text, blocks = str(p.get("text") or ""), p.get("blocks")
        if not text.strip() and not blocks:
            raise _Refused("no_text")
        if len(text) > 40_000:
            raise _Refused("msg_too_long")
        if blocks is None:
            return
        if not isinstance(blocks, list) or len(blocks) > 50:
            raise _Refused("invalid_blocks")
        for b in blocks:
            if b.get("type") == "section":
                t = b.get("text") or {}
                if t.get("type") not in ("plain_text", "mrkdwn") or not 1 <= len(str(t.get("text") or "")) <= 3000:
                    raise _Refused("invalid_blocks")
            elif b.get("type") == "actions":
                elements = b.get("elements") or []
                if not 1 <= len(elements) <= 25:
                    raise _Refused("invalid_blocks")
                for e in elements:
                    if len(str(e.get("value") or "")) > 2000 or not 1 <= len(str(e.get("action_id") or "")) <= 255:
                        raise _Refused("invalid_blocks")
            else:
                raise _Refused("invalid_blocks")


class _Refused(Exception):
    def __init__(self, error: str, status: int = 200) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
