"""Outgoing mail for the email channel (spec §8.3): plain text, injection-proof headers, one ``Message-ID`` per part.

- **Plain text only**: ``text/plain; charset=utf-8``, quoted-printable (so a long line is never cut by a
  server's 998-character limit), decoding to exactly the part's text. The text is already escaped for
  display (hidden characters shown as ``\\u202e``…, :mod:`palui.text.display`); nothing in it is markup.
- **Headers cannot be injected**: addresses are built as :class:`email.headerregistry.Address` from
  checked parts, a subject is one line without control characters (:func:`subject_line`), and the
  message is serialised with :data:`email.policy.SMTP`, which refuses a header value with a line break.
- **At most one repeat**: each outbox part has a fixed ``Message-ID`` (``<palui.KEY@domain>``, from the
  part's stable key); a part sent again after a crash carries the same id, which mail clients and large
  providers show once.
- ``Auto-Submitted: auto-replied`` (RFC 3834) keeps vacation responders from answering Palui; the channel
  ignores mail that carries it.
- :func:`send` speaks SMTP with the standard library in a worker thread: implicit TLS (465), STARTTLS
  (587) or, on loopback only, plain. What failed before ``DATA`` was never delivered; a connection lost
  during ``DATA`` may have been (:class:`SendFailed`'s ``maybe_delivered``).
"""

from __future__ import annotations

import re
import smtplib
import ssl
from dataclasses import dataclass
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, localtime

__all__ = ["Outgoing", "SendFailed", "build", "message_id", "send", "smtp_login", "subject_line"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
SUBJECT_MAX = 120  # characters


class SendFailed(Exception):
    """A send that failed: ``code`` the server's SMTP reply code (0: no reply), ``login`` when the server
    refused the login, ``maybe_delivered`` when the connection was lost while the mail was being handed over."""

    def __init__(self, message: str, code: int = 0, login: bool = False, maybe_delivered: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.login = login
        self.maybe_delivered = maybe_delivered


@dataclass(frozen=True)
class Outgoing:
    """One mail: to ``to``, with ``subject`` and ``text``; threaded under ``in_reply_to`` (with
    ``references``); ``reply_to`` an approval's answer address."""

    to: str
    subject: str
    text: str
    message_id: str
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()
    reply_to: str | None = None


def subject_line(text: str) -> str:
    """A subject from ``text``: one line, control and line-separator characters removed, at most
    :data:`SUBJECT_MAX` characters."""
    line = _CONTROL.sub(" ", text).strip()
    line = re.sub(r"\s+", " ", line)
    return line if len(line) <= SUBJECT_MAX else line[:SUBJECT_MAX - 1] + "…"


def message_id(key: str, domain: str) -> str:
    """``<palui.KEY@domain>`` for an outbox part's stable key (letters, digits, - and _ kept)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "", key) or "x"
    return f"<palui.{safe}@{domain}>"


def _address(addr: str, name: str = "") -> Address:
    local, _, domain = addr.rpartition("@")
    return Address(display_name=subject_line(name), username=local, domain=domain)


def build(mail: Outgoing, sender: str, name: str = "Palui") -> EmailMessage:
    """The mail as an :class:`EmailMessage` (see the module docstring). Raises ValueError for a header that
    would not be one line (it never is: every value is checked here)."""
    msg = EmailMessage(policy=SMTP)
    msg["From"] = _address(sender, name)
    msg["To"] = _address(mail.to)
    msg["Subject"] = subject_line(mail.subject) or "Palui"
    msg["Date"] = format_datetime(localtime())
    msg["Message-ID"] = mail.message_id
    if mail.reply_to:
        msg["Reply-To"] = _address(mail.reply_to, name)
    if mail.in_reply_to:
        msg["In-Reply-To"] = mail.in_reply_to
        msg["References"] = " ".join((*mail.references, mail.in_reply_to)[-10:])
    msg["Auto-Submitted"] = "auto-replied"
    msg["X-Auto-Response-Suppress"] = "All"
    text = mail.text or "(empty)"
    msg.set_content(text, subtype="plain", charset="utf-8", cte="quoted-printable")
    if not text.endswith("\n"):
        # The body decodes to exactly the text: a closing soft line break instead of the line break the
        # encoder adds, so the parts of a split answer join back to the whole.
        payload = str(msg.get_payload())
        msg.set_payload((payload[:-1] if payload.endswith("\n") else payload) + "=\n")
    return msg


def send(msg: EmailMessage, *, host: str, port: int, security: str, login: str, password: str, sender: str,
         timeout: float = 30.0) -> None:
    """Hand ``msg`` to the SMTP server (blocking: call it in a worker thread). Raises SendFailed."""
    data = msg.as_bytes(policy=SMTP)
    to = [a.addr_spec for a in msg["To"].addresses]
    context = ssl.create_default_context()
    in_data = False
    try:
        client: smtplib.SMTP = (smtplib.SMTP_SSL(host, port, timeout=timeout, context=context)
                                if security == "tls" else smtplib.SMTP(host, port, timeout=timeout))
        try:
            client.ehlo()
            if security == "starttls":
                client.starttls(context=context)
                client.ehlo()
            if password:
                smtp_login(client, login, password)
            code, reply = client.mail(sender)
            if code != 250:
                raise smtplib.SMTPSenderRefused(code, reply, sender)
            code, reply = client.rcpt(to[0])
            if code not in (250, 251):
                raise smtplib.SMTPRecipientsRefused({to[0]: (code, reply)})
            in_data = True
            code, reply = client.data(data)
            if code != 250:
                raise smtplib.SMTPDataError(code, reply)
            in_data = False
        finally:
            try:
                client.quit()
            except (smtplib.SMTPException, OSError):
                client.close()
    except smtplib.SMTPAuthenticationError as e:
        raise SendFailed(f"the mail server refused the login ({e.smtp_code})", e.smtp_code, login=True) from None
    except smtplib.SMTPRecipientsRefused as e:
        code, reply = next(iter(e.recipients.values()))
        raise SendFailed(f"the mail server refused the recipient: {code} {_said(reply)}", code) from None
    except smtplib.SMTPResponseException as e:
        raise SendFailed(f"the mail server said {e.smtp_code} {_said(e.smtp_error)}", e.smtp_code,
                         maybe_delivered=False) from None
    except (smtplib.SMTPException, OSError) as e:
        raise SendFailed(f"the mail server is unreachable: {type(e).__name__}: {e}",
                         maybe_delivered=in_data) from None


def smtp_login(client: smtplib.SMTP, login: str, password: str) -> None:
    """Log in with one mechanism, PLAIN where offered, else LOGIN (smtplib's ``login`` tries the next one after
    a refusal, and some servers then wait instead of answering). Raises SMTPAuthenticationError."""
    offered = str(client.esmtp_features.get("auth", "")).upper().split()
    for mechanism in ("PLAIN", "LOGIN"):
        if mechanism in offered:
            client.user, client.password = login, password
            client.auth(mechanism, getattr(client, f"auth_{mechanism.lower()}"))
            return
    client.login(login, password)


def _said(reply: bytes | str) -> str:
    text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
    return subject_line(text)[:200]
