"""Settings from ``palui.toml`` and ``PALUI_*`` environment variables (spec §10).

Where things live:

- ``PALUI_HOME=DIR`` puts ``palui.toml``, the SQLite database ``palui.db`` and the
  secrets directory in DIR.
- Otherwise the config file is ``<platform config dir>/palui/palui.toml`` and the data
  (database, secrets, logs) ``<platform data dir>/palui/``.

Environment variables override the file: ``PALUI_MODEL`` sets ``model``, and a nested
key is written with a double underscore, ``PALUI_CAPS__DAILY_TOKENS=5000``. A bad file
or variable raises :class:`ConfigError` naming the file (or variable), the key and
what is wrong; Palui then refuses to start (fail closed).

Named models (spec §9.1, §10.4) are ``[models.NAME]`` tables with ``model``,
``base_url`` and ``api_key_env``, used as ``model = "@NAME"``; see :class:`ModelEntry`. One
field can be set or overridden from the environment as ``PALUI_MODELS__NAME__FIELD``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palui.config_models import ModelEntry, Tables, env_model_field, file_model_tables
from palui.errors import ConfigError
from palui.home import paths as paths  # re-exported: where PALUI_HOME, the data and the config file are

__all__ = ["ModelEntry", "Settings", "documented_keys", "load_settings", "paths"]

# Environment variables that are not configuration keys. (Any other PALUI_* variable must
# name a key: a misspelt or unsupported one refuses to start rather than being ignored.)
# The channel secrets are read only by `palui channels add` (spec §10.4), never stored as settings;
# PALUI_GATEWAY_TOKEN is a gateway client's token, read only by the stdio bridge (spec §8.6).
_NON_KEY_ENV = {"PALUI_HOME", "PALUI_TEST_CLOCK", "PALUI_TICK_SECONDS", "PALUI_TELEGRAM_TOKEN",
                "PALUI_MATRIX_PASSWORD", "PALUI_MATRIX_TOKEN", "PALUI_GATEWAY_TOKEN"}

# key -> (type, default, check). Types: int, float, bool, str, list[str], "str|None".
_SCHEMA: dict[str, tuple[str, Any]] = {
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
    # max(1, runs_per_hour // 3), see _resolve_derived.
    "caps.webhook_runs_per_hour": ("int+?", None),
    "caps.timezone": ("str?", None),
    "caps.gateway_calls_per_hour": ("int+", 600),  # calls through the gateway in any 60 minutes (spec §8.6)
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
    "notify.apprise": ("strlist", []),
    "messages.contacts": ("strdict", {}),  # contact name -> apprise URL (messages__send_message "to")
    "policy.check_file": ("str?", None),  # a policy snapshot (CSV) checked at palui serve start (spec §3.4)
    "webhooks.rate_per_minute": ("int+", 10),  # accepted deliveries per webhook per sliding minute (spec §8)
    "gateway.wait_seconds": ("num+", 50),  # how long a gateway call waits for an approval's answer (spec §8.6)
    "retention.days": ("int+", 90),  # untrusted content, inbox, webhook deliveries older than this are pruned (§10)
}


@dataclass(frozen=True)
class Settings:
    """Validated settings. ``values`` maps dotted keys (``"caps.daily_tokens"``) to values;
    ``models`` maps a name to its ``[models.NAME]`` table (:class:`ModelEntry`)."""

    home: Path
    data_dir: Path
    config_file: Path
    values: dict[str, Any] = field(default_factory=dict)
    models: dict[str, ModelEntry] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values[key]

    @property
    def db_path(self) -> Path:
        return self.data_dir / "palui.db"

    @property
    def secrets_dir(self) -> Path:
        return self.data_dir / "secrets"

    @property
    def model(self) -> str | None:
        return self.values["model"]


# Kinds whose values may hold secrets (apprise URLs carry tokens): never echoed in errors.
_SECRET_KINDS = {"strlist", "strdict"}
_TEXT_KINDS = {"str?", "str"}


# What each kind of value is, in words: "a whole number", not "a number, boolean, list or table"
# (docs/decisions/0122-messages-reworded.md).
_KIND_WORDS = {
    "str?": "text", "str": "non-empty text", "bool": "true or false", "int+": "a whole number",
    "int+?": "a whole number", "int0": "a whole number (0: off)",
    "port": "a port number (1-65535)", "num+": "a number", "strlist": "a list of strings",
    "strdict": 'a table of name = "text"',
}


def _example(key: str, kind: str) -> str:
    """How the key is written in palui.toml, e.g. ``daily_tokens = 1000000`` (under ``[caps]``)."""
    default = _SCHEMA[key][1]
    leaf = key.rpartition(".")[2]
    if kind == "bool":
        value = "true" if not default else "false"
    elif kind in ("int+", "int+?", "int0", "port", "num+"):
        value = str(default) if default is not None else "5"
    elif kind == "strlist":
        value = '["json://localhost"]'
    else:
        value = '"…"'
    section = key.rpartition(".")[0]
    return f"{leaf} = {value}" + (f" under [{section}]" if section else "")


def _check(where: str, key: str, kind: str, value: Any, *, from_env: bool = False) -> Any:
    """Validate one value. Environment values are text and are parsed; a file value must
    already have its TOML type (``port = "8765"`` is refused: fail closed on a type error).

    Messages name the type in words and say how to write the key (docs/decisions/0122-messages-reworded.md), e.g.
    ``key 'caps.daily_tokens' has the wrong type: it must be a whole number, not the quoted
    string 'lots'; write it without quotes, e.g. daily_tokens = 1000000 under [caps]``.
    """
    def bad(what: str) -> ConfigError:
        got = "" if kind in _SECRET_KINDS else f" (got {value!r})"
        return ConfigError(f"{where}: key '{key}': {what}{got}")

    if not from_env and isinstance(value, str) and kind not in _TEXT_KINDS:
        shown = "" if kind in _SECRET_KINDS else f" {value!r}"
        words = _KIND_WORDS.get(kind, "of another type")
        raise ConfigError(f"{where}: key '{key}' has the wrong type: it must be {words}, not the quoted "
                          f"string{shown}; write it without quotes, e.g. {_example(key, kind)}")

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
        if isinstance(value, str):
            try:
                value = int(value.replace("_", ""))
            except ValueError:
                raise bad("must be a whole number") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("must be a whole number")
        if kind == "int0" and value < 0:
            raise bad("must be 0 (off) or a whole number greater than 0")
        if kind != "int0" and value <= 0:
            raise bad("must be greater than 0")
        if kind == "port" and value > 65535:
            raise bad("must be a port number (1-65535)")
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
        if value <= 0:
            raise bad("must be greater than 0")
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
            except ValueError:
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


def _flatten(where: str, table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and _SCHEMA.get(key, ("",))[0] != "strdict":
            if not any(s.startswith(key + ".") for s in _SCHEMA):
                raise ConfigError(f"{where}: unknown section '[{key}]'")
            out.update(_flatten(where, v, key + "."))
        else:
            if key not in _SCHEMA:
                if any(s.startswith(key + ".") for s in _SCHEMA):
                    raise ConfigError(f"{where}: key '{key}' must be a table ([{key}] with keys under it)")
                raise ConfigError(f"{where}: unknown key '{key}'")
            out[key] = v
    return out


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Load and validate settings.

    Raises:
        ConfigError: the file is not valid TOML, a key is unknown, or a value has the
            wrong type or range; the message names the file or variable and the key.
    """
    env = dict(os.environ if env is None else env)
    home, data_dir, config_file = paths(env)
    values = {k: default for k, (_, default) in _SCHEMA.items()}
    where_set: dict[str, str] = {}  # key -> the file or variable that set it (for later errors)
    tables = Tables()  # [models.NAME]
    if config_file.exists():
        import tomllib

        where = str(config_file)
        try:
            raw = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{where}: not valid TOML: {e}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{where}: cannot be read: {e}") from None
        if "models" in raw:
            file_model_tables(where, raw.pop("models"), tables)
        for key, value in _flatten(where, raw).items():
            values[key] = _check(where, key, _SCHEMA[key][0], value)
            where_set[key] = where
        values["model"] = _script_beside(values["model"], config_file.parent)
    for name, value in env.items():
        if not name.startswith("PALUI_") or name in _NON_KEY_ENV:
            continue
        key = name[len("PALUI_"):].lower().replace("__", ".")
        if key == "models" or key.startswith("models."):
            env_model_field(name, key, value, tables)
            continue
        if key not in _SCHEMA:
            raise ConfigError(f"environment variable {name}: unknown key '{key}'")
        where_set[key] = f"environment variable {name}"
        values[key] = _check(where_set[key], key, _SCHEMA[key][0], value, from_env=True)
    _resolve_derived(values, where_set)
    model = values["model"]
    if model and not model.startswith("@") and not model.partition(":")[2]:
        # The form only (the provider, key and script are checked when a turn needs the model); the
        # value is not echoed: a mistaken string may hold a key.
        raise ConfigError(f"{where_set.get('model', 'configuration')}: key 'model': expected PROVIDER:MODEL "
                          "(openai:, anthropic:, ollama:, script:) or @NAME, e.g. model = \"openai:gpt-4o\"")
    if values["caps.timezone"]:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(values["caps.timezone"])
        except (ZoneInfoNotFoundError, ValueError, OSError):  # "America" is a directory: OSError
            raise ConfigError(f"{where_set['caps.timezone']}: key 'caps.timezone': unknown time zone "
                              f"{values['caps.timezone']!r}") from None
    cimd = values["mcp.oauth.client_metadata_url"]
    if cimd:
        from urllib.parse import urlsplit

        u = urlsplit(cimd)
        if u.scheme != "https" or not u.netloc or u.path in ("", "/"):
            raise ConfigError(f"{where_set['mcp.oauth.client_metadata_url']}: key 'mcp.oauth.client_metadata_url': "
                              "must be an https:// URL with a path (a Client ID Metadata Document)")
    return Settings(home=home, data_dir=data_dir, config_file=config_file, values=values,
                    models=tables.entries())


