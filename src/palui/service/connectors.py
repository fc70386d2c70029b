"""Service part: MCP connectors (add, import, remove, refresh, enable, show), spec §7.

What is stored where:

- ``list`` row: id ``mcp-<slug>``, the name, transport, ``config_json`` (command,
  args, cwd or the URL with its password and query values as ``***``, the *keys* of env
  and headers, per-connector timeout and output limit), ``state`` (last known: ``connected`` /
  ``connecting`` / ``error: …``), ``enabled``, ``trusted_source``.
- ``<secrets dir>/<id>.json`` (mode 0600): env and header values, the real URL.
- ``<data dir>/logs/<id>.stderr.log`` (+ ``.1``): the server's stderr, secrets redacted,
  1 MiB at most.

A relative stdio command path is stored absolute (:func:`absolute_paths`).

``add`` connects once and lists the tools before anything is stored: a server that
cannot start leaves nothing behind but its (redacted) stderr log, kept for diagnosis, and
the error says why.
Methods that talk to a server have an ``*_async`` form for callers inside an event
loop; the plain form runs its own loop (the CLI). Importing an ``mcpServers`` file is
:mod:`palui.service.connector_import`, signing in :mod:`palui.service.signin`: both hold a
reference to this part.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar, cast

from palui.config import Settings
from palui.config_schema import stored_value, value_for
from palui.connectors.hub import ConnectorHub
from palui.connectors.mcp import config_from_row
from palui.connectors.mcp.config import ServerConfig, delete_secrets, display_url, write_secrets
from palui.connectors.mcp.stderr import log_path
from palui.connectors.naming import connector_id
from palui.connectors.registry import SyncReport
from palui.errors import NotFound, PaluiError, UsageError
from palui.service.clock import Clock
from palui.service.notifier import Notifier
from palui.service.tools import ToolsPart, shown_state
from palui.store import redecide
from palui.store.db import Database
from palui.text.display import named
from palui.types import OAuthClient, SignIn

if TYPE_CHECKING:
    from palui.connectors.mcp.connector import MCPConnector
    from palui.results import Connector, ConnectorAdded, ConnectorSync, ListingChanges, MCPConfig, OAuthState

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` run to its end in an event loop of its own (the plain form of an ``*_async`` method).
    Raises UsageError inside a running loop (the caller must await the ``*_async`` form)."""
    # only the commands that talk to a server run an event loop (docs/decisions/0085-a-light-cli-start.md)
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise UsageError("this method runs its own event loop; inside one, use its *_async form")


def _report_dict(cid: str, report: SyncReport | None) -> ListingChanges:
    r = report or SyncReport()
    return {
        "id": cid,
        "added": r.added,
        "changed": r.changed,
        "tightened": r.tightened,
        "loosening_held": r.loosening_held,
        "removed": r.removed,
        "refused_duplicates": r.refused_duplicates,
        "class_tightened": [{"tool": n, "from": old, "to": new} for n, old, new in r.class_tightened],
        "schema_flagged": [{"tool": n, "why": why} for n, why in r.schema_flagged],
    }


def absolute_paths(config: ServerConfig, base: str) -> ServerConfig:
    """``config`` with a relative stdio command path and working directory made absolute.

    A command containing ``/`` that is not absolute (``.venv/bin/mcp-server-time``) is resolved
    the way the process start would resolve it: against ``cwd`` when one is given, else against
    ``base`` (the current directory for ``add``, the file's directory for ``import``). A
    relative ``cwd`` is resolved against ``base``. A leading ``~`` is expanded. Bare names
    (``npx``) are left to ``PATH``, arguments are left as they are. No symlink is followed
    (a venv's ``bin/python`` must stay the venv's). Without this, a server added from one
    directory fails "command not found" in every process started from another.
    """
    if config.transport != "stdio" or not config.command:
        return config
    cwd = config.cwd
    if cwd:
        cwd = os.path.abspath(os.path.join(base, os.path.expanduser(cwd)))
    command = os.path.expanduser(config.command) if config.command.startswith("~") else config.command
    if "/" in command and not os.path.isabs(command):
        command = os.path.abspath(os.path.join(cwd or base, command))
    if (command, cwd) == (config.command, config.cwd):
        return config
    return dataclasses.replace(config, command=command, cwd=cwd)


