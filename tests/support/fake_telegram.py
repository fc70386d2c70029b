"""A fake of the Telegram Bot API on 127.0.0.1, for tests of a bot that uses a real client library.

The fake speaks the Bot API wire format (``/bot<token>/<method>``, JSON answers
``{"ok": true, "result": …}`` or ``{"ok": false, "error_code": …, "description": …}``) so that
python-telegram-bot (or any client whose base URL can be changed) runs against it unmodified::

    with FakeTelegram() as fake:
        bot = telegram.Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)
        update = fake.push_message(user_id=42, chat_id=42, text="hello")
        call = fake.wait_for(lambda c: c.method == "sendMessage", after=update)
        latency = call.received_at - update.queued_at

What it implements (https://core.telegram.org/bots/api):

- ``getMe``, ``deleteWebhook``, ``getWebhookInfo``, ``setMyCommands``/``getMyCommands``;
- ``getUpdates`` with real long polling (``timeout``), ``limit`` and ``offset``: an update is
  *confirmed* — removed for good — only when a later ``getUpdates`` passes an offset greater than
  its ``update_id``; a negative offset keeps only the last ``-offset`` updates. A second long poll
  while one is waiting ends the first with ``409 Conflict`` (two bot instances), as Telegram does;
- ``sendMessage``, ``editMessageText``, ``editMessageReplyMarkup``, ``deleteMessage``,
  ``answerCallbackQuery``, ``sendChatAction``, ``sendDocument`` (multipart upload), ``getFile`` and
  file downloads under ``/file/bot<token>/<path>``;
- Telegram's checks that a bot is likely to trip over: text 1-4096 characters after entity parsing
  (counted in UTF-16 code units, the stricter reading), caption ≤ 1024, ``callback_data`` 1-64
  bytes, ``parse_mode`` HTML validated like Telegram (only its tags; bare ``<``, ``>``, ``&``
  rejected with "can't parse entities"), MarkdownV2 partly (reserved characters that must always
  be escaped), "message is not modified", "message to edit not found", "chat not found",
  "query is too old" for an unknown or twice-answered callback query, "bot was blocked";
- a wrong bot token: ``401 Unauthorized`` for a well-formed token that is not the bot's,
  ``404 Not Found`` for a malformed one or an unknown method;
- injected failures: :meth:`FakeTelegram.rate_limit_next` answers the next call(s) of a method with
  ``429 Too Many Requests: retry after N`` and ``parameters.retry_after``;
  :meth:`FakeTelegram.fail_next` with any other error (``after=N``: once N calls went through).

Parameters arrive as JSON, as a form (python-telegram-bot sends
``application/x-www-form-urlencoded`` with nested values JSON-encoded), as multipart or in the
query string; they are normalised by field name (ints, bools, JSON objects) so that
:attr:`Call.params` always holds typed values: ``call.params["reply_markup"]["inline_keyboard"]``.

Every request is recorded as a :class:`Call` (including rejected ones, with their status);
every update as a :class:`QueuedUpdate` with the time it was queued, first delivered and
confirmed. All times are :func:`time.perf_counter` values of this process.

The server runs uvicorn (Starlette app) in a daemon thread with its own event loop; the
test-facing methods are thread-safe and may be called from a test thread or from an event loop
that runs the client under test.
"""

from __future__ import annotations

import asyncio
import copy
import html
import itertools
import json
import re
import secrets
import string
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from support.tcp import listen_tcp
from support.waiting import guard

__all__ = [
    "MAX_CALLBACK_DATA",
    "MAX_CAPTION",
    "MAX_TEXT",
    "TOKEN_RE",
    "ApiError",
    "Call",
    "FakeTelegram",
    "QueuedUpdate",
    "UploadedFile",
    "button_data",
    "make_token",
]

MAX_TEXT = 4096
"""Telegram's limit for a message text, after entity parsing."""
MAX_CAPTION = 1024
MAX_CALLBACK_DATA = 64
"""Bytes (UTF-8) of ``callback_data`` in an inline keyboard button."""
MAX_CALLBACK_ANSWER = 200
MAX_POLL_TIMEOUT = 50.0
"""Telegram caps ``getUpdates`` long polling at 50 s."""

TOKEN_RE = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{30,50}$")
"""The shape of a bot token; anything else is answered 404 (Telegram does the same)."""

CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)

_CONFLICT = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)
_QUERY_TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"


def make_token(bot_id: int = 7000000001) -> str:
    """A random token of the real shape ``<bot id>:<35 characters>``."""
    alphabet = string.ascii_letters + string.digits + "_-"
    return f"{bot_id}:AA" + "".join(secrets.choice(alphabet) for _ in range(33))


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class UploadedFile:
    """A file part of a multipart request (``sendDocument``)."""

    field: str
    filename: str | None
    content_type: str | None
    data: bytes


