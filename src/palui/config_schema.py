"""Every configuration key: its kind, default and range, and one value checked against them (spec §10.4).

:mod:`palui.config` reads ``palui.toml`` and the ``PALUI_*`` variables and hands each value to
:func:`check`; this module knows what a value of each key may be. A value outside its kind or range
raises :class:`~palui.errors.ConfigError` naming the file or variable, the key and what is allowed
(``key 'budgets.steps': must be greater than 0 and at most 1,000 model steps (got 5000)``): Palui
refuses to start. Checking is plain Python over a table, so every command pays next to nothing for it
(docs/decisions/0085-a-light-cli-start.md).
"""

from __future__ import annotations

import math
import re
from typing import Any

from palui.errors import ConfigError

# key -> (kind, default). Kinds: "str?" (text or none), "str", "bool", "int+" (a whole number above 0),
# "int+?" (the same, or unset), "int0" (a whole number, 0: off), "port", "num+" (a number above 0),
# "strlist", "strdict" (name = text).
SCHEMA: dict[str, tuple[str, Any]] = {
    "model": ("str?", None),
    "budgets.steps": ("int+", 12),
    "budgets.seconds": ("num+", 120),
    "budgets.tools": ("int+", 30),
    "budgets.repeat_calls": ("int0", 3),  # the N-th identical call in a turn ends it (spec §6.3); 0: off
    "budgets.error_streak": ("int0", 4),  # N refused/failed calls in a row end the turn's tool use; 0: off
    "budgets.denials": ("int0", 8),  # more than N of the person's denials end the turn's tool use; 0: off
    "caps.daily_tokens": ("int+", 1_000_000),
    "caps.job_daily_tokens": ("int+", 200_000),
    "caps.runs_per_hour": ("int+", 60),
    # Webhook turns' share of caps.runs_per_hour (spec §6.6); None (unset) means
    # max(1, runs_per_hour // 3), resolved by palui.config.
    "caps.webhook_runs_per_hour": ("int+?", None),
    "caps.gateway_calls_per_hour": ("int+", 120),  # calls other MCP clients make through Palui (spec §8.6)
    "caps.timezone": ("str?", None),
    "approvals.chat_expiry_seconds": ("num+", 1800),
    "approvals.job_expiry_seconds": ("num+", 86400),
    "web.allow_private": ("bool", False),
    "web.max_bytes": ("int+", 2 * 1024 * 1024),
    "web.timeout_seconds": ("num+", 20),
    "mcp.call_timeout_seconds": ("num+", 30),
    "mcp.max_output_bytes": ("int+", 262_144),
    "mcp.max_elicitations_per_call": ("int+", 3),  # questions one call may put to the person (spec §7)
    "mcp.oauth.client_metadata_url": ("str?", None),  # a public HTTPS Client ID Metadata Document; none: DCR
    "serve.host": ("str", "127.0.0.1"),
    "serve.port": ("port", 8765),
    "serve.public_url": ("str?", None),
    "serve.header_timeout_seconds": ("num+", 10),  # a request's head must arrive within this (spec §8.1)
    "notify.apprise": ("strlist", []),
    "messages.contacts": ("strdict", {}),  # contact name -> apprise URL (messages__send_message "to")
    "policy.check_file": ("str?", None),  # a policy snapshot (CSV) checked at palui serve start (spec §3.4)
    "webhooks.rate_per_minute": ("int+", 10),  # accepted deliveries per webhook per sliding minute (spec §8)
    "retention.days": ("int+", 90),  # untrusted content, inbox, webhook deliveries older than this are pruned (§10)
    "limits.message_chars": ("int+", 100_000),  # a longer message is refused before it is stored (spec §8.1)
    "gateway.wait_seconds": ("num+", 50),  # how long a gateway call waits for its approval (spec §8.6)
}

