"""Keep channel secrets (bot tokens, access tokens, passwords) out of logs and error texts.

Two leaks are known with the channel libraries:

- httpx logs every request at INFO: ``HTTP Request: POST https://api.telegram.org/bot<TOKEN>/getMe
  "HTTP/1.1 200 OK"`` — the Telegram token is part of the URL path;
- python-telegram-bot puts the token into exception texts (``InvalidToken: The token `<TOKEN>` was
  rejected by the server.``), into ``File.file_path`` (a download URL) and logs ``Set Bot API URL``
  with it at DEBUG.

So: keep those loggers at WARNING (:func:`quiet_library_loggers`), and pass every text that leaves
the channel (log records, ``str(exc)``, states shown to the person) through a :class:`Redactor`.
:func:`install_record_redaction` redacts every log record at creation, whichever handler (pytest's
``caplog`` included) prints it.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
import urllib.parse
from collections.abc import Iterable
from typing import Any

__all__ = [
    "LIBRARY_LOGGERS",
    "RedactingFilter",
    "Redactor",
    "install_record_redaction",
    "quiet_library_loggers",
]

LIBRARY_LOGGERS = ("httpx", "httpcore", "telegram", "telegram.ext", "nio", "aiohttp.access", "aiohttp.client",
                   "slack_sdk", "discord")
"""Loggers that print URLs (with a Telegram token in them) or request details at INFO/DEBUG."""

# A Telegram bot token anywhere in a text, registered or not (a wrong token typed by the person).
_TELEGRAM_TOKEN_RE = re.compile(r"(?<![0-9])[0-9]{5,20}(?::|%3A)[A-Za-z0-9_-]{30,50}")
# A Slack token: bot, user, app-level (xapp-) and the others of its family.
_SLACK_TOKEN_RE = re.compile(r"\bxox[abeprs]-[A-Za-z0-9-]{10,}|\bxapp-[A-Za-z0-9-]{10,}")
# A Matrix access token (Synapse: syt_<base64 user>_<random>_<crc>; older ones: MDAx… macaroons).
_MATRIX_TOKEN_RE = re.compile(r"\bsyt_[A-Za-z0-9_-]{10,}|\bMDAx[A-Za-z0-9_/+-]{40,}")
REDACTED = "[REDACTED]"


class Redactor:
    """Replaces known secrets, their URL-quoted forms and anything shaped like a Telegram bot
    token, a Matrix access token or a Slack token with ``[REDACTED]``. Thread-safe; secrets can be added later."""

    def __init__(self, secrets: Iterable[str] = (), *, patterns: bool = True) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._patterns = patterns
        for s in secrets:
            self.add(s)

    def add(self, secret: str) -> None:
        if len(secret) < 6:  # too short to redact without mangling ordinary text
            return
        with self._lock:
            self._secrets.add(secret)
            self._secrets.add(urllib.parse.quote(secret, safe=""))
            self._secrets.add(urllib.parse.quote(secret))

    def __call__(self, text: str) -> str:
        with self._lock:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for s in secrets:
            if s in text:
                text = text.replace(s, REDACTED)
        if self._patterns:
            text = _TELEGRAM_TOKEN_RE.sub(REDACTED, text)
            text = _MATRIX_TOKEN_RE.sub(REDACTED, text)
            text = _SLACK_TOKEN_RE.sub(REDACTED, text)
        return text

    def exception(self, exc: BaseException) -> str:
        """``Type: message`` of an exception, redacted (for states and replies)."""
        return self(f"{type(exc).__name__}: {exc}")


def _redact_record(record: logging.LogRecord, redact: Redactor) -> None:
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a broken format string: keep what we have
        message = str(record.msg)
    record.msg = redact(message)
    record.args = None
    if record.exc_info and record.exc_info[0] is not None:
        record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


class RedactingFilter(logging.Filter):
    """A handler filter (attach it to handlers: a logger's filter does not see its children's
    records)."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record, self.redact)
        return True


_factory_lock = threading.Lock()
_installed: list[Redactor] = []


def install_record_redaction(redact: Redactor) -> None:
    """Redact every log record of the process when it is created (wraps the log record factory
    once; later calls add redactors)."""
    with _factory_lock:
        if _installed:
            _installed.append(redact)
            return
        _installed.append(redact)
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            for r in list(_installed):  # noqa: PERF101
                _redact_record(record, r)
            return record

        logging.setLogRecordFactory(factory)


def quiet_library_loggers(level: int = logging.WARNING, names: Iterable[str] = LIBRARY_LOGGERS) -> None:
    """Raise the client libraries' loggers to ``level`` (httpx's INFO request lines carry the URL,
    so the Telegram token; PTB logs the API URL at DEBUG)."""
    for name in names:
        logging.getLogger(name).setLevel(level)
