"""Named models: ``[models.NAME]`` tables in ``palui.toml`` and ``PALUI_MODELS__NAME__FIELD``
variables (spec §9.1, §10.4), checked while :func:`palui.config.load_settings` reads them.

A value is never echoed in an error: a mistaken base URL or variable name may hold the key itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from palui.errors import ConfigError
from palui.text.escape import control_character

#: The fields of a ``[models.NAME]`` table (spec §9.1; docs/decisions/0046-the-model-table-shape.md).
MODEL_TABLE_KEYS = ("model", "base_url", "api_key_env")
#: The providers a ``[models.NAME]`` table's ``model`` may name.
MODEL_TABLE_PROVIDERS = ("openai", "anthropic", "ollama")
# Lower case so ``PALUI_MODELS__NAME__FIELD`` maps back to it; no "__" (the variable's separator).
_MODEL_NAME = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class ModelEntry:
    """One ``[models.NAME]`` table, used as ``model = "@NAME"`` (spec §9.1, §10.4).

    - ``model``: ``openai:MODEL``, ``anthropic:MODEL`` or ``ollama:MODEL`` — the wire API
      spoken and the model name sent (never a ``@BASE_URL``: that is ``base_url``).
    - ``base_url``: an ``http://`` or ``https://`` URL without credentials, or None for the
      provider's own endpoint.
    - ``api_key_env``: the *name* of the environment variable whose value is sent as the
      key (never the key itself), or None: then a ``base_url`` gets no key, and the
      provider's own endpoint gets the provider's standard key.
    - ``where``: the file or variables that set the table (for messages).
    """

    name: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    where: str = ""


def _model_field(where: str, name: str, key: str, value: Any) -> str | None:
    """One checked field of ``[models.NAME]``; None when empty. Values are never echoed: a
    mistaken base URL or variable name may hold the key itself."""
    def bad(what: str) -> ConfigError:
        return ConfigError(f"{where}: key 'models.{name}.{key}': {what}")

    if key not in MODEL_TABLE_KEYS:
        raise ConfigError(f"{where}: unknown key '{_shown(f'models.{name}.{key}')}' "
                          f"(a [models.NAME] table has {', '.join(MODEL_TABLE_KEYS)})")
    if not isinstance(value, str):
        raise bad("must be a string")
    if value == "":
        return None
    hidden = control_character(value)
    if hidden:
        raise bad(f"must not contain control characters ({hidden})")
    if key == "model":
        provider, _, model = value.partition(":")
        if provider not in MODEL_TABLE_PROVIDERS or not model.strip() or "@" in model:
            raise bad("must be openai:MODEL, anthropic:MODEL or ollama:MODEL (a base URL goes in base_url)")
    elif key == "base_url":
        from urllib.parse import urlsplit

        try:
            url = urlsplit(value)
            ok = url.scheme in ("http", "https") and bool(url.hostname)
            port_ok = url.port is None or url.port > 0
        except ValueError:
            ok = port_ok = False
        if not (ok and port_ok):
            raise bad("must be an http:// or https:// URL with a host")
        if url.username or url.password:
            raise bad("must not hold credentials: put the key in an environment variable and name it with api_key_env")
    elif not _ENV_NAME.match(value):
        raise bad("must be the name of an environment variable (letters, digits and _, not starting with a digit), "
                  "not the key itself")
    elif value.upper().startswith("PALUI_"):
        raise bad("must not name a PALUI_* variable (those are configuration)")
    return value


def _model_name(where: str, name: str) -> str:
    if not _MODEL_NAME.match(name):
        raise ConfigError(f"{where}: [models.{_shown(name)}]: a model name is lower-case letters and digits, "
                          "with single - or _ between them")
    return name


def _shown(name: str) -> str:
    """A table or key name from the file as a message shows it: escaped on one line (spec §4.7)."""
    from palui.text.escape import escape

    return escape(name, one_line=True)


class Tables:
    """``[models.NAME]`` tables while they are read: name -> field -> value, and who set them."""

    def __init__(self) -> None:
        self.fields: dict[str, dict[str, str | None]] = {}
        self.where: dict[str, list[str]] = {}

    def set(self, where: str, name: str, key: str, value: Any) -> None:
        self.fields.setdefault(name, {})[key] = _model_field(where, name, key, value)
        if where not in self.where.setdefault(name, []):
            self.where[name].append(where)

    def entries(self) -> dict[str, ModelEntry]:
        out = {}
        for name, fields in sorted(self.fields.items()):
            where = ", ".join(self.where[name])
            if not fields.get("model"):
                raise ConfigError(f"{where}: [models.{name}]: missing key 'model' (e.g. model = \"openai:llama3\")")
            out[name] = ModelEntry(name=name, model=str(fields["model"]), base_url=fields.get("base_url"),
                                   api_key_env=fields.get("api_key_env"), where=where)
        return out


def file_model_tables(where: str, raw: Any, out: Tables) -> None:
    """Collect the file's ``[models.NAME]`` tables into ``out``."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: key 'models' must be a table ([models.NAME] with {', '.join(MODEL_TABLE_KEYS)})")
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: key 'models.{_shown(name)}' must be a table ([models.{_shown(name)}] with "
                              "model = …)")
        _model_name(where, name)
        out.where.setdefault(name, []).append(where)
        out.fields.setdefault(name, {})
        for key, value in table.items():
            out.set(where, name, key, value)


def env_model_field(var: str, key: str, value: str, out: Tables) -> None:
    """``PALUI_MODELS__NAME__FIELD=value`` sets one field of ``[models.NAME]``
    (docs/decisions/0047-model-fields-from-the-environment.md)."""
    where = f"environment variable {var}"
    parts = key.split(".")
    if len(parts) != 3 or parts[2] not in MODEL_TABLE_KEYS:
        fields = ", ".join(k.upper() for k in MODEL_TABLE_KEYS)
        raise ConfigError(f"{where}: a named model is set as PALUI_MODELS__NAME__FIELD (FIELD: {fields})")
    out.set(where, _model_name(where, parts[1]), parts[2], value)