_DAY = 86_400
_MIB = 1024 * 1024
#: The largest value of each numeric key and its unit in words (spec §10.4); the smallest is the kind's
#: (above 0, or 0 for an "int0" key, where 0 is "off"). An expiry of 10^23 seconds once made an approval
#: that no command could read: a value the clock, SQLite or the machine cannot hold never gets past the
#: start. tests/test_config.py holds every numeric key to an entry here; the README shows each range.
RANGES: dict[str, tuple[int, str]] = {
    "budgets.steps": (1_000, "model steps"),
    "budgets.seconds": (_DAY, "seconds (a day)"),
    "budgets.tools": (1_000, "tools"),
    "budgets.repeat_calls": (1_000, "calls"),
    "budgets.error_streak": (1_000, "calls"),
    "budgets.denials": (1_000, "denials"),
    "caps.daily_tokens": (10**12, "tokens"),
    "caps.job_daily_tokens": (10**12, "tokens"),
    "caps.runs_per_hour": (10_000, "runs"),
    "caps.webhook_runs_per_hour": (10_000, "runs"),
    "caps.gateway_calls_per_hour": (10_000, "calls"),
    "approvals.chat_expiry_seconds": (30 * _DAY, "seconds (30 days)"),
    "approvals.job_expiry_seconds": (30 * _DAY, "seconds (30 days)"),
    "web.max_bytes": (100 * _MIB, "bytes (100 MiB)"),
    "web.timeout_seconds": (3_600, "seconds (an hour)"),
    "mcp.call_timeout_seconds": (_DAY, "seconds (a day)"),
    "mcp.max_output_bytes": (100 * _MIB, "bytes (100 MiB)"),
    "mcp.max_elicitations_per_call": (100, "questions"),
    "serve.port": (65_535, ""),
    "serve.header_timeout_seconds": (300, "seconds (5 minutes)"),
    "webhooks.rate_per_minute": (10_000, "deliveries"),
    "retention.days": (36_500, "days (100 years)"),
    "limits.message_chars": (1_000_000, "characters"),
    "gateway.wait_seconds": (3_600, "seconds (an hour)"),
}
NUMERIC_KINDS = {"int+", "int+?", "int0", "port", "num+"}

# Kinds whose values may hold secrets (apprise URLs carry tokens): never echoed in errors.
_SECRET_KINDS = {"strlist", "strdict"}
_TEXT_KINDS = {"str?", "str"}

# What each kind of value is, in words: "a whole number", not "a number, boolean, list or table"
# (docs/decisions/0122-messages-reworded.md).
KIND_WORDS = {
    "str?": "text", "str": "non-empty text", "bool": "true or false", "int+": "a whole number",
    "int+?": "a whole number", "int0": "a whole number (0: off)",
    "port": "a port number (1-65535)", "num+": "a number", "strlist": "a list of strings",
    "strdict": 'a table of name = "text"',
}


def range_text(key: str) -> str:
    """The range of a numeric key in words, as the README's configuration table shows it:
    ``1 to 1,000 model steps``, ``0 (off) to 1,000 calls``, ``above 0, up to 2,592,000 seconds (30 days)``."""
    kind = SCHEMA[key][0]
    high, unit = RANGES[key]
    top = f"{high:,}" + (f" {unit}" if unit else "")
    if kind == "num+":
        return f"above 0, up to {top}"
    return f"0 (off) to {top}" if kind == "int0" else f"1 to {top}"


def got(value: Any) -> str:
    """``value`` as an error message quotes it: its ``repr`` (hidden characters escaped), cut to 40
    characters with its length when longer, so a 5,000-digit number is not printed back whole."""
    r = repr(value)
    if len(r) <= 60:
        return r
    return f"{r[:40]}… ({len(str(value)):,} characters)"


def example(key: str, kind: str) -> str:
    """How the key is written in palui.toml, e.g. ``daily_tokens = 1000000`` (under ``[caps]``)."""
    default = SCHEMA[key][1]
    leaf = key.rpartition(".")[2]
    if kind == "bool":
        value = "true" if not default else "false"
    elif kind in NUMERIC_KINDS:
        value = str(default) if default is not None else "5"
    elif kind == "strlist":
        value = '["json://localhost"]'
    else:
        value = '"…"'
    section = key.rpartition(".")[0]
    return f"{leaf} = {value}" + (f" under [{section}]" if section else "")


