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

from palui.text.loopback import is_loopback_url

__all__ = ["check_url", "is_loopback_url"]


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