def _resolve_derived(values: dict[str, Any], where_set: Mapping[str, str]) -> None:
    """Keys whose default depends on another key, resolved in ``values``; raises ConfigError.

    ``caps.webhook_runs_per_hour`` (spec §6.4, §6.6): unset → ``max(1, caps.runs_per_hour // 3)``; a
    configured value above ``caps.runs_per_hour`` is refused (a share cannot exceed the whole).
    """
    rph = int(values["caps.runs_per_hour"])
    share = values["caps.webhook_runs_per_hour"]
    if share is None:
        values["caps.webhook_runs_per_hour"] = max(1, rph // 3)
    elif share > rph:
        raise ConfigError(f"{where_set.get('caps.webhook_runs_per_hour', 'configuration')}: key "
                          f"'caps.webhook_runs_per_hour': must be at most caps.runs_per_hour ({rph}), the share of "
                          f"the hourly runs webhook turns may take (got {share})")


def _script_beside(model: str | None, folder: Path) -> str | None:
    """``script:PATH`` written in palui.toml is relative to that file's folder, not to the directory a
    command happens to run in (docs/decisions/0123-script-paths-relative-to-palui-toml.md). Other model
    strings, and absolute paths, are unchanged."""
    if not model or not model.startswith("script:"):
        return model
    path = Path(model[len("script:"):]).expanduser()
    return model if path.is_absolute() else f"script:{folder / path}"


def documented_keys() -> dict[str, Any]:
    """Every configuration key with its default (the README documents each one); derived defaults
    are shown as they resolve with the other defaults (``caps.webhook_runs_per_hour`` = 20)."""
    values = {k: d for k, (_, d) in _SCHEMA.items()}
    _resolve_derived(values, {})
    return values
