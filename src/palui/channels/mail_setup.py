"""Adding and testing an email channel (spec §8.3): the settings checked, the mailbox tried before it is stored.

:func:`mail_config` checks the settings ``palui channels add email`` and the web page's form give, before any
connection: the address (no ``+``: Palui's answer addresses add ``+a-SECRET`` to it, and the whole local part
stays within 64 characters), the servers and how they are secured — ``tls`` (implicit: 993 / 465),
``starttls`` (143 / 587) or ``none``, which only a loopback server may use (the tests' servers) — and the
authserv-id of the receiving server whose ``Authentication-Results`` Palui believes (``mx.google.com``; a
``*.domain`` form for providers whose receiving hosts differ). :func:`check_account` logs in to both
servers; :func:`test_channel` is ``palui channels test``. The password comes from a file, a variable or a
prompt (never the command line) and is stored with the channel's own key in its 0600 secrets file.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import smtplib
import ssl
from typing import TYPE_CHECKING, Any

from palui.channels.mail_imap import NETWORK_ERRORS, LoginRefused, Mailbox
from palui.channels.mail_send import Outgoing, SendFailed, build, message_id, send, smtp_login
from palui.channels.redaction import Redactor
from palui.errors import PaluiError, UsageError
from palui.text.display import shown
from palui.text.loopback import is_loopback

if TYPE_CHECKING:
    from palui.results import ChatChannel

__all__ = ["check_account", "mail_config", "new_secret", "test_channel"]

ADDRESS = re.compile(r"^[A-Za-z0-9._%-]{1,35}@(?=.{1,253}$)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+$")
HOST = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*$|^\[?[0-9A-Fa-f:.]+\]?$")
AUTHSERV = re.compile(r"^(\*\.)?[A-Za-z0-9._-]{1,200}$")
SECURITY = ("tls", "starttls", "none")
IMPLICIT = {993: "tls", 465: "tls", 143: "starttls", 587: "starttls", 25: "starttls"}


def _security(word: str | None, port: int, host: str, what: str) -> str:
    sec = (word or IMPLICIT.get(port, "tls")).lower()
    if sec not in SECURITY:
        raise UsageError(f"{what} security must be one of {', '.join(SECURITY)}, not {shown(sec, one_line=True)!r}")
    if sec == "none" and not is_loopback(host.strip("[]")):
        raise UsageError(f"{what} without TLS is refused for {shown(host, one_line=True)}: plain only on loopback")
    return sec


def _host(host: str | None, what: str) -> str:
    h = (host or "").strip()
    if not HOST.match(h):
        raise UsageError(f"{what} must be a host name or address, not {shown(h, one_line=True)!r}")
    return h


def mail_config(*, address: str, imap_host: str | None, smtp_host: str | None, authserv_id: str | None,
                imap_port: int = 993, smtp_port: int = 465, imap_security: str | None = None,
                smtp_security: str | None = None, login: str | None = None, folder: str = "INBOX",
                poll_seconds: float | None = None) -> dict[str, Any]:
    """The channel's stored settings (no secret), checked. Raises UsageError saying what is wrong."""
    addr = address.strip().lower()
    if not ADDRESS.match(addr):
        raise UsageError(f"that is not a mailbox address Palui can use: {shown(addr, one_line=True)!r} (letters, "
                         "digits, . _ % - before the @, at most 35 of them, no +: answer addresses add +a-… to it)")
    if not authserv_id or not AUTHSERV.match(authserv_id.strip()):
        raise UsageError("give --authserv-id: the name your provider's receiving server writes first in its "
                         "Authentication-Results headers (e.g. mx.google.com; docs/channels.md says how to find it)")
    imap, smtp = _host(imap_host, "--imap-host"), _host(smtp_host, "--smtp-host")
    for port in (imap_port, smtp_port):
        if not 1 <= int(port) <= 65535:
            raise UsageError(f"port {port} is not between 1 and 65535")
    if not folder or any(not ch.isprintable() for ch in folder):
        raise UsageError("--folder must be a printable folder name")
    config: dict[str, Any] = {
        "address": addr, "login": (login or addr).strip(), "authserv_id": authserv_id.strip().lower(),
        "imap_host": imap, "imap_port": int(imap_port), "imap_security": _security(imap_security, imap_port, imap,
                                                                                   "IMAP"),
        "smtp_host": smtp, "smtp_port": int(smtp_port), "smtp_security": _security(smtp_security, smtp_port, smtp,
                                                                                   "SMTP"),
        "folder": folder,
    }
    if poll_seconds is not None:
        config["poll_seconds"] = max(0.2, float(poll_seconds))
    return config