def check(where: str, key: str, kind: str, value: Any, *, from_env: bool = False) -> Any:
    """Validate one value of ``key`` (of ``kind``). Environment values are text and are parsed; a file
    value must already have its TOML type (``port = "8765"`` is refused: fail closed on a type error).

    Messages name the type in words and say how to write the key (docs/decisions/0122-messages-reworded.md), e.g.
    ``key 'caps.daily_tokens' has the wrong type: it must be a whole number, not the quoted
    string 'lots'; write it without quotes, e.g. daily_tokens = 1000000 under [caps]``; a number outside
    its range names the range (:data:`RANGES`). Raises ConfigError.
    """
    def bad(what: str) -> ConfigError:
        shown = "" if kind in _SECRET_KINDS else f" (got {got(value)})"
        return ConfigError(f"{where}: key '{key}': {what}{shown}")

    if not from_env and isinstance(value, str) and kind not in _TEXT_KINDS:
        shown = "" if kind in _SECRET_KINDS else f" {got(value)}"
        words = KIND_WORDS.get(kind, "of another type")
        raise ConfigError(f"{where}: key '{key}' has the wrong type: it must be {words}, not the quoted "
                          f"string{shown}; write it without quotes, e.g. {example(key, kind)}")

    if kind == "str?":
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise bad("must be a string")
        return value
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise bad("must be a non-empty string")
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
            return value.lower() in ("true", "1", "yes")
        raise bad("must be true or false")
    if kind == "int+?":
        if value is None or (from_env and isinstance(value, str) and not value.strip()):
            return None
        kind = "int+"
    if kind in ("int+", "port", "int0"):
        high, unit = RANGES[key]
        at_most = f"at most {high:,}" + (f" {unit}" if unit else "")
        outside = {"port": "must be a port number (1-65535)",
                   "int0": f"must be 0 (off) or a whole number greater than 0 and {at_most}"}.get(
            kind, f"must be greater than 0 and {at_most}")
        if isinstance(value, str):
            text = value.replace("_", "").strip()
            try:
                value = int(text)
            except ValueError:  # a number of more than 4,300 digits is outside the range too
                raise bad(outside if text.lstrip("+-").isdigit() else "must be a whole number") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("must be a whole number")
        if not (0 if kind == "int0" else 1) <= value <= high:
            raise bad(outside)
        return value
    if kind == "num+":
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad("must be a number") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("must be a number")
        if not math.isfinite(value):
            raise bad("must be a finite number")
        high, unit = RANGES[key]
        if not 0 < value <= high:
            raise bad(f"must be greater than 0 and at most {high:,} {unit}")
        return value
    if kind == "strlist":
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("must be a list of strings")
        if key in _APPRISE_KEYS:
            for i, url in enumerate(value, 1):
                if not apprise_syntax_ok(url):
                    raise ConfigError(f"{where}: key '{key}': item {i} is not an apprise URL: {_APPRISE_HINT}")
        return value
    if kind == "strdict":
        # A TOML table of name = "string"; from the environment, a JSON object.
        if isinstance(value, str):
            import json

            try:
                value = json.loads(value) if value.strip() else {}
            except (ValueError, RecursionError):
                # The value is not echoed: contact targets are apprise URLs that hold tokens.
                raise ConfigError(f"{where}: key '{key}': must be a JSON object of name: string") from None
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip() for k, v in value.items()):
            raise ConfigError(f"{where}: key '{key}': must be a table of name = \"text\" (non-empty names and values)")
        if key in _APPRISE_KEYS:
            for name, url in value.items():
                if not apprise_syntax_ok(url):
                    raise ConfigError(f"{where}: key '{key}': contact {name!r} is not an apprise URL: {_APPRISE_HINT}")
        return dict(value)
    raise AssertionError(kind)


# Keys whose values are apprise URLs: checked at every start by their syntax alone (importing apprise
# costs start-up time), fully by ``palui serve`` (:func:`palui.delivery.unknown_targets`).
_APPRISE_KEYS = {"notify.apprise", "messages.contacts"}
_APPRISE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+._-]*://\S+$")
_APPRISE_HINT = ("expected SCHEME://…, e.g. json://localhost or tgram://BOT_TOKEN/CHAT_ID (see apprise's list of "
                 "services)")


def apprise_syntax_ok(url: str) -> bool:
    """Whether ``url`` looks like an apprise URL: ``scheme://rest``, no whitespace (no apprise import).
    Whether apprise knows the scheme is checked by ``palui serve`` (docs/decisions/0122-messages-reworded.md)."""
    return bool(_APPRISE_URL.match(url.strip()))