@dataclass(frozen=True)
class Call:
    """One request the client made to the fake, answered or rejected."""

    index: int
    method: str
    """Canonical Bot API name (``sendMessage``), or the requested name when it is unknown."""
    params: dict[str, Any]
    files: dict[str, UploadedFile]
    received_at: float
    """:func:`time.perf_counter` when the request reached the fake."""
    answered_at: float
    status: int
    """HTTP status of the answer: 200, or the error code (400, 401, 404, 409, 429…)."""
    result: Any = None
    description: str | None = None
    """The error description when ``status != 200``."""

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class QueuedUpdate:
    """An update queued by the test, with its life times (perf_counter values)."""

    update_id: int
    payload: dict[str, Any]
    queued_at: float
    calls_mark: int
    """``len(fake.calls)`` when the update was queued: pass the update as ``after=`` to
    :meth:`FakeTelegram.wait_for` to match only calls made after it."""
    delivered_at: float | None = None
    deliveries: int = 0
    confirmed_at: float | None = None

    @property
    def kind(self) -> str:
        return next(k for k in self.payload if k != "update_id")

    @property
    def message_id(self) -> int | None:
        msg = self.payload.get("message") or self.payload.get("edited_message")
        return msg["message_id"] if msg else None


class ApiError(Exception):
    """Raised inside a method handler; becomes ``{"ok": false, …}`` with that status."""

    def __init__(self, code: int, description: str, parameters: dict[str, Any] | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.parameters = parameters


@dataclass
class _Injected:
    code: int
    description: str
    parameters: dict[str, Any] | None
    remaining: int
    let_through: int = 0  # calls answered normally before this failure starts
    match: Callable[[dict[str, Any]], bool] | None = None  # only calls whose parameters match fail


@dataclass(eq=False)
class _Poll:
    event: asyncio.Event
    conflicted: bool = False


# --------------------------------------------------------------------------- parameter decoding

_INT_FIELDS = frozenset(
    {
        "chat_id",
        "from_chat_id",
        "message_id",
        "message_thread_id",
        "reply_to_message_id",
        "offset",
        "limit",
        "timeout",
        "user_id",
        "cache_time",
        "duration",
        "width",
        "height",
        "until_date",
    }
)
_BOOL_FIELDS = frozenset(
    {
        "show_alert",
        "disable_notification",
        "protect_content",
        "drop_pending_updates",
        "disable_web_page_preview",
        "allow_sending_without_reply",
        "disable_content_type_detection",
        "allow_paid_broadcast",
        "has_spoiler",
    }
)
_JSON_FIELDS = frozenset(
    {
        "reply_markup",
        "entities",
        "caption_entities",
        "allowed_updates",
        "reply_parameters",
        "link_preview_options",
        "commands",
        "scope",
        "media",
    }
)
_INT_RE = re.compile(r"^-?[0-9]+$")


def _coerce(name: str, value: Any) -> Any:
    """Decode one parameter the way the Bot API does: typed by its field name."""
    if name in _JSON_FIELDS and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            if name == "reply_markup":
                raise ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object") from None
            raise ApiError(400, f"Bad Request: can't parse {name} JSON object") from None
    if name in _INT_FIELDS and isinstance(value, str):
        if _INT_RE.match(value.strip()):
            return int(value.strip())
        if name == "chat_id":
            return value  # "@channelusername"
        raise ApiError(400, f"Bad Request: invalid {name} specified")
    if name in _BOOL_FIELDS and isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return value


# --------------------------------------------------------------------------- text checks


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's entity offsets."""
    return len(text.encode("utf-16-le")) // 2


_HTML_TAGS = frozenset(
    {
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "tg-emoji",
        "code",
        "pre",
        "blockquote",
    }
)
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s[^<>]*)?)>")
_ENTITY_RE = re.compile(r"&(?:lt|gt|amp|quot|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});")


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


