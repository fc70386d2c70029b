"""The string formats a server's form may ask for, checked in an answer: ``email``, ``uri``, ``date`` and
``date-time`` (MCP 2025-11-25, "Elicitation", "Requested Schema": the formats of a string field; their
meaning is JSON Schema 2020-12 §7.3's: RFC 5321 mailboxes, RFC 3986 URIs, RFC 3339 full-date and date-time).

Pure (no I/O). Only the syntax is checked, never whether an address exists. ``password`` has no syntax:
it marks a secret field (:mod:`palui.text.secret_fields`).
"""

from __future__ import annotations

import datetime
import ipaddress
import re

#: What each checked format must look like, as said in a refusal (the value itself is never echoed).
WORDS = {
    "email": "an email address (name@example.org)",
    "uri": "an absolute URI (https://example.org/…)",
    "date": "a date (YYYY-MM-DD)",
    "date-time": "a date and time (YYYY-MM-DDTHH:MM:SSZ, or with an offset such as +02:00)",
}

# RFC 5321 §4.1.2 Dot-string: atoms of atext joined by single dots; a quoted local part is refused (rare,
# and its escapes are where parsers disagree).
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL = re.compile(rf"{_ATEXT}(?:\.{_ATEXT})*")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
# RFC 3986 §3.1 scheme, then only characters a URI may hold: unreserved, reserved and percent escapes.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))")


def _domain(domain: str) -> bool:
    if domain.startswith("[") and domain.endswith("]"):  # an address literal, RFC 5321 §4.1.3
        literal = domain[1:-1]
        literal = literal[5:] if literal[:5].lower() == "ipv6:" else literal
        try:
            ipaddress.ip_address(literal)
        except ValueError:
            return False
        return True
    labels = domain.split(".")
    return len(domain) <= 253 and all(_LABEL.fullmatch(label) for label in labels)


def _email(value: str) -> bool:
    local, at, domain = value.rpartition("@")
    return bool(at) and len(value) <= 254 and len(local) <= 64 and bool(_LOCAL.fullmatch(local)) and _domain(domain)


def _date(value: str) -> bool:
    m = _DATE.fullmatch(value)
    if m is None:
        return False
    try:  # a day that exists (2023-02-29 does not); only the calendar, never the clock
        datetime.date(*(int(g) for g in m.groups()))
    except ValueError:
        return False
    return True


def _date_time(value: str) -> bool:
    date, sep, time = value[:10], value[10:11], value[11:]
    m = _TIME.fullmatch(time)
    if sep not in ("T", "t") or not _date(date) or m is None:
        return False
    hour, minute, second, off_h, off_m = m.groups()
    offset_ok = off_h is None or (int(off_h) <= 23 and int(off_m) <= 59)
    # Second 60 is a leap second (RFC 3339 §5.7); its date is not checked against the leap second table.
    return int(hour) <= 23 and int(minute) <= 59 and int(second) <= 60 and offset_ok


_CHECKS = {"email": _email, "uri": lambda v: bool(_URI.fullmatch(v)), "date": _date, "date-time": _date_time}


def format_problem(name: str, fmt: object, value: str) -> str | None:
    """None when ``value`` has the syntax of ``fmt`` (or ``fmt`` is not a checked format); else a refusal
    naming the field ``name`` and the expected shape, never the value (it may be a secret or hostile)."""
    check = _CHECKS.get(fmt) if isinstance(fmt, str) else None
    if check is None or check(value):
        return None
    return f"{name!r} must be {WORDS[str(fmt)]}"
