"""Settings from ``palui.toml`` and ``PALUI_*`` environment variables (spec §10).

Where things live:

- ``PALUI_HOME=DIR`` puts ``palui.toml``, the SQLite database ``palui.db`` and the
  secrets directory in DIR.
- Otherwise the config file is ``<platform config dir>/palui/palui.toml`` and the data
  (database, secrets, logs) ``<platform data dir>/palui/``.

Environment variables override the file: ``PALUI_MODEL`` sets ``model``, and a nested
key is written with a double underscore, ``PALUI_CAPS__DAILY_TOKENS=5000``. Each value is
checked by its key's rule in the settings model (:mod:`palui.config_schema`) and
:func:`load_settings` returns that model, typed (``settings.caps.daily_tokens`` is an ``int``).
A bad file or variable raises :class:`ConfigError` naming the file (or variable), the key and
what is wrong; Palui then refuses to start (fail closed).

Named models (spec §9.1, §10.4) are ``[models.NAME]`` tables with ``model``,
``base_url`` and ``api_key_env``, used as ``model = "@NAME"``; see :class:`ModelEntry`. One
field can be set or overridden from the environment as ``PALUI_MODELS__NAME__FIELD``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from palui.config_models import ModelEntry, Tables, env_model_field, file_model_tables
from palui.config_rules import apprise_syntax_ok as apprise_syntax_ok  # re-exported (palui.delivery names it)
from palui.config_rules import got
from palui.config_schema import KEYS, SECTIONS, Settings, checked
from palui.config_schema import documented_keys as documented_keys  # re-exported (the README's table)
from palui.config_section import build
from palui.errors import ConfigError
from palui.home import paths as paths  # re-exported: where PALUI_HOME, the data and the config file are

__all__ = ["ModelEntry", "Settings", "documented_keys", "load_settings", "paths"]

# Environment variables that are not configuration keys. (Any other PALUI_* variable must
# name a key: a misspelt or unsupported one refuses to start rather than being ignored.)
# The channel secrets are read only by `palui channels add` (spec §10.4), never stored as settings;
# PALUI_GATEWAY_TOKEN is a gateway client's token, read only by the stdio bridge (spec §8.6).
_NON_KEY_ENV = {"PALUI_HOME", "PALUI_TEST_CLOCK", "PALUI_TICK_SECONDS", "PALUI_TELEGRAM_TOKEN",
                "PALUI_MATRIX_PASSWORD", "PALUI_MATRIX_TOKEN", "PALUI_TEST_ADDRESS_CLASSES",
                "PALUI_SLACK_BOT_TOKEN", "PALUI_SLACK_APP_TOKEN", "PALUI_DISCORD_TOKEN",
                "PALUI_GATEWAY_TOKEN", "PALUI_EMAIL_PASSWORD",
                "PALUI_TEST_AUDIT_HOLD"}


def _flatten(where: str, table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}{k}"
        if key in SECTIONS:
            if not isinstance(v, dict):
                raise ConfigError(f"{where}: key {got(key)} must be a table ([{key}] with keys under it)")
            out.update(_flatten(where, v, key + "."))
        elif key in KEYS:
            out[key] = v
        elif isinstance(v, dict):
            raise ConfigError(f"{where}: unknown section {got('[' + key + ']')}")
        else:
            raise ConfigError(f"{where}: unknown key {got(key)}")
    return out


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Load and validate settings: the defaults, then ``palui.toml``, then the ``PALUI_*`` variables.

    Raises:
        ConfigError: the file is not valid TOML, a key is unknown, or a value has the
            wrong type or range; the message names the file or variable and the key.
    """
    env = dict(os.environ if env is None else env)
    home, data_dir, config_file = paths(env)
    values: dict[str, Any] = {}
    where_set: dict[str, str] = {}  # key -> the file or variable that set it (for later errors)
    tables = Tables()  # [models.NAME]
    if config_file.exists():
        import tomllib

        from palui.files import Unreadable, read_text

        where = str(config_file)
        try:
            raw = tomllib.loads(read_text(config_file))
        except Unreadable as e:  # a directory, a pipe, a device, over 1 MB, not UTF-8
            raise ConfigError(f"{where}: cannot be read: {e}") from None
        except (ValueError, RecursionError) as e:  # also a 5,000-digit number, or arrays nested 1,000 deep
            raise ConfigError(f"{where}: not valid TOML: {str(e)[:200]}") from None
        if "models" in raw:
            file_model_tables(where, raw.pop("models"), tables)
        for key, value in _flatten(where, raw).items():
            values[key] = checked(where, key, value)
            where_set[key] = where
        if values.get("model"):
            values["model"] = _script_beside(values["model"], config_file.parent)
    for name, value in env.items():
        if not name.startswith("PALUI_") or name in _NON_KEY_ENV:
            continue
        key = name[len("PALUI_"):].lower().replace("__", ".")
        if key == "models" or key.startswith("models."):
            env_model_field(name, key, value, tables)
            continue
        if key not in KEYS:
            if key in SECTIONS:
                raise ConfigError(_section_variable(name, key, value))
            raise ConfigError(f"environment variable {name}: unknown key {got(key)}")
        where_set[key] = f"environment variable {name}"
        values[key] = checked(where_set[key], key, value, from_env=True)
    _resolve_derived(values, where_set)
    return build(Settings, values, {"home": home, "data_dir": data_dir, "config_file": config_file,
                                    "models": tables.entries()})


def _section_variable(name: str, section: str, value: str) -> str:
    """The refusal of a whole section given as one variable (``PALUI_CAPS='{"daily_tokens": 5}'``), with the
    exact variables to set instead (``PALUI_CAPS__DAILY_TOKENS=5``): one variable per key keeps one way to
    set each key, with no order between a table and its keys to explain (spec §10.4). Values are shown only
    for numbers and booleans (a list or table may hold apprise URLs, which carry tokens)."""
    import json
    import math

    try:
        given = json.loads(value)
    except (ValueError, RecursionError):
        given = None
    forms: list[str] = []

    def walk(prefix: str, table: dict[str, Any]) -> None:
        for k, v in table.items():
            key = f"{prefix}.{k}"
            if isinstance(v, dict) and key in SECTIONS:
                walk(key, v)
                continue
            plain = isinstance(v, (bool, int)) or (isinstance(v, float) and math.isfinite(v))  # TOML has nan, inf
            shown = json.dumps(v, allow_nan=False) if plain and key in KEYS else "…"
            forms.append(f"PALUI_{key.upper().replace('.', '__')}={shown}")

    if isinstance(given, dict):
        walk(section, given)
    if not forms:
        first = next(k for k in KEYS if k.startswith(section + "."))
        forms.append(f"PALUI_{first.upper().replace('.', '__')}=…")
    return (f"environment variable {name}: '{section}' is a section, not a key: set each of its keys as its own "
            f"variable, e.g. {' '.join(forms[:10])}")


def _resolve_derived(values: dict[str, Any], where_set: dict[str, str]) -> None:
    """Keys whose default depends on another key, resolved in ``values``; raises ConfigError.

    ``caps.webhook_runs_per_hour`` (spec §6.4, §6.6): unset → ``max(1, caps.runs_per_hour // 3)``; a
    configured value above ``caps.runs_per_hour`` is refused (a share cannot exceed the whole).
    """
    rph = int(values.get("caps.runs_per_hour", KEYS["caps.runs_per_hour"].default))
    share = values.get("caps.webhook_runs_per_hour")
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