def html_visible_text(text: str) -> str:
    """The text Telegram shows for ``parse_mode=HTML``; raises :class:`ApiError` (400,
    "can't parse entities") for what Telegram refuses: unknown tags, unbalanced tags, and
    ``<``, ``>`` or ``&`` that are not part of a tag or a supported entity."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "<":
            m = _TAG_RE.match(text, i)
            if m is None:
                raise ApiError(
                    400,
                    f"Bad Request: can't parse entities: Unsupported start tag at byte offset {_byte_offset(text, i)}"
                )
            closing, name = m.group(1) == "/", m.group(2).lower()
            if name not in _HTML_TAGS:
                raise ApiError(
                    400,
                    f'Bad Request: can\'t parse entities: Unsupported start tag "{name}" at byte offset '
                    f"{_byte_offset(text, i)}",
                )
            if closing:
                if not stack or stack[-1] != name:
                    expected = f'expected "</{stack[-1]}>", ' if stack else ""
                    raise ApiError(
                        400,
                        f"Bad Request: can't parse entities: Unmatched end tag at byte offset {_byte_offset(text, i)}, "
                        f'{expected}found "</{name}>"',
                    )
                stack.pop()
            else:
                stack.append(name)
            i = m.end()
            continue
        if c == "&":
            m = _ENTITY_RE.match(text, i)
            if m is None:
                raise ApiError(
                    400,
                    "Bad Request: can't parse entities: Character '&' is reserved and must be written as &amp; "
                    f"(byte offset {_byte_offset(text, i)})",
                )
            out.append(html.unescape(m.group(0)))
            i = m.end()
            continue
        if c == ">":
            raise ApiError(
                400,
                "Bad Request: can't parse entities: Character '>' is reserved and must be written as &gt; "
                f"(byte offset {_byte_offset(text, i)})",
            )
        out.append(c)
        i += 1
    if stack:
        raise ApiError(
            400, f'Bad Request: can\'t parse entities: Can\'t find end tag corresponding to start tag "{stack[-1]}"'
        )
    return "".join(out)


_MDV2_ALWAYS_ESCAPED = frozenset("#+-={}.!")
_MDV2_MARKERS = re.compile(r"\\(.)|[*_~|`]", re.DOTALL)


def markdown_v2_visible_text(text: str) -> str:
    """A partial MarkdownV2 check: the reserved characters that never start an entity
    (``# + - = { } . !``) must be escaped with ``\\`` outside code; ``>`` only starts a line.
    Returns an approximation of the visible text (escapes and markers removed)."""
    in_code = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":
            in_code = not in_code
        elif not in_code and (c in _MDV2_ALWAYS_ESCAPED or (c == ">" and i > 0 and text[i - 1] != "\n")):
            raise ApiError(
                400,
                f"Bad Request: can't parse entities: Character '{c}' is reserved and must be escaped with the "
                "preceding '\\'",
            )
        i += 1
    visible = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return _MDV2_MARKERS.sub(lambda m: m.group(1) or "", visible)


def visible_text(text: str, parse_mode: str | None) -> str:
    if parse_mode is None or parse_mode == "":
        return text
    mode = parse_mode.lower()
    if mode == "html":
        return html_visible_text(text)
    if mode == "markdownv2":
        return markdown_v2_visible_text(text)
    if mode == "markdown":
        return re.sub(r"[*_`\[]", "", text)
    raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")


def _check_text(text: Any, parse_mode: Any, *, what: str = "text", limit: int = MAX_TEXT) -> str:
    if text is None or (isinstance(text, str) and not text.strip()):
        raise ApiError(400, "Bad Request: message text is empty")
    if not isinstance(text, str):
        text = str(text)
    shown = visible_text(text, parse_mode if isinstance(parse_mode, str) else None)
    if not shown.strip():
        raise ApiError(400, "Bad Request: message text is empty")
    if utf16_len(shown) > limit:
        raise ApiError(400, "Bad Request: message is too long" if what == "text"
                       else "Bad Request: message caption is too long")
    return shown


def _check_reply_markup(markup: Any) -> dict[str, Any] | None:
    if markup is None:
        return None
    if not isinstance(markup, dict):
        raise ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object")
    rows = markup.get("inline_keyboard")
    if rows is None:
        return markup  # a reply keyboard, remove_keyboard or force_reply: not checked
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise ApiError(400, "Bad Request: field \"inline_keyboard\" of the InlineKeyboardMarkup must be an "
                            "Array of Arrays")
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not str(button.get("text", "")).strip():
                raise ApiError(400, "Bad Request: can't parse inline keyboard button: Text must be non-empty")
            actions = [k for k in button if k != "text"]
            if not actions:
                raise ApiError(
                    400,
                    "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline "
                    "keyboard",
                )
            if "callback_data" in button:
                data = button["callback_data"]
                if not isinstance(data, str) or not 1 <= len(data.encode("utf-8")) <= MAX_CALLBACK_DATA:
                    raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
    return markup


# --------------------------------------------------------------------------- the fake

_BOT_COMMAND_RE = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")


def _command_entities(text: str) -> list[dict[str, Any]]:
    """``bot_command`` entities as Telegram adds them (offsets in UTF-16 code units)."""
    return [
        {"type": "bot_command", "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group(0))}
        for m in _BOT_COMMAND_RE.finditer(text)
    ]


class FakeTelegram:
    """The fake Bot API server. Start with :meth:`start` or use it as a context manager.

    ``token``: the one token accepted (default: a fresh random one, see :func:`make_token`).
    ``max_poll_timeout``: cap on ``getUpdates`` long polling in seconds (Telegram: 50); lower it
    to make a client stop faster. ``first_update_id``: the first update id handed out.
    """

    def __init__(
        self,
        token: str | None = None,
        *,
        bot_username: str = "palui_test_bot",
        bot_first_name: str = "Palui",
        host: str = "127.0.0.1",
        port: int = 0,
        max_poll_timeout: float = MAX_POLL_TIMEOUT,
        first_update_id: int = 100_000_001,
    ) -> None:
        self.token = token or make_token()
        if not TOKEN_RE.match(self.token):
            raise ValueError("token must look like a bot token: <digits>:<30-50 of [A-Za-z0-9_-]>")
        self.bot_id = int(self.token.split(":", 1)[0])
        self.bot_user: dict[str, Any] = {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
        self.host = host
        self.port = port
        self.max_poll_timeout = max_poll_timeout

        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._calls: list[Call] = []
        self._updates: list[QueuedUpdate] = []  # every update ever queued, in order
        self._pending: list[QueuedUpdate] = []  # not yet confirmed
        self._update_ids = itertools.count(first_update_id)
        self._query_ids = itertools.count(4_000_000_001)
        self._file_ids = itertools.count(1)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}  # (chat_id, message_id) -> Message
        self._chats: dict[int, dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._blocked: set[int] = set()
        self._queries: dict[str, dict[str, Any]] = {}  # callback_query id -> query (while unanswered)
        self._files: dict[str, tuple[str, UploadedFile]] = {}  # file_id -> (file_path, file)
        self._injected: dict[str, list[_Injected]] = {}
        self._commands: list[dict[str, Any]] = []
        self._webhook_url = ""
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.errors: list[BaseException] = []
        """Exceptions raised inside the fake's handlers (bugs of the fake): assert it stays empty."""

        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._polls: set[_Poll] = set()
        self._active_poll: _Poll | None = None
        self._closing = False

        self._methods: dict[str, tuple[str, Callable[[dict[str, Any], dict[str, UploadedFile]], Any]]] = {}
        for name, handler in (
            ("getMe", self._get_me),
            ("logOut", lambda p, f: True),
            ("close", lambda p, f: True),
            ("deleteWebhook", self._delete_webhook),
            ("getWebhookInfo", self._get_webhook_info),
            ("setMyCommands", self._set_my_commands),
            ("getMyCommands", lambda p, f: list(self._commands)),
            ("deleteMyCommands", self._delete_my_commands),
            ("sendMessage", self._send_message),
            ("editMessageText", self._edit_message_text),
            ("editMessageReplyMarkup", self._edit_message_reply_markup),
            ("deleteMessage", self._delete_message),
            ("answerCallbackQuery", self._answer_callback_query),
            ("sendChatAction", self._send_chat_action),
            ("sendDocument", self._send_document),
            ("getFile", self._get_file),
            ("getUpdates", self._get_me),  # placeholder: served by the async _get_updates
        ):
            self._methods[name.lower()] = (name, handler)

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (after :meth:`start`)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """For python-telegram-bot's ``base_url``: it appends the token itself."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        """For python-telegram-bot's ``base_file_url`` (file downloads)."""
        return f"{self.url}/file/bot"

    def api_url(self, method: str, token: str | None = None) -> str:
        return f"{self.base_url}{token or self.token}/{method}"

    def start(self, timeout: float = 10.0) -> Self:
        if self._thread is not None:
            raise RuntimeError("already started")
        self._closing = False
        sock = listen_tcp(self.host, self.port)  # IPPROTO_TCP: no 40 ms Nagle wait per keep-alive answer
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
            # a long poll is an idle connection from the client's side: keep it like Telegram does
            timeout_keep_alive=60,
        )
        self._server = uvicorn.Server(config)
        started = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            started.set()
            try:
                loop.run_until_complete(self._server.serve(sockets=[sock]))  # type: ignore[union-attr]
            finally:
                loop.close()
                sock.close()

        self._thread = threading.Thread(target=run, name="fake-telegram", daemon=True)
        self._thread.start()
        started.wait(timeout)
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake Telegram server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop the server; waiting long polls are answered at once (with no updates)."""
        if self._server is None or self._thread is None:
            return
        self._closing = True
        self._wake_polls()
        self._server.should_exit = True
        self._thread.join(10)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ test-facing: users, updates

    def user(self, user_id: int, *, first_name: str | None = None, username: str | None = None,
             last_name: str | None = None, language_code: str | None = "en", is_bot: bool = False) -> dict[str, Any]:
        """Register (or update) a user; returns its ``User`` object. Users met for the first time in
        :meth:`push_message` get ``first_name="User<id>"`` and ``username="user<id>"``."""
        with self._lock:
            u = self._users.get(user_id) or {"id": user_id, "is_bot": is_bot, "first_name": f"User{user_id}",
                                              "username": f"user{user_id}"}
            if first_name is not None:
                u["first_name"] = first_name
            if username is not None:
                u["username"] = username
            if last_name is not None:
                u["last_name"] = last_name
            if language_code is not None:
                u["language_code"] = language_code
            self._users[user_id] = u
            return dict(u)

    def chat(self, chat_id: int, *, type: str | None = None, title: str | None = None,
             user_id: int | None = None) -> dict[str, Any]:
        """Register (or return) a chat. A positive id is a private chat with the user of that id;
        a negative one a group (``-100…``: a supergroup)."""
        with self._lock:
            if chat_id in self._chats and type is None and title is None:
                return dict(self._chats[chat_id])
            if type is None:
                type = "private" if chat_id > 0 else ("supergroup" if str(chat_id).startswith("-100") else "group")
            c: dict[str, Any] = {"id": chat_id, "type": type}
            if type == "private":
                u = self.user(user_id if user_id is not None else chat_id)
                c.update({k: u[k] for k in ("first_name", "last_name", "username") if k in u})
            else:
                c["title"] = title or f"Group {chat_id}"
            self._chats[chat_id] = c
            self._message_ids.setdefault(chat_id, itertools.count(1))
            return dict(c)

    def block_bot(self, user_id: int, blocked: bool = True) -> None:
        """The user blocks (or unblocks) the bot: sends to their chat get ``403 Forbidden``."""
        with self._lock:
            (self._blocked.add if blocked else self._blocked.discard)(user_id)

    def message(self, user_id: int, chat_id: int, text: str | None = None, **extra: Any) -> dict[str, Any]:
        """Build (and remember) a user's ``Message`` without queueing it, e.g. for
        ``reply_to_message=``. ``extra`` fields are set on the message as given."""
        with self._lock:
            chat = self.chat(chat_id, user_id=user_id if chat_id > 0 else None)
            msg: dict[str, Any] = {
                "message_id": next(self._message_ids[chat_id]),
                "from": self.user(user_id),
                "chat": chat,
                "date": int(time.time()),
            }
            if text is not None:
                msg["text"] = text
                entities = _command_entities(text)
                if entities:
                    msg["entities"] = entities
            msg.update(extra)
            self._messages[(chat_id, msg["message_id"])] = msg
            return copy.deepcopy(msg)

    def push_message(self, user_id: int, chat_id: int, text: str | None, **extra: Any) -> QueuedUpdate:
        """Queue a ``message`` update: ``user_id`` writes ``text`` in ``chat_id`` (== ``user_id``
        for a private chat). ``extra`` goes onto the Message as given, e.g.
        ``forward_origin={"type": "user", "sender_user": {...}, "date": ...}``,
        ``reply_to_message=fake.sent_message(chat_id, mid)``, ``quote={"text": ..., "position": 0}``,
        ``external_reply={...}``, ``entities=[...]`` (replaces the automatic bot_command entities)."""
        return self.push_update({"message": self.message(user_id, chat_id, text, **extra)})

    def push_callback(self, user_id: int, message_id: int, data: str, *, chat_id: int | None = None,
                      **extra: Any) -> QueuedUpdate:
        """Queue a ``callback_query``: ``user_id`` pressed a button with ``data`` under the bot's
        message ``message_id`` (in ``chat_id``; default: the private chat of ``user_id``, else the
        only chat with such a message). ``data`` is not checked against the keyboard, so a forged
        press can be sent."""
        with self._lock:
            cid = chat_id if chat_id is not None else self._find_chat_of(message_id, user_id)
            msg = self._messages.get((cid, message_id))
            if msg is None:
                raise KeyError(f"no message {message_id} in chat {cid}")
            query_id = str(next(self._query_ids))
            query: dict[str, Any] = {
                "id": query_id,
                "from": self.user(user_id),
                "message": copy.deepcopy(msg),
                "chat_instance": str(abs(hash((self.bot_id, cid))) % 10**18),
                "data": data,
            }
            query.update(extra)
            self._queries[query_id] = query
            return self.push_update({"callback_query": query})

    def push_update(self, payload: Mapping[str, Any]) -> QueuedUpdate:
        """Queue any update (``payload`` without ``update_id``, e.g. ``{"edited_message": …}``, or a
        malformed one)."""
        with self._lock:
            uid = next(self._update_ids)
            upd = QueuedUpdate(
                update_id=uid,
                payload={"update_id": uid, **payload},
                queued_at=time.perf_counter(),
                calls_mark=len(self._calls),
            )
            self._updates.append(upd)
            self._pending.append(upd)
            self._changed.notify_all()
        self._wake_polls()
        return upd

    def _find_chat_of(self, message_id: int, user_id: int) -> int:
        if (user_id, message_id) in self._messages:
            return user_id
        chats = [c for (c, m) in self._messages if m == message_id]
        if len(chats) != 1:
            raise KeyError(f"message {message_id}: pass chat_id (found in {chats or 'no chat'})")
        return chats[0]

    # ------------------------------------------------------------------ test-facing: failures

    def fail_next(self, method: str, error_code: int, description: str, *, times: int = 1,
                  parameters: dict[str, Any] | None = None, after: int = 0,
                  match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Answer the next ``times`` calls of ``method`` with this error instead of running them; with
        ``after``, only once that many calls were answered normally (the second part of a long message);
        with ``match``, only calls whose parameters it accepts (e.g. those with a ``reply_markup``)."""
        name = self._canonical(method)
        with self._lock:
            self._injected.setdefault(name, []).append(
                _Injected(error_code, description, parameters, times, after, match))

    def rate_limit_next(self, method: str, retry_after: int, *, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with Telegram's flood-control error:
        ``429 {"description": "Too Many Requests: retry after N", "parameters": {"retry_after": N}}``."""
        self.fail_next(method, 429, f"Too Many Requests: retry after {retry_after}", times=times,
                       parameters={"retry_after": retry_after})

    # ------------------------------------------------------------------ test-facing: what happened

    @property
    def calls(self) -> list[Call]:
        """Every request, in arrival order (a copy)."""
        with self._lock:
            return list(self._calls)

    @property
    def sent(self) -> list[Call]:
        """Every request except ``getUpdates`` polls: what the bot did."""
        with self._lock:
            return [c for c in self._calls if c.method != "getUpdates"]

    def sent_messages(self, chat_id: int | None = None) -> list[Call]:
        """Successful ``sendMessage`` calls (to ``chat_id``)."""
        return [c for c in self.sent if c.method == "sendMessage" and c.ok
                and (chat_id is None or c.params.get("chat_id") == chat_id)]

    @property
    def updates(self) -> list[QueuedUpdate]:
        """Every update ever queued (confirmed ones included)."""
        with self._lock:
            return list(self._updates)

    @property
    def pending(self) -> list[QueuedUpdate]:
        """Updates not confirmed yet."""
        with self._lock:
            return list(self._pending)

    def sent_message(self, chat_id: int, message_id: int) -> dict[str, Any]:
        """The current state of a message in a chat (as edited), e.g. to quote it in a reply."""
        with self._lock:
            return copy.deepcopy(self._messages[(chat_id, message_id)])

    def uploaded(self, file_id: str) -> UploadedFile:
        with self._lock:
            return self._files[file_id][1]

    def mark(self) -> int:
        """The number of calls so far; pass as ``after=`` to wait only for later calls."""
        with self._lock:
            return len(self._calls)

    def wait_for(self, predicate: Callable[[Call], bool], timeout: float = 5.0, *,
                 after: int | QueuedUpdate = 0) -> Call:
        """Block until a recorded call (from index ``after`` on) satisfies ``predicate``; return it.
        Raises :class:`TimeoutError` listing the calls seen. Do not call this from the event loop
        that runs the client under test (it blocks): use :meth:`wait_for_async` there."""
        start = after.calls_mark if isinstance(after, QueuedUpdate) else after
        timeout = guard(timeout)  # a guard against a hang (support/waiting.py)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = self._match(predicate, start)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(self._timeout_text(timeout, start))
                self._changed.wait(remaining)

    async def wait_for_async(self, predicate: Callable[[Call], bool], timeout: float = 5.0, *,
                             after: int | QueuedUpdate = 0) -> Call:
        """Like :meth:`wait_for`, without blocking the running event loop."""
        start = after.calls_mark if isinstance(after, QueuedUpdate) else after
        timeout = guard(timeout)  # a guard against a hang (support/waiting.py)
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        waiter = (loop, event)
        with self._lock:
            self._async_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    event.clear()
                    with self._lock:
                        found = self._match(predicate, start)
                    if found is not None:
                        return found
                    await event.wait()
        except TimeoutError:
            with self._lock:
                raise TimeoutError(self._timeout_text(timeout, start)) from None
        finally:
            with self._lock:
                self._async_waiters.remove(waiter)

    def _match(self, predicate: Callable[[Call], bool], start: int) -> Call | None:
        for call in self._calls[start:]:
            if predicate(call):
                return call
        return None

    def _timeout_text(self, timeout: float, start: int) -> str:
        seen = [f"{c.method}:{c.status}" for c in self._calls[start:] if c.method != "getUpdates"]
        return f"no matching call within {timeout} s; calls seen: {seen or 'none'}"

    # ------------------------------------------------------------------ HTTP

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/file/bot{token}/{file_path:path}", self._file_endpoint, methods=["GET"]),
                Route("/{rest:path}", self._not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
            ]
        )

    @staticmethod
    def _error(code: int, description: str, parameters: dict[str, Any] | None = None) -> JSONResponse:
        body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if parameters:
            body["parameters"] = parameters
        return JSONResponse(body, status_code=code)

    async def _not_found(self, request: Request) -> Response:
        return self._error(404, "Not Found")

    def _canonical(self, method: str) -> str:
        entry = self._methods.get(method.lower())
        return entry[0] if entry else method

    async def _endpoint(self, request: Request) -> Response:
        received = time.perf_counter()
        token = request.path_params["token"]
        requested = request.path_params["method"]
        method = self._canonical(requested)
        params: dict[str, Any] = {}
        files: dict[str, UploadedFile] = {}
        status, result, description, parameters = 200, None, None, None
        try:
            if not TOKEN_RE.match(token):
                raise ApiError(404, "Not Found")
            if not secrets.compare_digest(token, self.token):
                raise ApiError(401, "Unauthorized")
            entry = self._methods.get(requested.lower())
            if entry is None:
                raise ApiError(404, "Not Found")
            params, files = await self._read_params(request)
            injected = self._take_injected(method, params)
            if injected is not None:
                raise ApiError(injected.code, injected.description, injected.parameters)
            if method == "getUpdates":
                result = await self._get_updates(params, request)
            else:
                with self._lock:
                    result = entry[1](params, files)
        except ApiError as e:
            status, description, parameters = e.code, e.description, e.parameters
        except ClientDisconnect:  # the client went away mid-request (a cancelled poll): nothing to answer
            return Response(status_code=499)
        except Exception as e:  # noqa: BLE001 - a bug in the fake: answer like a broken server, keep it
            with self._lock:
                self.errors.append(e)
            status, description = 500, f"Internal Server Error: {type(e).__name__}: {e}"
        self._record(method, params, files, received, status, result, description)
        if status != 200:
            return self._error(status, description or "", parameters)
        return JSONResponse({"ok": True, "result": result})

    async def _read_params(self, request: Request) -> tuple[dict[str, Any], dict[str, UploadedFile]]:
        raw: dict[str, Any] = dict(request.query_params)
        files: dict[str, UploadedFile] = {}
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "application/json":
            try:
                body = await request.json()
            except ValueError:
                raise ApiError(400, "Bad Request: can't parse JSON request body") from None
            if not isinstance(body, dict):
                raise ApiError(400, "Bad Request: request body must be a JSON object")
            raw.update(body)
        elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.form(max_part_size=64 * 1024 * 1024)
            for key, value in form.multi_items():
                if isinstance(value, UploadFile):
                    files[key] = UploadedFile(key, value.filename, value.content_type, await value.read())
                else:
                    raw[key] = value
        params = {k: _coerce(k, v) for k, v in raw.items()}
        return params, files

    def _take_injected(self, method: str, params: dict[str, Any]) -> _Injected | None:
        with self._lock:
            queue = self._injected.get(method)
            if not queue:
                return None
            head = queue[0]
            if head.match is not None and not head.match(params):
                return None
            if head.let_through > 0:
                head.let_through -= 1
                return None
            head.remaining -= 1
            if head.remaining <= 0:
                queue.pop(0)
            return head

    def _record(self, method: str, params: dict[str, Any], files: dict[str, UploadedFile], received: float,
                status: int, result: Any, description: str | None) -> None:
        with self._lock:
            call = Call(len(self._calls), method, params, files, received, time.perf_counter(), status, result,
                        description)
            self._calls.append(call)
            self._changed.notify_all()
            waiters = list(self._async_waiters)
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed
                pass

    async def _file_endpoint(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return self._error(401, "Unauthorized")
        path = request.path_params["file_path"]
        with self._lock:
            for file_path, f in self._files.values():
                if file_path == path:
                    return Response(f.data, media_type=f.content_type or "application/octet-stream")
        return self._error(404, "Not Found")

    # ------------------------------------------------------------------ getUpdates

    def _wake_polls(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def wake() -> None:
            for poll in list(self._polls):
                poll.event.set()

        try:
            loop.call_soon_threadsafe(wake)
        except RuntimeError:
            pass

    def _confirm(self, offset: int | None) -> None:
        if offset is None or offset == 0:
            return
        now = time.perf_counter()
        if offset > 0:
            keep = [u for u in self._pending if u.update_id >= offset]
        else:
            keep = self._pending[offset:]  # the last -offset updates
        for u in self._pending:
            if u not in keep:
                u.confirmed_at = now
        self._pending = keep

    def _take(self, limit: int) -> list[dict[str, Any]]:
        batch = self._pending[:limit]
        now = time.perf_counter()
        for u in batch:
            u.deliveries += 1
            if u.delivered_at is None:
                u.delivered_at = now
        return [copy.deepcopy(u.payload) for u in batch]

    async def _get_updates(self, params: dict[str, Any], request: Request) -> list[dict[str, Any]]:
        if self._webhook_url:
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active; "
                                "use deleteWebhook to delete the webhook first")
        offset = params.get("offset")
        limit = max(1, min(int(params.get("limit") or 100), 100))
        timeout = max(0.0, min(float(params.get("timeout") or 0), self.max_poll_timeout))
        with self._lock:
            self._confirm(offset if isinstance(offset, int) else None)
            batch = self._take(limit)
        if batch or timeout == 0 or self._closing:
            return batch
        loop = asyncio.get_running_loop()
        poll = _Poll(asyncio.Event())
        self._polls.add(poll)
        previous, self._active_poll = self._active_poll, poll
        if previous is not None:
            previous.conflicted = True
            previous.event.set()
        deadline = loop.time() + timeout
        try:
            while not self._closing:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(poll.event.wait(), min(remaining, 0.25))
                except TimeoutError:
                    if await request.is_disconnected():
                        break  # the client went away: end the poll like Telegram does
                    continue
                poll.event.clear()
                if poll.conflicted:
                    raise ApiError(409, _CONFLICT)
                with self._lock:
                    batch = self._take(limit)
                if batch:
                    return batch
            with self._lock:
                return [] if self._closing else self._take(limit)
        finally:
            self._polls.discard(poll)
            if self._active_poll is poll:
                self._active_poll = None

    # ------------------------------------------------------------------ methods (called under the lock)

    def _get_me(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> dict[str, Any]:
        return dict(self.bot_user)

    def _delete_webhook(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> bool:
        self._webhook_url = ""
        if params.get("drop_pending_updates") and self._pending:
            self._confirm(self._pending[-1].update_id + 1)
        return True

    def _get_webhook_info(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> dict[str, Any]:
        return {"url": self._webhook_url, "has_custom_certificate": False, "pending_update_count": len(self._pending)}

    def _set_my_commands(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> bool:
        commands = params.get("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise ApiError(400, "Bad Request: commands must be an Array of at most 100 BotCommand")
        for c in commands:
            if not isinstance(c, dict) or not re.match(r"^[a-z0-9_]{1,32}$", str(c.get("command", ""))) \
                    or not 1 <= len(str(c.get("description", ""))) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self._commands = [dict(c) for c in commands]
        return True

    def _delete_my_commands(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> bool:
        self._commands = []
        return True

    def _target_chat(self, params: dict[str, Any]) -> int:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise ApiError(400, "Bad Request: chat_id is empty")
        if not isinstance(chat_id, int) or chat_id not in self._chats:
            raise ApiError(400, "Bad Request: chat not found")
        if chat_id in self._blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        return chat_id

    def _new_bot_message(self, chat_id: int, params: dict[str, Any], **content: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "message_id": next(self._message_ids[chat_id]),
            "from": dict(self.bot_user),
            "chat": dict(self._chats[chat_id]),
            "date": int(time.time()),
            **content,
        }
        reply = params.get("reply_parameters") or (
            {"message_id": params["reply_to_message_id"]} if "reply_to_message_id" in params else None)
        if isinstance(reply, dict) and "message_id" in reply:
            target = self._messages.get((chat_id, reply["message_id"]))
            if target is None and not reply.get("allow_sending_without_reply"):
                raise ApiError(400, "Bad Request: message to be replied not found")
            if target is not None:
                msg["reply_to_message"] = copy.deepcopy(target)
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            msg["reply_markup"] = markup
        self._messages[(chat_id, msg["message_id"])] = msg
        return copy.deepcopy(msg)

    def _send_message(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> dict[str, Any]:
        chat_id = self._target_chat(params)
        shown = _check_text(params.get("text"), params.get("parse_mode"))
        _check_reply_markup(params.get("reply_markup"))
        return self._new_bot_message(chat_id, params, text=shown)

    def _edited_message(self, params: dict[str, Any]) -> dict[str, Any]:
        if "inline_message_id" in params:
            raise ApiError(400, "Bad Request: inline messages are not supported by this fake")
        chat_id = self._target_chat(params)
        message_id = params.get("message_id")
        msg = self._messages.get((chat_id, message_id)) if isinstance(message_id, int) else None
        if msg is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if msg["from"]["id"] != self.bot_id:
            raise ApiError(400, "Bad Request: message can't be edited")
        return msg

    def _edit_message_text(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> dict[str, Any]:
        msg = self._edited_message(params)
        shown = _check_text(params.get("text"), params.get("parse_mode"))
        markup = _check_reply_markup(params.get("reply_markup"))
        new_markup = markup if markup and "inline_keyboard" in markup else None
        if msg.get("text") == shown and msg.get("reply_markup") == new_markup:
            raise ApiError(400, _NOT_MODIFIED)
        msg["text"] = shown
        # like Telegram, an edit without reply_markup removes the inline keyboard
        if new_markup is None:
            msg.pop("reply_markup", None)
        else:
            msg["reply_markup"] = new_markup
        msg["edit_date"] = int(time.time())
        return copy.deepcopy(msg)

    def _edit_message_reply_markup(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> dict[str, Any]:
        msg = self._edited_message(params)
        markup = _check_reply_markup(params.get("reply_markup"))
        new_markup = markup if markup and "inline_keyboard" in markup and markup["inline_keyboard"] else None
        if msg.get("reply_markup") == new_markup:
            raise ApiError(400, _NOT_MODIFIED)
        if new_markup is None:
            msg.pop("reply_markup", None)
        else:
            msg["reply_markup"] = new_markup
        msg["edit_date"] = int(time.time())
        return copy.deepcopy(msg)

    def _delete_message(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> bool:
        chat_id = self._target_chat(params)
        if self._messages.pop((chat_id, params.get("message_id")), None) is None:  # type: ignore[arg-type]
            raise ApiError(400, "Bad Request: message to delete not found")
        return True

    def _answer_callback_query(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> bool:
        query_id = str(params.get("callback_query_id", ""))
        if query_id not in self._queries:
            raise ApiError(400, _QUERY_TOO_OLD)
        text = params.get("text")
        if isinstance(text, str) and len(text) > MAX_CALLBACK_ANSWER:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        del self._queries[query_id]
        return True

    def _send_chat_action(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> bool:
        self._target_chat(params)
        if params.get("action") not in CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    def _send_document(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> dict[str, Any]:
        chat_id = self._target_chat(params)
        doc = params.get("document")
        upload: UploadedFile | None = files.get("document")
        if upload is None and isinstance(doc, str) and doc.startswith("attach://"):
            upload = files.get(doc[len("attach://"):])
        if upload is None:
            if isinstance(doc, str) and doc in self._files:
                upload = self._files[doc][1]
            else:
                raise ApiError(400, "Bad Request: there is no document in the request")
        if not upload.data:
            raise ApiError(400, "Bad Request: file must be non-empty")
        content: dict[str, Any] = {}
        caption = params.get("caption")
        if caption:
            content["caption"] = _check_text(caption, params.get("parse_mode"), what="caption", limit=MAX_CAPTION)
        _check_reply_markup(params.get("reply_markup"))
        n = next(self._file_ids)
        file_id = f"BQACAgQAAxk{n:08d}"
        name = upload.filename or "document"
        self._files[file_id] = (f"documents/file_{n}{_suffix(name)}", upload)
        content["document"] = {
            "file_id": file_id,
            "file_unique_id": f"AgAD{n:06d}",
            "file_name": name,
            "mime_type": upload.content_type or "application/octet-stream",
            "file_size": len(upload.data),
        }
        return self._new_bot_message(chat_id, params, **content)

    def _get_file(self, params: dict[str, Any], files: dict[str, UploadedFile]) -> dict[str, Any]:
        file_id = str(params.get("file_id", ""))
        if file_id not in self._files:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, f = self._files[file_id]
        return {"file_id": file_id, "file_unique_id": f"AgAD{file_id[-6:]}", "file_size": len(f.data),
                "file_path": path}


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def button_data(call: Call) -> list[str]:
    """The ``callback_data`` of every inline button in a recorded call, row by row."""
    markup = call.params.get("reply_markup") or {}
    rows: Iterable[Iterable[dict[str, Any]]] = markup.get("inline_keyboard", []) if isinstance(markup, dict) else []
    return [b["callback_data"] for row in rows for b in row if "callback_data" in b]


if __name__ == "__main__":  # a manual check: python fake_telegram.py
    with FakeTelegram() as fake:
        print(f"fake Bot API at {fake.base_url}<token>/METHOD; token {fake.token}")
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