def new_secret(password: str) -> dict[str, str]:
    """The secrets file's content: the password and the channel's own key for answer addresses."""
    return {"password": password, "reply_key": secrets.token_hex(32)}


def _smtp_login(cfg: dict[str, Any], password: str) -> None:
    context = ssl.create_default_context()
    port, host = int(cfg["smtp_port"]), cfg["smtp_host"]
    client: smtplib.SMTP = (smtplib.SMTP_SSL(host, port, timeout=20, context=context)
                            if cfg["smtp_security"] == "tls" else smtplib.SMTP(host, port, timeout=20))
    try:
        client.ehlo()
        if cfg["smtp_security"] == "starttls":
            client.starttls(context=context)
            client.ehlo()
        if password:
            smtp_login(client, cfg["login"], password)
    finally:
        try:
            client.quit()
        except (smtplib.SMTPException, OSError):
            client.close()


async def check_account(cfg: dict[str, Any], password: str, redact: Redactor) -> dict[str, Any]:
    """Log in to the IMAP server (the folder opened read-only) and to the SMTP server (nothing sent):
    ``{"uidvalidity","uidnext","idle"}`` of the folder. Raises PaluiError without the password."""
    box = Mailbox(cfg["imap_host"], int(cfg["imap_port"]), cfg["imap_security"], cfg["login"], password,
                  cfg.get("folder", "INBOX"), timeout=20)
    try:
        opened = await asyncio.to_thread(box.open)
    except LoginRefused:
        raise PaluiError(f"the IMAP server {cfg['imap_host']} refused the login of {cfg['login']} (an app password "
                         "may be needed: docs/channels.md)") from None
    except NETWORK_ERRORS as e:
        raise PaluiError(f"the IMAP server {cfg['imap_host']}:{cfg['imap_port']} is unreachable or refused the "
                         f"folder: {redact(f'{type(e).__name__}: {e}')}") from None
    finally:
        await asyncio.to_thread(box.close)
    try:
        await asyncio.to_thread(_smtp_login, cfg, password)
    except smtplib.SMTPAuthenticationError:
        raise PaluiError(f"the SMTP server {cfg['smtp_host']} refused the login of {cfg['login']}") from None
    except (smtplib.SMTPException, OSError) as e:
        raise PaluiError(f"the SMTP server {cfg['smtp_host']}:{cfg['smtp_port']} is unreachable: "
                         f"{redact(f'{type(e).__name__}: {e}')}") from None
    return {"uidvalidity": opened.uidvalidity, "uidnext": opened.uidnext, "idle": opened.idle}


async def test_channel(c: ChatChannel, secret: dict[str, Any], redact: Redactor) -> str:
    """``palui channels test``: both logins, and a test mail to the person when paired."""
    cfg, password = c["config"], str(secret.get("password") or "")
    redact.add(password)
    got = await check_account(cfg, password, redact)
    how = "IDLE" if got["idle"] else f"polling every {cfg.get('poll_seconds', 60)} s"
    out = f"ok: {cfg['imap_host']} and {cfg['smtp_host']} accept {cfg['login']} ({cfg.get('folder', 'INBOX')}, {how})"
    if not c["person_chat"]:
        return out + f"; not paired yet (palui channels pair {c['name']})"
    domain = cfg["address"].rpartition("@")[2]
    msg = build(Outgoing(c["person_chat"], "Palui test message", "Palui test message: this channel works.",
                         message_id(secrets.token_hex(8), domain)), cfg["address"])
    try:
        await asyncio.to_thread(send, msg, host=cfg["smtp_host"], port=int(cfg["smtp_port"]),
                                security=cfg["smtp_security"], login=cfg["login"], password=password,
                                sender=cfg["address"])
    except SendFailed as e:
        raise PaluiError(f"the logins worked, but sending to the person failed: {redact(str(e))}") from None
    return out + f"; a test mail was sent to {c['person']}"