class ConnectorsPart:
    """MCP servers as connectors.

    Args:
        db, settings, hub, notifier, clock: the service's shared collaborators.
        tools_part: the catalog (stored connectors and tools, switching read tools on).
        redecide: re-decides pending approvals (spec §5), after a connector is switched off.
    """

    def __init__(self, db: Database, settings: Settings, hub: ConnectorHub, notifier: Notifier, clock: Clock,
                 tools_part: ToolsPart, redecide: Callable[[], object]) -> None:
        self.db = db
        self.settings = settings
        self.hub = hub
        self.notifier = notifier
        self.clock = clock
        self.tools_part = tools_part
        self.redecide = redecide

    # -- reading ----------------------------------------------------------------------------------

    def row(self, cid: str) -> dict[str, Any]:
        """The stored row of the MCP connector ``cid``. Raises NotFound, UsageError (a built-in connector)."""
        row = self.db.one("SELECT * FROM connectors WHERE id = ?", (cid,))
        if row is None:
            raise NotFound(f"unknown connector {named(cid)} (see: palui connectors list)")
        if row["kind"] != "mcp":
            raise UsageError(f"{cid} is a built-in connector, not an MCP server")
        return dict(row)

    def live(self, cid: str) -> MCPConnector | None:
        """The connector live in this process's hub, if it holds ``cid``."""
        conn = self.hub.live(cid)
        if conn is None:
            return None  # no SDK import for a process that never started a server
        from palui.connectors.mcp.connector import MCPConnector

        return conn if isinstance(conn, MCPConnector) else None

    def config(self, cid: str) -> MCPConfig:
        """An MCP connector's configuration with secret values redacted (the URL's password and
        query values too, spec §10).

        ``{"id","name","transport","command","args","cwd","url","env":{KEY:"***"},
        "headers":{KEY:"***"},"timeout_seconds","max_output_bytes","state","last_state","enabled",
        "secrets_file","secret_questions","stderr_log"}``; ``secret_questions``: its questions may ask for
        secrets (asked with hidden input, spec §7.8); the timeout and limit are the effective ones. ``state`` is the
        live state in this process, ``idle`` when it was not started here (spec §7) unless it waits for a
        sign-in (``error: sign in again``, stored by any process); ``last_state`` is
        the last one stored by any process (``connected``, ``error: …``).
        """
        row = self.row(cid)
        public = json.loads(row["config_json"] or "{}")
        live = self.live(cid)
        return {
            "id": cid,
            "name": row["name"],
            "transport": row["transport"],
            "command": public.get("command"),
            "args": public.get("args") or [],
            "cwd": public.get("cwd"),
            "url": display_url(public["url"]) if public.get("url") else None,
            "env": {k: "***" for k in public.get("env_keys") or []},
            "headers": {k: "***" for k in public.get("header_keys") or []},
            "timeout_seconds": stored_value("mcp.call_timeout_seconds", public.get("timeout_seconds"))
            or self.settings.mcp.call_timeout_seconds,
            "max_output_bytes": stored_value("mcp.max_output_bytes", public.get("max_output_bytes"))
            or self.settings.mcp.max_output_bytes,
            # spec §7: a connector not started in this process is idle (it starts when a turn calls one of its tools).
            # A connector waiting for a sign-in says so wherever it is not live (spec §7.7, §7.9).
            "state": shown_state(row["state"] if row["enabled"] else "disabled", live.state() if live else None),
            "last_state": row["state"],
            "enabled": bool(row["enabled"]),
            "secrets_file": str(self.settings.secrets_dir / f"{cid}.json"),
            "oauth": self.oauth_state(cid) if row["transport"] == "http" else None,
            "secret_questions": bool(row["secret_questions"]),
            "stderr_log": str(log_path(self.settings.data_dir, cid)) if row["transport"] == "stdio" else None,
            "recovered": live.recovered if live else None,
        }

    def oauth_state(self, cid: str) -> OAuthState:
        """``{"signed_in","issuer","expires_at","scopes","waiting"}`` of an HTTP connector (no token, no client
        secret), read from the token files the sign-in (:mod:`palui.service.signin`) stores; ``waiting``: its
        step-ups waiting for the person (spec §7.11)."""
        from palui.store import scope_requests

        waiting = scope_requests.of_connector(self.db, cid)
        path = self.settings.secrets_dir / "oauth" / "tokens"
        for p in sorted(path.glob(f"{cid}.*.json")) if path.is_dir() else []:
            try:
                data = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            token = data.get("token") or {}
            if data.get("connector") == cid and token.get("access_token"):
                expires = (data["received_at"] + token["expires_in"]) if token.get("expires_in") else None
                return {"signed_in": True, "issuer": data.get("issuer"), "expires_at": expires,
                        "scopes": str(token.get("scope") or "").split(), "waiting": waiting}
        return {"signed_in": False, "issuer": None, "expires_at": None, "scopes": [], "waiting": waiting}

    def list(self) -> list[Connector]:
        """Connectors as the person sees them: the stored rows
        (:meth:`~palui.service.tools.ToolsPart.connector_rows`), and MCP ones also carry ``"config"``
        (secrets redacted), their state in this process (``idle`` when not started here, spec §7) and
        ``"last_state"``."""
        out = self.tools_part.connector_rows()
        for c in out:
            if c.get("kind") == "mcp":
                cfg = self.config(c["id"])
                c["state"] = cfg["state"]
                c["last_state"] = cfg["last_state"]
                c["recovered"] = cfg.get("recovered")
                c["config"] = {
                    "command": cfg["command"], "args": cfg["args"], "cwd": cfg["cwd"], "url": cfg["url"],
                    "env": cfg["env"], "headers": cfg["headers"], "timeout_seconds": cfg["timeout_seconds"],
                    "max_output_bytes": cfg["max_output_bytes"], "oauth": cfg["oauth"],
                }
        return out

    # -- adding -------------------------------------------------------------------------------------

    async def add_async(self, name: str, config: ServerConfig, *, enable_read: bool = False,
                        sign_in: SignIn | None = None, client: OAuthClient | None = None) -> ConnectorAdded:
        """Add an MCP server: connect once, list and store its tools (off; ``enable_read`` switches
        on the read ones). Returns ``{"id","name","transport","state","tools","enabled",
        "refused_duplicates",…}``.

        An HTTP server that wants OAuth is signed in to on the way when ``sign_in`` is given (the
        front end's part: showing the URL, a pasted address), with ``client`` when the person
        registered one themselves; without ``sign_in`` the add fails saying how to sign in.

        Raises ConnectorError (server cannot start or list, or the sign-in did not finish; nothing is
        stored but the redacted stderr log), NamingError (no usable id), UsageError.
        """
        if not name.strip():
            raise UsageError("a connector needs a name")
        config.refuse_control_characters()
        # A connector's own limits are those keys for one server: the same ranges (spec §10.4).
        if config.timeout_seconds is not None:
            value_for("mcp.call_timeout_seconds", config.timeout_seconds, "timeout_seconds")
        if config.max_output_bytes is not None:
            value_for("mcp.max_output_bytes", config.max_output_bytes, "max_output_bytes")
        config = absolute_paths(config, os.getcwd())
        taken = {r["id"] for r in self.db.all("SELECT id FROM connectors")}
        cid = connector_id(name, taken)
        with self.db.write() as c:
            c.execute(
                "INSERT INTO connectors (id, kind, name, transport, config_json, state, created_at)"
                " VALUES (?, 'mcp', ?, ?, ?, 'connecting', ?)",
                (cid, name, config.transport, json.dumps(config.public(), allow_nan=False), self.clock.now()),
            )
        state = "connected"
        report = None
        try:
            self.save_client(cid, client)
            try:
                report = (await self.connect_once(cid, name, config, sign_in)).last_report
            except PaluiError:
                # A server that wants a sign-in nobody can give now (the web form): kept without tools,
                # "error: sign in again"; its sheet's "Sign in" (or palui connectors login) finishes it.
                row = self.db.one("SELECT state FROM connectors WHERE id = ?", (cid,))
                if sign_in is not None or row is None or row["state"] != "error: sign in again":
                    raise
                state = row["state"]
            write_secrets(self.settings.secrets_dir, cid, config.secrets())
        except BaseException:
            with self.db.write() as c:
                c.execute("DELETE FROM connectors WHERE id = ?", (cid,))
            delete_secrets(self.settings.secrets_dir, cid)
            self.forget_oauth(cid)
            raise
        enabled = [r.name for r in self.tools_part.enable_read(cid)] if enable_read else []
        return {
            **_report_dict(cid, report),
            "name": name,
            "transport": config.transport,
            "state": state,
            "tools": [t.name for t in self.tools_part.list(cid)] if report is not None else [],
            "enabled": enabled,
        }

    def add(self, name: str, config: ServerConfig, *, enable_read: bool = False, sign_in: SignIn | None = None,
            client: OAuthClient | None = None) -> ConnectorAdded:
        """Synchronous :meth:`add_async` (runs its own event loop)."""
        return run_sync(self.add_async(name, config, enable_read=enable_read, sign_in=sign_in, client=client))

    async def connect_once(self, cid: str, name: str, config: ServerConfig, sign_in: SignIn | None = None,
                            handler: Any = None) -> MCPConnector:
        """Connect (signing in when the server wants it and a way to sign in is given), sync the tools,
        close. Returns the closed connector (its ``last_report``). Raises ConnectorError."""
        from contextlib import AsyncExitStack

        from palui.connectors.mcp.connector import MCPConnector
        from palui.connectors.mcp.oauth import OAuthFiles
        from palui.connectors.mcp.oauth.signin import loopback_sign_in

        async with AsyncExitStack() as stack:
            if handler is None and sign_in is not None and config.transport == "http":
                handler = await stack.enter_async_context(
                    loopback_sign_in(OAuthFiles(self.settings.secrets_dir), cid, sign_in,
                                     self.settings.mcp.oauth.client_metadata_url))
            connector = MCPConnector(self.hub.env, cid, name, config, sign_in=handler)
            try:
                await connector.start()
            finally:
                await connector.close()
        return connector

    def save_client(self, cid: str, client: OAuthClient | None) -> None:
        """Store a client the person registered themselves (a 0600 file; the secret never in argv or the database)."""
        if client is None:
            return
        from mcp.shared.auth import OAuthClientInformationFull

        from palui.connectors.mcp.oauth import OAuthFiles

        method = client.auth_method if client.client_secret else "none"
        if method not in ("client_secret_basic", "client_secret_post", "none"):
            raise UsageError(f"unknown client authentication {client.auth_method!r}: use basic or post")
        info = OAuthClientInformationFull.model_validate({
            "client_id": client.client_id, "client_secret": client.client_secret, "token_endpoint_auth_method": method,
            "redirect_uris": [client.redirect_uri or "http://127.0.0.1/oauth/callback"],
            "grant_types": ["authorization_code", "refresh_token"]})
        OAuthFiles(self.settings.secrets_dir).save_pre_registered(cid, info)

    def forget_oauth(self, cid: str) -> None:
        """Delete the OAuth client and tokens stored for ``cid`` (nothing to do without an OAuth directory)."""
        if (self.settings.secrets_dir / "oauth").is_dir():
            from palui.connectors.mcp.oauth import OAuthFiles

            OAuthFiles(self.settings.secrets_dir).forget_connector(cid)

    # -- changing --------------------------------------------------------------------------------------

    async def refresh_async(self, cid: str) -> ConnectorSync:
        """Connect (or use the live session), re-list the tools and sync them: the rug-pull check (spec §7).

        Returns the sync report ``{"id","added","changed","tightened","loosening_held",
        "removed","refused_duplicates","state"}``. Raises NotFound, UsageError (disabled),
        ConnectorError (the server cannot start or list).
        """
        row = self.row(cid)
        if not row["enabled"]:
            raise UsageError(f"{cid} is disabled; enable it first (palui connectors enable {cid})")
        live = self.live(cid)
        if live is not None:
            report = await live.refresh()
            return {**_report_dict(cid, report), "state": live.state(), "recovered": live.recovered}
        from palui.connectors.mcp.connector import MCPConnector

        connector = MCPConnector(self.hub.env, cid, row["name"], config_from_row(self.hub.env, row))
        try:
            report = await connector.refresh()
            state = connector.state()
        finally:
            await connector.close()
        # ``_report_dict`` has no ``recovered``: only a live connector's refresh can say what it recovered
        return cast("ConnectorSync", {**_report_dict(cid, report), "state": state})

    def refresh(self, cid: str) -> ConnectorSync:
        """Synchronous :meth:`refresh_async`."""
        return run_sync(self.refresh_async(cid))

    def remove(self, cid: str) -> None:
        """Forget an MCP connector: its row and tools, its secrets file and stderr logs.

        A session live in this process is dropped from the hub and closed.
        Raises NotFound, UsageError (built-in connector).
        """
        self.row(cid)
        live = self.live(cid)
        if live is not None:
            self.hub.forget(cid)
            import asyncio

            try:
                asyncio.get_running_loop().create_task(live.close())
            except RuntimeError:
                pass  # no loop here: the session's own loop has ended, and with it the server
        # Its pending approvals end now, with the real reason (spec §5), before its tools are gone.
        why = f"the connector {cid} was removed after this approval was asked"
        for a in self.db.all("SELECT a.id, a.tool, a.turn_id FROM approvals a JOIN tools t ON t.name = a.tool"
                             " WHERE a.status = 'pending' AND t.connector_id = ?", (cid,)):
            if redecide.cancel(self.db, a["id"], why):
                self.notifier("notice", f"Approval {a['id']} ({a['tool']}) was cancelled: {why}.",
                            turn_id=a["turn_id"], approval_id=a["id"])
        with self.db.write() as c:
            c.execute("DELETE FROM tools WHERE connector_id = ?", (cid,))
            c.execute("DELETE FROM connectors WHERE id = ?", (cid,))
        delete_secrets(self.settings.secrets_dir, cid)
        self.forget_oauth(cid)
        log = log_path(self.settings.data_dir, cid)
        for p in (log, log.with_name(log.name + ".1")):
            p.unlink(missing_ok=True)
        self.redecide()  # its tools are gone: the standing approvals bound to them are suspended (spec §5.9)

    def set_enabled(self, cid: str, enabled: bool) -> MCPConfig:
        """Enable or disable an MCP connector. A disabled one shows state ``disabled`` and its calls are
        refused; its tools keep their switches. Returns :meth:`config`."""
        self.row(cid)
        with self.db.write() as c:
            c.execute("UPDATE connectors SET enabled = ? WHERE id = ?", (int(enabled), cid))
        live = self.live(cid)
        if live is not None:
            live.enabled = enabled
        if not enabled:
            self.redecide()
        return self.config(cid)

    def resolve_tool(self, connector: str, tool: str) -> str:
        """The model-visible name of ``tool`` (visible or raw name) of ``connector``. Raises NotFound."""
        row = self.db.one(
            "SELECT name FROM tools WHERE connector_id = ? AND (name = ? OR raw_name = ?) ORDER BY name = ? DESC",
            (connector, tool, tool, tool),
        )
        if row is None:
            raise NotFound(f"{connector} has no tool {tool!r} (see: palui tools list --connector {connector})")
        return str(row["name"])
