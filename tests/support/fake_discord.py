"""A fake of Discord's REST API (v10) and gateway on 127.0.0.1, so the real discord.py runs against it.

Written from Discord's documents (the API reference: Gateway, Message, Channel, Interactions, Message
Components, Allowed Mentions); nothing copied. It serves, with aiohttp (a pinned dependency):

- REST under ``/api/v10`` with ``Authorization: Bot <token>`` (401 ``{"message": "401: Unauthorized",
  "code": 0}`` otherwise): ``GET /users/@me``, ``GET /oauth2/applications/@me``, ``GET /gateway`` and
  ``/gateway/bot``, ``POST
  /channels/{id}/messages`` (content ≤ 2,000 characters, ``nonce`` ≤ 25 characters with ``enforce_nonce``:
  the same nonce from the bot within a few minutes answers the first message and makes none, at most 5
  action rows of at most 5 buttons whose ``custom_id`` ≤ 100 and ``label`` ≤ 80 characters), ``PATCH
  /channels/{id}/messages/{id}`` (only the bot's own), ``POST /channels/{id}/typing``, ``POST
  /interactions/{id}/{token}/callback`` (once per interaction: a second answer is 400 "Interaction has
  already been acknowledged");
- the gateway websocket (``/gateway/?v=10&encoding=json``, with ``compress=zlib-stream`` one zlib stream
  per connection, each payload ending in a sync flush): HELLO, IDENTIFY checked (a wrong token closes with
  4004 "Authentication failed"), READY with a ``session_id`` and ``resume_gateway_url``, heartbeats
  acknowledged, dispatches numbered by ``s``; **RESUME** with a known session replays what was dispatched
  after the client's ``seq`` and sends RESUMED (an unknown one gets INVALID_SESSION ``false``).
  :meth:`FakeDiscord.drop_gateway` closes the connection as a network fault would (close code 4000):
  events pushed meanwhile wait in the session for the resume.

What a person sees of a message (:func:`visible`): the content with Discord's backslash escapes removed.
:func:`pings`: the mentions a message would notify, from ``@everyone``, ``@here``, ``<@id>``, ``<@!id>`` and
``<@&id>`` in its unescaped content, as its ``allowed_mentions`` permit (no ``allowed_mentions``: all).

Not modelled (docs/channels.md says so): guilds, roles, permissions and intents (a DM always reaches the
bot), sharding, rate-limit buckets (only injected failures), attachments and embeds, slash commands,
interaction timeouts (3 s) and follow-ups, the ``zstd`` transport, message history.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import secrets
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from aiohttp import WSMsgType, web

from support.tcp import free_port
from support.waiting import guard

__all__ = ["Call", "FakeDiscord", "pings", "visible"]

_ESCAPE = re.compile(r"\\([^0-9A-Za-z\s])")
_MENTION = re.compile(r"@(everyone|here)|<@!?(\d+)>|<@&(\d+)>")
NONCE_SECONDS = 300.0


def visible(content: str) -> str:
    return _ESCAPE.sub(r"\1", content)


def pings(body: dict[str, Any]) -> list[str]:
    """Who a message would notify (see the module docstring)."""
    content = str(body.get("content") or "")
    raw = _ESCAPE.sub("\0", content)  # an escaped character cannot start or be part of a mention
    allowed = body.get("allowed_mentions")
    parse = set(allowed.get("parse") or []) if isinstance(allowed, dict) else {"everyone", "users", "roles"}
    users = set(allowed.get("users") or []) if isinstance(allowed, dict) else set()
    out = []
    for m in _MENTION.finditer(raw):
        if m.group(1) and "everyone" in parse:
            out.append("@" + m.group(1))
        elif m.group(2) and ("users" in parse or m.group(2) in users):
            out.append(f"<@{m.group(2)}>")
        elif m.group(3) and "roles" in parse:
            out.append(f"<@&{m.group(3)}>")
    return out


@dataclass
class Call:
    """One REST request: method, path, JSON body, status, answer."""

    index: int
    method: str
    path: str
    body: dict[str, Any]
    status: int
    result: Any = None
    at: float = field(default_factory=time.monotonic)

    @property
    def ok(self) -> bool:
        return self.status < 300


class _Session:
    def __init__(self, sid: str) -> None:
        self.id = sid
        self.seq = 0
        self.log: list[dict[str, Any]] = []  # dispatches with their s
        self.ws: web.WebSocketResponse | None = None
        self.zlib: Any = None
        self.sent = 0  # how many of ``log`` the client was sent


class FakeDiscord:
    """The fake (see the module docstring). ``start()``/``stop()`` may be called again (same port)."""

    def __init__(self) -> None:
        self.bot_id = str(1_000_000_000_000_000_001)
        self.app_id = self.bot_id
        self.token = self._make_token()
        self.port = 0
        self.calls: list[Call] = []
        self.gateway_ops: list[tuple[int, str]] = []  # (op, session) the clients sent: 2 IDENTIFY, 6 RESUME
        self.users: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[str, Any]] = {}
        self.errors: list[BaseException] = []
        self._nonces: dict[str, tuple[str, float]] = {}
        self._interactions: dict[str, str] = {}  # id -> token (unanswered)
        self._ids = itertools.count(1_100_000_000_000_000_000)
        self._sessions: dict[str, _Session] = {}
        self._current: _Session | None = None
        self._failures: list[tuple[str, int, Callable[[dict[str, Any]], bool] | None]] = []
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-discord", daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None
        self.user(self.bot_id, "palui", bot=True)

    def _make_token(self) -> str:
        import base64

        head = base64.urlsafe_b64encode(self.bot_id.encode()).decode().rstrip("=")
        return f"{head}.{secrets.token_urlsafe(5)}.{secrets.token_urlsafe(27)}"

    def _id(self) -> str:
        return str(next(self._ids))

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
        """Close the gateway and stop listening (connections refused); sessions and messages are kept."""
        self._call(self._stop())

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway/", self._gateway)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def _stop(self) -> None:
        for s in self._sessions.values():
            if s.ws is not None:
                await s.ws.close(code=4000)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def revoke(self) -> None:
        """The bot's token is reset: the old one is refused (REST 401, the gateway closed with 4004)."""
        self.token = self._make_token()
        self._call(self._close_current(4004))

    def drop_gateway(self) -> None:
        """Close the gateway connection as a network fault would (4000: the client may resume)."""
        self._call(self._close_current(4000))

    async def _close_current(self, code: int) -> None:
        for s in self._sessions.values():
            if s.ws is not None:
                await s.ws.close(code=code)
                s.ws = None

    def fail_next(self, route: str, status: int, match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Answer the next request whose ``"METHOD /path"`` contains ``route`` (and body ``match`` accepts)."""
        with self._lock:
            self._failures.append((route, status, match))

    # -- test-facing: people --------------------------------------------------------------------------------

    def user(self, uid: str, name: str, bot: bool = False) -> dict[str, Any]:
        u = {"id": uid, "username": name, "discriminator": "0", "global_name": name.title(), "avatar": None,
             "bot": bot, "public_flags": 0}
        self.users[uid] = u
        return u

    def dm(self, uid: str) -> str:
        """The DM channel of the bot with ``uid``."""
        return str(int(uid) + 7)

    def _message(self, channel: str, author: str, content: str, **extra: Any) -> dict[str, Any]:
        return {"id": self._id(), "channel_id": channel, "author": self.users[author], "content": content,
                "timestamp": datetime.now(UTC).isoformat(), "edited_timestamp": None, "tts": False,
                "mention_everyone": False, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
                "pinned": False, "type": 0, "flags": 0, "components": [], **extra}

    def say(self, uid: str, content: str, **extra: Any) -> dict[str, Any]:
        """``uid`` writes in their DM with the bot; returns the dispatched message (with ``calls_mark``)."""
        with self._lock:
            m = self._message(self.dm(uid), uid, content, **extra)
            self.messages[m["id"]] = m
        return self._dispatch("MESSAGE_CREATE", m)

    def forward(self, uid: str, content: str) -> dict[str, Any]:
        """``uid`` forwards a message from another chat into their DM: a reference of type 1 and a snapshot."""
        snap = {"content": content, "timestamp": datetime.now(UTC).isoformat(), "edited_timestamp": None,
                "type": 0, "flags": 0, "attachments": [], "embeds": [], "mentions": [], "mention_roles": [],
                "components": []}
        return self.say(uid, "", message_reference={"type": 1, "channel_id": "555", "message_id": self._id()},
                        message_snapshots=[{"message": snap}])

    def edit(self, message: dict[str, Any], content: str) -> dict[str, Any]:
        with self._lock:
            m = self.messages[message["id"]]
            m.update(content=content, edited_timestamp=datetime.now(UTC).isoformat())
            return self._dispatch("MESSAGE_UPDATE", dict(m))

    def press(self, uid: str, message_id: str, custom_id: str) -> dict[str, Any]:
        """``uid`` presses a button with ``custom_id`` under the bot's message (not checked: a forged press
        can be sent)."""
        with self._lock:
            m = self.messages[message_id]
            iid, token = self._id(), secrets.token_urlsafe(24)
            self._interactions[iid] = token
            d = {"id": iid, "application_id": self.app_id, "type": 3, "token": token, "version": 1,
                 "data": {"custom_id": custom_id, "component_type": 2}, "channel_id": m["channel_id"],
                 "channel": {"id": m["channel_id"], "type": 1, "recipients": [self.users[uid]]},
                 "user": self.users[uid], "message": dict(m), "locale": "en-US", "app_permissions": "0",
                 "entitlements": [], "authorizing_integration_owners": {"1": uid}, "context": 1,
                 "attachment_size_limit": 10_485_760}
        return self._dispatch("INTERACTION_CREATE", d)

    def _dispatch(self, event: str, d: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            record = {**d, "calls_mark": len(self.calls)}
            session = self._current
            if session is None:
                return record
            session.seq += 1
            session.log.append({"op": 0, "t": event, "s": session.seq, "d": d})
        asyncio.run_coroutine_threadsafe(self._flush(session), self._loop)
        return record

    # -- test-facing: what the bot did ------------------------------------------------------------------------

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
                    seen = [(c.method, c.path, c.status) for c in self.calls[after:]]
                    raise TimeoutError(f"no matching Discord call; saw {seen}")
                self._changed.wait(0.5)

    # -- the gateway ------------------------------------------------------------------------------------------

    async def _send(self, s: _Session, payload: dict[str, Any]) -> None:
        if s.ws is None or s.ws.closed:
            return
        data = json.dumps(payload)
        if s.zlib is not None:
            await s.ws.send_bytes(s.zlib.compress(data.encode()) + s.zlib.flush(zlib.Z_SYNC_FLUSH))
        else:
            await s.ws.send_str(data)

    async def _flush(self, s: _Session) -> None:
        while s.sent < len(s.log) and s.ws is not None and not s.ws.closed:
            s.sent += 1
            await self._send(s, s.log[s.sent - 1])

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(heartbeat=None, max_msg_size=0)
        await ws.prepare(request)
        conn = _Session("")
        conn.ws = ws
        conn.zlib = zlib.compressobj() if request.query.get("compress") == "zlib-stream" else None
        await self._send(conn, {"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
        session: _Session | None = None
        async for msg in ws:
            if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                continue
            try:
                data = json.loads(msg.data)
            except ValueError:
                await ws.close(code=4002)
                break
            op, d = data.get("op"), data.get("d") or {}
            if op == 1:
                await self._send(session or conn, {"op": 11, "d": None, "s": None, "t": None})
                continue
            if op in (2, 6):
                with self._lock:
                    self.gateway_ops.append((op, str(d.get("session_id") or "")))
                    refused = d.get("token") != self.token
                    if refused:
                        session = None
                    elif op == 2:
                        session = _Session(secrets.token_hex(16))
                        self._sessions[session.id] = session
                    else:
                        session = self._sessions.get(str(d.get("session_id")))
                if refused:
                    await ws.close(code=4004, message=b"Authentication failed.")
                    break
                if session is None:
                    await self._send(conn, {"op": 9, "d": False, "s": None, "t": None})
                    continue
                session.ws, session.zlib = ws, conn.zlib
                with self._lock:
                    self._current = session
                if op == 2:
                    await self._ready(session)
                else:
                    session.sent = int(d.get("seq") or 0)  # replayed: what was dispatched after the client's seq
                    await self._flush(session)
                    session.seq += 1
                    session.log.append({"op": 0, "t": "RESUMED", "s": session.seq, "d": {}})
                    await self._flush(session)
                with self._changed:
                    self._changed.notify_all()
        if session is not None and session.ws is ws:
            session.ws = None
        return ws

    async def _ready(self, s: _Session) -> None:
        s.seq += 1
        ready = {"op": 0, "t": "READY", "s": s.seq, "d": {
            "v": 10, "user": {**self.users[self.bot_id], "verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [], "session_id": s.id, "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway/",
            "shard": [0, 1], "application": {"id": self.app_id, "flags": 0}, "private_channels": [],
            "relationships": [], "presences": []}}
        s.log.append(ready)
        await self._flush(s)

    # -- REST ----------------------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        body: dict[str, Any] = {}
        if request.can_read_body and request.content_type == "application/json":
            got = await request.json()
            body = got if isinstance(got, dict) else {}
        status, result = 200, None
        try:
            with self._lock:
                status, result = self._answer(request.method, path, body,
                                              request.headers.get("Authorization", ""))
        except _Error as e:
            status, result = e.status, {"message": e.message, "code": e.code}
        except Exception as e:  # noqa: BLE001 - a bug of the fake
            self.errors.append(e)
            status, result = 500, {"message": "500: Internal Server Error", "code": 0}
        with self._changed:
            self.calls.append(Call(len(self.calls), request.method, path, body, status, result))
            self._changed.notify_all()
        if status == 204:
            return web.Response(status=204)
        # exactly "application/json", as Discord sends it (discord.py reads anything else as text)
        return web.Response(body=json.dumps(result).encode(), status=status,
                            headers={"Content-Type": "application/json"})

    def _answer(self, method: str, path: str, body: dict[str, Any], auth: str) -> tuple[int, Any]:
        route = f"{method} {path}"
        for i, (want, status, match) in enumerate(self._failures):
            if want in route and (match is None or match(body)):
                del self._failures[i]
                raise _Error(status, f"{status}: injected", 0)
        if m := re.fullmatch(r"POST /interactions/(\d+)/([^/]+)/callback", route):
            if self._interactions.get(m.group(1)) != m.group(2):
                raise _Error(400, "Interaction has already been acknowledged.", 40060)
            del self._interactions[m.group(1)]
            data = body.get("data") or {}
            msg = {**self._message("0", self.bot_id, str(data.get("content") or "")), "flags": 64}
            return 200, {"interaction": {"id": m.group(1), "type": 3, "response_message_id": msg["id"],
                                         "response_message_loading": False, "response_message_ephemeral": True},
                         "resource": {"type": 4, "message": msg}}
        if auth != f"Bot {self.token}":
            raise _Error(401, "401: Unauthorized", 0)
        if route == "GET /users/@me":
            return 200, self.users[self.bot_id]
        if route == "GET /oauth2/applications/@me":
            return 200, {"id": self.app_id, "name": "Palui", "icon": None, "description": "", "summary": "",
                         "bot_public": False, "bot_require_code_grant": False, "verify_key": "0" * 64, "flags": 0,
                         "team": None, "owner": self.users[self.bot_id], "bot": self.users[self.bot_id]}
        if route in ("GET /gateway", "GET /gateway/bot"):
            return 200, {"url": f"ws://127.0.0.1:{self.port}/gateway/", "shards": 1,
                         "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0,
                                                 "max_concurrency": 1}}
        if m := re.fullmatch(r"POST /channels/(\d+)/typing", route):
            self._dm_of(m.group(1))
            return 204, None
        if m := re.fullmatch(r"POST /channels/(\d+)/messages", route):
            channel = m.group(1)
            self._dm_of(channel)
            nonce = body.get("nonce")
            if nonce is not None and len(str(nonce)) > 25:
                raise _Error(400, "Invalid Form Body (nonce)", 50035)
            if nonce is not None and body.get("enforce_nonce"):
                seen = self._nonces.get(str(nonce))
                if seen and time.monotonic() - seen[1] < NONCE_SECONDS:
                    return 200, self.messages[seen[0]]
            self._check(body)
            msg = self._message(channel, self.bot_id, str(body.get("content") or ""),
                                components=body.get("components") or [], nonce=nonce)
            msg["_body"] = body
            self.messages[msg["id"]] = msg
            if nonce is not None:
                self._nonces[str(nonce)] = (msg["id"], time.monotonic())
            return 200, {k: v for k, v in msg.items() if k != "_body"}
        if m := re.fullmatch(r"PATCH /channels/(\d+)/messages/(\d+)", route):
            msg = self.messages.get(m.group(2))
            if msg is None or msg["channel_id"] != m.group(1):
                raise _Error(404, "Unknown Message", 10008)
            if msg["author"]["id"] != self.bot_id:
                raise _Error(403, "Cannot edit a message authored by another user", 50005)
            self._check(body)
            if "content" in body:
                msg["content"] = body["content"]
            if "components" in body:
                msg["components"] = body["components"] or []
            msg["edited_timestamp"] = datetime.now(UTC).isoformat()
            msg["_body"] = body
            return 200, {k: v for k, v in msg.items() if k != "_body"}
        raise _Error(404, "404: Not Found", 0)

    def _dm_of(self, channel: str) -> str:
        uid = str(int(channel) - 7)
        if uid not in self.users or self.users[uid]["bot"]:
            raise _Error(404, "Unknown Channel", 10003)
        return uid

    @staticmethod
    def _check(body: dict[str, Any]) -> None:
        content = body.get("content")
        if content is not None and len(str(content)) > 2000:
            raise _Error(400, "Invalid Form Body (content: Must be 2000 or fewer in length.)", 50035)
        rows = body.get("components") or []
        if len(rows) > 5:
            raise _Error(400, "Invalid Form Body (components)", 50035)
        for row in rows:
            buttons = row.get("components") or []
            if row.get("type") != 1 or not 1 <= len(buttons) <= 5:
                raise _Error(400, "Invalid Form Body (components: an action row)", 50035)
            for b in buttons:
                if b.get("type") != 2 or len(str(b.get("custom_id") or "")) > 100 or len(str(b.get("label"))) > 80:
                    raise _Error(400, "Invalid Form Body (components: a button)", 50035)


class _Error(Exception):
    def __init__(self, status: int, message: str, code: int) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
