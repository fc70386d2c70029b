"""IMAPClient behind a typed boundary, for the email channel (spec §8.3).

IMAPClient (a synchronous library: it parses every IMAP response, ``BODYSTRUCTURE`` included) runs in a
worker thread (:func:`asyncio.to_thread`); the channel never handles its objects. :class:`Mailbox` opens
one folder read-only (``EXAMINE``: Palui never changes a flag or a message), and:

- :meth:`Mailbox.open` returns the folder's ``UIDVALIDITY`` and ``UIDNEXT`` (the channel's restart
  position is ``UIDVALIDITY`` + the last UID read) and whether the server offers ``IDLE``;
- :meth:`Mailbox.fetch_after` reads the mails with a greater UID: their header, and only their text
  parts (``text/plain``, else ``text/html``, each at most :data:`TEXT_PART_MAX` bytes): attachments,
  attached mails and remote content are never fetched, only counted;
- :meth:`Mailbox.wait` waits for news: ``IDLE`` where the server offers it (renewed every few minutes),
  polling every ``poll_seconds`` otherwise, and returns within a second of :meth:`Mailbox.stop`.

Every call holds one lock, so :meth:`Mailbox.close` from the event loop waits for a running wait to end.
Errors pass through as :data:`NETWORK_ERRORS` (for the channel to retry) and :class:`LoginRefused`.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import logging
import select
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientError, LoginError

log = logging.getLogger("palui.channels.email")

NETWORK_ERRORS = (OSError, IMAPClientError, EOFError)
TEXT_PART_MAX = 1024 * 1024  # bytes of one text part; a longer one is not read (the person is told)
IDLE_RENEW_SECONDS = 300.0  # RFC 2177: re-issue IDLE well within 29 minutes
FETCH_BATCH = 50  # mails read per round


class LoginRefused(Exception):
    """The server refused the login (a wrong or revoked password)."""


@dataclass(frozen=True)
class Opened:
    """A folder opened: its ``UIDVALIDITY``, ``UIDNEXT`` and whether the server offers ``IDLE``."""

    uidvalidity: int
    uidnext: int
    idle: bool


@dataclass(frozen=True)
class Fetched:
    """One mail as read: its UID, its header (bytes, as received), its text parts (each its MIME header and
    body, bytes, for :mod:`email` to decode), the attachments and attached mails not read, and the text
    parts too long to read."""

    uid: int
    header: bytes
    texts: tuple[bytes, ...] = ()
    attachments: int = 0
    too_long: int = 0
    html_only: bool = False


@dataclass
class _Plan:
    plain: list[tuple[str, int]] = field(default_factory=list)  # (section, size) of text/plain parts
    html: list[tuple[str, int]] = field(default_factory=list)
    attachments: int = 0


def _s(value: Any) -> str:
    return value.decode("ascii", "replace").lower() if isinstance(value, bytes) else str(value or "").lower()


def _disposition(part: tuple[Any, ...]) -> str:
    for item in part[7:]:
        if isinstance(item, tuple) and item and isinstance(item[0], bytes) and _s(item[0]) in ("attachment",
                                                                                                "inline"):
            return _s(item[0])
    return ""


def _walk(bs: Any, section: str, plan: _Plan, alternative: bool = False) -> None:
    """Collect the text parts of a ``BODYSTRUCTURE`` (sections as IMAP numbers them)."""
    if getattr(bs, "is_multipart", False):
        parts, subtype = bs[0], _s(bs[1])
        if subtype == "alternative":
            before = _Plan()
            for i, p in enumerate(parts, 1):
                _walk(p, f"{section}.{i}" if section else str(i), before, True)
            plan.plain += before.plain
            plan.html += before.html if not before.plain else []
            plan.attachments += before.attachments
            return
        for i, p in enumerate(parts, 1):
            _walk(p, f"{section}.{i}" if section else str(i), plan)
        return
    kind, sub = _s(bs[0]), _s(bs[1])
    size = int(bs[6]) if isinstance(bs[6], int) else 0
    if kind == "text" and sub in ("plain", "html") and _disposition(bs) != "attachment":
        (plan.plain if sub == "plain" else plan.html).append((section or "1", size))
    else:
        plan.attachments += 1  # an attachment, an attached mail, an image: never fetched


class Mailbox:
    """One IMAP folder of one account (see the module docstring).

    Args:
        host, port: the IMAP server; ``security`` ``tls`` (implicit, port 993), ``starttls`` or ``none``
            (loopback only, checked when the channel is added).
        login, password: the account; ``folder`` the folder read (``INBOX``).
        poll_seconds: how often to look for news when the server offers no ``IDLE``.
    """

    def __init__(self, host: str, port: int, security: str, login: str, password: str, folder: str = "INBOX",
                 poll_seconds: float = 60.0, timeout: float = 30.0) -> None:
        self.host, self.port, self.security = host, port, security
        self.login, self.password, self.folder = login, password, folder
        self.poll_seconds = poll_seconds
        self.timeout = timeout
        self._client: IMAPClient | None = None
        self._idle = False
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def open(self) -> Opened:
        """Connect, log in and open the folder read-only. Raises LoginRefused, or one of NETWORK_ERRORS."""
        with self._lock:
            self._close()
            context = ssl.create_default_context()
            c = IMAPClient(self.host, self.port, ssl=self.security == "tls", ssl_context=context,
                           timeout=self.timeout)
            try:
                if self.security == "starttls":
                    c.starttls(context)
                try:
                    c.login(self.login, self.password)
                except LoginError as e:
                    raise LoginRefused(str(e)) from None
                info = c.select_folder(self.folder, readonly=True)
                for kind in ("EXISTS", "RECENT"):  # SELECT's own counts, read above: not news for wait()
                    c._imap.untagged_responses.pop(kind, None)
                self._idle = bool(c.has_capability("IDLE"))
            except BaseException:
                _quiet_logout(c)
                raise
            self._client = c
            return Opened(int(info[b"UIDVALIDITY"]), int(info.get(b"UIDNEXT") or 1), self._idle)

    def fetch_after(self, uid: int) -> list[Fetched]:
        """The mails with a UID above ``uid``, oldest first, at most :data:`FETCH_BATCH` of them."""
        with self._lock:
            c = self._connected()
            uids = sorted(u for u in c.search(["UID", f"{uid + 1}:*"]) if u > uid)[:FETCH_BATCH]
            if not uids:
                return []
            heads = c.fetch(uids, ["BODYSTRUCTURE", "BODY.PEEK[HEADER]"])
            out = []
            for u in uids:
                data = heads.get(u)
                if data is None:  # expunged meanwhile
                    continue
                out.append(self._texts(c, u, data[b"BODY[HEADER]"], data[b"BODYSTRUCTURE"]))
            return out

    def _texts(self, c: IMAPClient, uid: int, header: bytes, structure: Any) -> Fetched:
        plan = _Plan()
        _walk(structure, "", plan)
        chosen = plan.plain or plan.html
        wanted = [(s, n) for s, n in chosen if n <= TEXT_PART_MAX]
        too_long = len(chosen) - len(wanted)
        single = not getattr(structure, "is_multipart", False)
        texts: list[bytes] = []
        if wanted:
            items = [f"BODY.PEEK[{s}]" for s, _ in wanted] + ([] if single else [f"BODY.PEEK[{s}.MIME]"
                                                                                 for s, _ in wanted])
            got = c.fetch([uid], items).get(uid, {})
            for s, _ in wanted:
                mime = header if single else got.get(f"BODY[{s}.MIME]".encode(), b"")
                texts.append(mime + got.get(f"BODY[{s}]".encode(), b""))
        return Fetched(uid, header, tuple(texts), plan.attachments, too_long, html_only=not plan.plain)

    def wait(self) -> None:
        """Wait for news (``IDLE``, or ``poll_seconds``), returning early on news or :meth:`stop`."""
        with self._lock:
            c = self._connected()
            if not self._idle:
                end = time.monotonic() + self.poll_seconds
                while not self._stop.is_set() and time.monotonic() < end:
                    self._stop.wait(min(1.0, max(0.0, end - time.monotonic())))
                c.noop()
                return
            c.idle()
            try:
                # News that came with the answer to an earlier command, or just before the server's "+ idling",
                # is kept by imaplib (IMAPClient's idle_check reads only the socket): look there first.
                held = c._imap.untagged_responses
                if any([held.pop(kind, None) for kind in ("EXISTS", "RECENT")]):  # both taken, not one
                    return
                end = time.monotonic() + IDLE_RENEW_SECONDS
                while not self._stop.is_set() and time.monotonic() < end:
                    responses = c.idle_check(timeout=1)
                    if any(r and r[0] == b"BYE" for r in responses) or (not responses and _readable(c)):
                        # IMAPClient returns nothing at end of stream, so a socket that still reads as
                        # ready after an empty check is closed: say so rather than poll it forever
                        raise OSError("the IMAP server closed the connection")
                    if any(len(r) > 1 and r[1] in (b"EXISTS", b"RECENT") for r in responses):
                        return
            finally:
                with contextlib.suppress(*NETWORK_ERRORS):
                    c.idle_done()

    def stop(self) -> None:
        """Ask a running :meth:`wait` to return (within a second); any thread."""
        self._stop.set()

    def close(self) -> None:
        """Log out (after a running wait ended)."""
        with self._lock:
            self._close()

    def _connected(self) -> IMAPClient:
        if self._client is None:
            raise OSError("not connected")
        return self._client

    def _close(self) -> None:
        c, self._client = self._client, None
        if c is not None:
            _quiet_logout(c)


def _readable(c: IMAPClient) -> bool:
    try:
        return bool(select.select([c.socket()], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _quiet_logout(c: IMAPClient) -> None:
    try:
        c.logout()
    except Exception:  # noqa: BLE001 - a connection already gone
        try:
            c.shutdown()
        except Exception:  # noqa: BLE001
            pass


def decode_text(part: bytes) -> str:
    """A text part (its MIME header and body) decoded from its transfer encoding and charset; an unknown
    charset is read as UTF-8 with replacements."""
    msg = email.message_from_bytes(part, policy=email.policy.default)
    try:
        content = msg.get_content()
    except (LookupError, ValueError, AttributeError):
        payload = msg.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload or "")
    return content if isinstance(content, str) else ""
