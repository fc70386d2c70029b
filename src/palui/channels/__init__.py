"""Chat channels: talk to Palui, and answer its approvals, from Telegram and Matrix (spec §8.3).

Channels are front ends (docs/architecture.md): they import of Palui only the service, the
shared words and text helpers, and reach the service only through its public methods. The
service and the server never import a channel: the ``palui serve`` command passes
:class:`~palui.channels.manager.ChannelManager` to the server among its start-up hooks.

- :mod:`.base` — what every channel shares: only the person, whose words, commands, approvals,
  the ordered outbox with retries;
- :mod:`.manager` — running the stored channels inside ``palui serve``;
- :mod:`.telegram` (+ :mod:`.telegram_poll`), :mod:`.matrix` (+ :mod:`.matrix_client`, matrix-nio
  behind typed values) — one module per platform;
- :mod:`.views` — the texts shown (approval messages, answers, outcomes), :mod:`.text` —
  splitting and Matrix reply rules, :mod:`.redaction` — secrets out of logs and errors.

What a new channel (Slack, Signal…) implements: docs/channels.md.
"""

from __future__ import annotations

import re

from palui.text.loopback import is_loopback_url

__all__ = ["check_matrix_user", "check_telegram_token", "check_url", "is_loopback_url"]

#: A bot token as @BotFather gives it: the bot's number, a colon, 30 or more letters, digits, _ or -.
TELEGRAM_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]{30,}$")
#: A Matrix user id ``@local:server``: printable ASCII but ':' in the local part (the spec's historical
#: set), a host name, IPv4 or [IPv6] literal and an optional port for the server.
MATRIX_USER = re.compile(r"^@[\x21-\x39\x3b-\x7e]+:(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$")


def check_url(url: str, what: str) -> str:
    """``url`` without a trailing ``/`` when it is https (or plain http on loopback, for local
    homeservers and tests); else UsageError (a non-https homeserver is refused: docs/channels.md)."""
    from urllib.parse import urlsplit

    from palui.errors import UsageError

    u = urlsplit(url)
    if u.scheme not in ("https", "http") or not u.hostname:
        raise UsageError(f"{what} must be an https:// URL, not {url!r}")
    if u.scheme == "http" and not is_loopback_url(url):
        raise UsageError(f"{what} {url} is not https: refused (plain http only on loopback)")
    return url.rstrip("/")


def check_telegram_token(token: str) -> str:
    """``token`` without surrounding blanks when it has a bot token's shape (:data:`TELEGRAM_TOKEN`), checked
    before any request: garbage never reaches the network, and a token with an escape in it is not reported as
    "Telegram is unreachable" (spec §8.3). Else UsageError saying what is wrong, never the token itself."""
    from palui.errors import UsageError

    t = token.strip()
    if TELEGRAM_TOKEN.match(t):
        return t
    bot, colon, secret = t.partition(":")
    if any(not ch.isprintable() or ch.isspace() for ch in t):
        why = "it holds a space, a control character or another invisible character"
    elif not colon:
        why = "it has no ':' between the bot's number and its secret"
    elif not bot.isdigit() or not bot.isascii():
        why = "the part before ':' must be the bot's number (digits only)"
    elif not re.fullmatch(r"[A-Za-z0-9_-]*", secret):
        why = "the part after ':' may hold only letters, digits, _ and -"
    else:
        why = f"the part after ':' has {len(secret)} characters, a bot token's has 30 or more"
    raise UsageError(f"that is not a bot token from @BotFather: {why} (a token looks like "
                     "123456789:AAH… with 30 or more letters, digits, _ or - after the colon); nothing was sent")


def check_matrix_user(user: str) -> str:
    """``user`` when it is a Matrix user id ``@local:server`` (:data:`MATRIX_USER`), checked before the
    homeserver is contacted; else UsageError saying what is wrong (spec §8.3)."""
    from palui.errors import UsageError
    from palui.text.display import shown

    u = user.strip()
    if len(u) <= 255 and MATRIX_USER.match(u):
        return u
    local, colon, server = u[1:].partition(":")
    if len(u) > 255:
        why = f"it has {len(u):,} characters, a Matrix user id at most 255"
    elif not u.startswith("@"):
        why = "a Matrix user id starts with @"
    elif not colon:
        why = "it needs :server after the name"
    elif not re.fullmatch(r"[\x21-\x39\x3b-\x7e]+", local):
        why = "the name before ':' may hold only printable ASCII characters, no spaces"
    else:
        why = f"the server part '{shown(server[:80], one_line=True)}' is not a host name with an optional :port"
    raise UsageError(f"that is not a Matrix user id: {why} (e.g. @palui:example.org); nothing was sent")
