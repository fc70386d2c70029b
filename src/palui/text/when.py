"""Times as the person reads them: in their zone (``caps.timezone``, else the system's), and relative
where it matters ("expires 08:30, in 29 min", docs/decisions/0121-times-in-the-persons-zone.md). Pure: the
caller passes the clock's ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo


def _moment(value: float | str) -> datetime:
    """An epoch (seconds) or an ISO 8601 string as an aware datetime."""
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), UTC)
    dt = datetime.fromisoformat(value)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def local(value: float | str, tz: tzinfo | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """``value`` (epoch seconds or ISO 8601) in zone ``tz`` (None: the system zone), as ``fmt``."""
    return _moment(value).astimezone(tz).strftime(fmt)


def stamped(value: float | str, tz: tzinfo | None) -> str:
    """An absolute time for a text that is stored and read later (the inbox, a chat app's message), where a
    relative one would go stale: ``2026-12-07 21:39 JST``, in zone ``tz`` (None: the system zone)."""
    here = _moment(value).astimezone(tz)
    return f"{here.strftime('%Y-%m-%d %H:%M')} {here.tzname() or ''}".rstrip()


def span(seconds: float) -> str:
    """A duration in words: ``45 s``, ``29 min``, ``3 h 5 min``, ``2 days``."""
    s = int(round(abs(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 2 * 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    return f"{s // 86400} days"


def relative(value: float | str, now: float, tz: tzinfo | None) -> str:
    """``08:30, in 29 min`` (or ``May 02 08:30, in 23 h 5 min`` on another day, ``08:30, 3 min ago``):
    the clock time in zone ``tz`` and how far it is from ``now`` (epoch seconds)."""
    moment = _moment(value)
    here = moment.astimezone(tz)
    today = datetime.fromtimestamp(now, UTC).astimezone(tz).date()
    clock = here.strftime("%H:%M") if here.date() == today else here.strftime("%b %d %H:%M")
    delta = moment.timestamp() - now
    return f"{clock}, in {span(delta)}" if delta >= 0 else f"{clock}, {span(delta)} ago"


def expiry(value: float | str, now: float, tz: tzinfo | None) -> str:
    """How an approval's expiry reads: ``expires 08:30, in 29 min``, or ``expired 08:30, 2 min ago``."""
    word = "expires" if _moment(value).timestamp() > now else "expired"
    return f"{word} {relative(value, now, tz)}"
