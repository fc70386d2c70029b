"""How to reach one MCP server, which of its values are secrets, and the ``mcpServers`` import (spec §7, §10).

Pure (no I/O): shared by the front ends (``--env K=V`` pairs, the web form) and the MCP layer,
which keeps the secrets file (:mod:`palui.connectors.mcp.config`).

A server is reached over stdio (``command`` + ``args``, optional ``cwd``) or streamable
HTTP (``url``). Its environment values, HTTP header values and the URL's password and
query-string values (hosted servers often carry their key there) are **secrets**: they are
kept out of the database (``connectors.config_json`` stores only the keys, and the URL as
:func:`display_url` shows it) in ``<secrets dir>/<connector id>.json``, a file of mode 0600
in a directory of mode 0700, and every error message and stderr log that could carry them
goes through :func:`redact`.

The import format is the common one::

    {"mcpServers": {"notes": {"command": "npx", "args": ["-y", "notes-mcp"], "env": {"TOKEN": "${NOTES_TOKEN}"}},
                    "remote": {"url": "https://example.org/mcp", "headers": {"Authorization": "Bearer ${TOK}"}}}}

``${VAR}`` in any string is replaced by the environment variable ``VAR``; ``$$`` is a
literal ``$``. A variable that is not set is an error naming the server, the field and
the variable (never a value).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from palui.errors import ConnectorError, UsageError

TRANSPORTS = ("stdio", "http")
# Secrets shorter than this are not redacted: replacing every "1" or "on" in an error
# message would make it unreadable, and such values protect nothing.
MIN_REDACT_LEN = 4
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_HTTP_TYPES = {"http", "streamable-http", "streamablehttp", "streamable_http"}


@dataclass(frozen=True)
class ServerConfig:
    """How to start or reach one MCP server.

    ``transport`` is ``"stdio"`` (``command``, ``args``, ``cwd``) or ``"http"`` (``url``).
    ``env`` (stdio) and ``headers`` (http) are secrets, never stored in the database.
    ``timeout_seconds`` / ``max_output_bytes`` override ``mcp.call_timeout_seconds`` /
    ``mcp.max_output_bytes`` for this connector (None: use the settings); the service holds them to those
    keys' ranges when a connector is added (:func:`palui.config_schema.value_for`).
    """

    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: str | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    timeout_seconds: float | None = None
    max_output_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise UsageError(f"unknown MCP transport {_safe(self.transport)}: use stdio or http")
        if self.transport == "stdio" and not self.command:
            raise UsageError("a stdio MCP server needs a command (palui connectors add NAME -- COMMAND ARGS…)")
        if self.transport == "http":
            if not self.url or not re.match(r"^https?://", self.url):
                shown = _safe(display_url(self.url)) if self.url else "nothing"
                raise UsageError(f"an MCP server URL must start with http:// or https:// (got {shown})")

    def refuse_control_characters(self) -> None:
        """A control character (NUL, a line feed, an escape…) in what becomes a process argument, a path, a
        host or an HTTP header is refused naming the field and where, never the value (a secret, spec §10.4);
        an environment value may hold any but NUL (a key file's line feeds), which no process can be given.
        Called where a configuration comes in (the service's add), not on stored ones. Raises UsageError."""
        from palui.text.escape import control_character

        named = [("the command", self.command), ("the working directory (cwd)", self.cwd), ("the URL", self.url)]
        named += [(f"argument {i}", a) for i, a in enumerate(self.args, 1)]
        named += [(f"the environment variable name {_safe(k)}", k) for k in self.env]
        named += [(f"the header name {_safe(k)}", k) for k in self.headers]
        named += [(f"the value of header {_safe(k)}", v) for k, v in self.headers.items()]
        for what, value in named:
            where = control_character(value) if value else None
            if where:
                raise UsageError(f"{what} must not contain control characters ({where})")
        for k, v in self.env.items():
            if "=" in k or not k:
                raise UsageError(f"the environment variable name {_safe(k)} must be a name without '='")
            if "\x00" in v:
                raise UsageError(f"the value of environment variable {_safe(k)} must not contain NUL "
                                 f"(U+0000 at character {v.index(chr(0)) + 1:,})")

    @property
    def secret_values(self) -> list[str]:
        """Every secret value (env and header values, the URL's password and query values), for :func:`redact`."""
        return list(self.env.values()) + list(self.headers.values()) + url_secrets(self.url)

    @property
    def display_url(self) -> str | None:
        """The URL as it may be shown: password and query values as ``***`` (:func:`display_url`)."""
        return display_url(self.url) if self.url else self.url

    def public(self) -> dict[str, Any]:
        """The ``connectors.config_json`` shape: everything but secret values (keys only, the URL as
        :func:`display_url` shows it; ``url_secret`` says the real one is in the secrets file)."""
        out: dict[str, Any] = {"transport": self.transport}
        if self.transport == "stdio":
            out.update(command=self.command, args=list(self.args), cwd=self.cwd, env_keys=sorted(self.env))
        else:
            out.update(url=self.display_url, url_secret=self.display_url != self.url, header_keys=sorted(self.headers))
        out["timeout_seconds"] = self.timeout_seconds
        out["max_output_bytes"] = self.max_output_bytes
        return out

    def secrets(self) -> dict[str, Any]:
        """The secrets file shape: ``{"env": {...}, "headers": {...}}``, plus ``"url"`` (the real URL) for HTTP."""
        out: dict[str, Any] = {"env": dict(self.env), "headers": dict(self.headers)}
        if self.transport == "http":
            out["url"] = self.url
        return out

    @classmethod
    def from_stored(cls, public: Mapping[str, Any], secrets: Mapping[str, Any]) -> ServerConfig:
        """Rebuild a config from ``connectors.config_json`` and the secrets file content.

        The URL is the secrets file's ``"url"``; a connector stored before URLs were
        secrets has none there and keeps the one in ``config_json``.
        Raises ConnectorError when a stored key has no secret value any more (the
        secrets file was removed or edited by hand).
        """
        env = dict(secrets.get("env") or {})
        headers = dict(secrets.get("headers") or {})
        url = secrets.get("url") if isinstance(secrets.get("url"), str) else None
        missing = [k for k in public.get("env_keys") or [] if k not in env]
        missing += [k for k in public.get("header_keys") or [] if k not in headers]
        if public.get("url_secret") and url is None:
            missing.append("the URL")
        if missing:
            raise ConnectorError(
                f"the secrets file lacks the value of {', '.join(sorted(missing))}; remove and add the connector again"
            )
        return cls(
            transport=public.get("transport") or ("http" if public.get("url") else "stdio"),
            command=public.get("command"), args=tuple(public.get("args") or ()), cwd=public.get("cwd"),
            url=url or public.get("url"), env=env, headers=headers,
            timeout_seconds=public.get("timeout_seconds"), max_output_bytes=public.get("max_output_bytes"),
        )


def _safe(name: str) -> str:
    """A variable or header name as a message shows it: quoted, escaped on one line (spec §4.7)."""
    from palui.text.display import named

    return named(name, 60)


def url_secrets(url: str | None) -> list[str]:
    """The secret parts of a URL: its password and every query-string value, each as written
    and percent-decoded (an error message may quote either form). ``[]`` for None."""
    if not url:
        return []
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return [url]  # unparseable: the whole URL is treated as the secret
    raw: list[str] = []
    netloc = parts.netloc
    if "@" in netloc:
        userinfo = netloc.rpartition("@")[0]
        if ":" in userinfo:
            raw.append(userinfo.partition(":")[2])
    for pair in re.split(r"[&;]", parts.query):
        if "=" in pair:
            raw.append(pair.partition("=")[2])
    out: list[str] = []
    for v in raw:
        out += [v, urllib.parse.unquote(v), urllib.parse.unquote_plus(v)]
    return [v for v in dict.fromkeys(out) if v]


def display_url(url: str) -> str:
    """``url`` with its password and query-string values replaced by ``***`` (spec §10):
    ``http://user:pw@host/mcp?api_key=k&v`` → ``http://user:***@host/mcp?api_key=***&v``.
    An URL that cannot be parsed is shown as ``***``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        if ":" in userinfo:
            netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = re.sub(r"=[^&;]*", "=***", parts.query)  # every value; "&" and the rare ";" separate pairs
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value of at least 4 characters replaced by ``***`` (spec §10)."""
    for s in sorted({s for s in secrets if s and len(s) >= MIN_REDACT_LEN}, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


# -- ${VAR} expansion and the mcpServers import -------------------------------------------------------


def expand(value: str, environ: Mapping[str, str], where: str) -> str:
    """Replace ``${VAR}`` by ``environ[VAR]`` and ``$$`` by ``$``.

    Raises UsageError naming ``where`` and the variable when it is not set.
    """

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name not in environ:
            raise UsageError(f"{where}: environment variable {name} is not set")
        return environ[name]

    return _VAR.sub(sub, value)


def parse_pairs(pairs: Iterable[str], what: str, environ: Mapping[str, str]) -> dict[str, str]:
    """``["K=V", "K2"]`` from the command line into a dict.

    ``K=V`` takes V (with ``${VAR}`` expansion); a bare ``K`` (env only) takes the
    value of the environment variable K, so the secret need not appear on the command
    line. Raises UsageError on a malformed pair or a missing variable.
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not key:
            raise UsageError(f"{what} {pair.split('=')[0]!r}…: expected KEY=VALUE")
        if not sep:
            if what != "--env":
                raise UsageError(f"{what} {key}: expected {key}=VALUE")
            if key not in environ:
                raise UsageError(f"--env {key}: environment variable {key} is not set")
            out[key] = environ[key]
        else:
            out[key] = expand(value, environ, f"{what} {key}")
    return out


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: must be a list of strings")
    return value


def _string_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: must be an object of strings")
    out = {}
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise UsageError(f"{where}: the value of {k!r} must be a string")
        out[str(k)] = v if isinstance(v, str) else str(v)
    return out


def parse_mcp_servers(data: Any, environ: Mapping[str, str],
                      source: str = "the file") -> list[tuple[str, ServerConfig]]:
    """Parse the common ``{"mcpServers": {name: {...}}}`` JSON (``"servers"`` is accepted too).

    Each entry is ``{command, args?, env?, cwd?}`` (stdio) or ``{url, headers?}``
    (streamable HTTP; ``"type": "sse"`` is refused: SSE is not supported). Unknown
    keys (``disabled``, ``autoApprove``…) are ignored: nothing is ever auto-approved.
    Every entry is checked and expanded before any is returned.

    Raises UsageError naming the server and field (never a secret value).
    """
    if not isinstance(data, dict):
        raise UsageError(f'{source}: expected a JSON object with an "mcpServers" object')
    servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, dict):
        raise UsageError(f'{source}: expected a JSON object with an "mcpServers" object')
    out: list[tuple[str, ServerConfig]] = []
    for name, entry in servers.items():
        where = f"{source}: server {name!r}"
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: must be an object")
        kind = str(entry.get("type") or entry.get("transport") or "").lower()
        if kind == "sse":
            raise UsageError(f"{where}: the SSE transport is not supported; use streamable HTTP")
        has_url, has_cmd = "url" in entry, "command" in entry
        if has_url == has_cmd:
            raise UsageError(f'{where}: needs either "command" (stdio) or "url" (streamable HTTP)')
        if kind and kind != "stdio" and kind not in _HTTP_TYPES:
            raise UsageError(f"{where}: unknown type {kind!r}")
        if has_cmd:
            if not isinstance(entry["command"], str) or not entry["command"].strip():
                raise UsageError(f'{where}: "command" must be a non-empty string')
            command = expand(entry["command"], environ, f"{where}: command")
            args = [expand(a, environ, f"{where}: args") for a in _strings(entry.get("args", []), f"{where}: args")]
            env = {
                k: expand(v, environ, f"{where}: env {k}")
                for k, v in _string_map(entry.get("env", {}), f"{where}: env").items()
            }
            cwd = entry.get("cwd")
            if cwd is not None and not isinstance(cwd, str):
                raise UsageError(f'{where}: "cwd" must be a string')
            cfg = ServerConfig(
                "stdio",
                command=command,
                args=tuple(args),
                env=env,
                cwd=expand(cwd, environ, f"{where}: cwd") if cwd else None,
            )
        else:
            if not isinstance(entry["url"], str):
                raise UsageError(f'{where}: "url" must be a string')
            url = expand(entry["url"], environ, f"{where}: url")
            headers = {
                k: expand(v, environ, f"{where}: header {k}")
                for k, v in _string_map(entry.get("headers", {}), f"{where}: headers").items()
            }
            try:
                cfg = ServerConfig("http", url=url, headers=headers)
            except UsageError as e:
                raise UsageError(f"{where}: {e}") from None
        out.append((str(name), cfg))
    return out
