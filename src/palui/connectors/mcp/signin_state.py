"""An MCP connector's sign-in state (OAuth, spec §7.9): held by :class:`~palui.connectors.mcp.connector.MCPConnector`.

A connector made for a turn or a job (``sign_in`` None) never waits for a browser: when its server
needs a sign-in a refresh cannot give, the stored state becomes ``error: sign in again`` (the person
is told once: the first process to store it tells), and until someone signs in (any process:
``palui connectors login``, the sheet's "Sign in") it is :meth:`SignInState.blocked`, so the hub
refuses it at once and its tools are not offered.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from palui.connectors.mcp.oauth import OAuthSetup, SignInHandler
from palui.types import SIGN_IN_AGAIN, sign_in_again

if TYPE_CHECKING:
    from palui.connectors.base import ConnectorEnv
    from palui.connectors.mcp.config import ServerConfig

log = logging.getLogger("palui.connectors.mcp.connector")


class SignInState:
    """Whether one MCP connector may connect, and how a sign-in reaches Palui.

    Args:
        env: the database (the stored state), settings (where the web sign-in comes back) and notifier.
        connector_id, name: the connector's id and the name the person gave it.
        config: how to reach the server (only an HTTP server signs in).
        sign_in: how a sign-in reaches Palui (:mod:`.oauth.signin`); None: nobody can sign in now (a turn,
            a job), so a needed sign-in is an error at once.
    """

    def __init__(self, env: ConnectorEnv, connector_id: str, name: str, config: ServerConfig,
                 sign_in: SignInHandler | None) -> None:
        self.env = env
        self.id = connector_id
        self.name = name
        self.config = config
        self.sign_in = sign_in

    def oauth(self) -> OAuthSetup | None:
        """The OAuth setup of an HTTP server's session (None for stdio)."""
        if self.config.transport != "http":
            return None
        from palui.connectors.mcp.oauth.signin import NoInteraction

        settings = self.env.settings
        host, port, public = settings.serve.host, settings.serve.port, settings.serve.public_url
        web = (public.rstrip("/") if public else f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}")
        wanted: tuple[str, ...] = ()
        if self.sign_in is not None:  # a sign-in asks for the pending step-ups too (spec §7.11)
            from palui.store.scope_requests import wanted_scopes

            wanted = wanted_scopes(self.env.db, self.id)
        return OAuthSetup(settings.secrets_dir, self.id, self.sign_in or NoInteraction(),
                          client_metadata_url=settings.mcp.oauth.client_metadata_url,
                          extra_redirect_uris=(f"{web}/oauth/callback", "http://127.0.0.1/oauth/callback"),
                          wanted_scopes=wanted)

    def blocked(self, enabled: bool, signed_out: bool | None = None) -> str | None:
        """``sign in again`` until someone signs in (any process: the stored state says so); never for
        a connector the person signs in with, or a disabled one. ``signed_out``: whether the stored state says
        so, when the caller read it already (a tool row's ``connector_signin``, read in the same statement);
        None reads it."""
        if self.sign_in is None and enabled:
            if signed_out is None:
                signed_out = self._stored_state() == SIGN_IN_AGAIN
            if signed_out:
                return sign_in_again(self.id)
        return None

    def _stored_state(self) -> str | None:
        try:
            r = self.env.db.one("SELECT state FROM connectors WHERE id = ?", (self.id,))
        except Exception:  # the state is a hint here; a busy database must not stop a call
            return None
        return r["state"] if r else None

    def record_needed(self, why: str | None = None) -> None:
        """Store state ``error: sign in again``; the person is told once (the first process to record it tells), with
        ``why`` when it says more than "sign in again" (the server named another authorization server)."""
        try:
            with self.env.db.write() as c:
                changed = c.execute("UPDATE connectors SET state = ? WHERE id = ? AND state IS NOT ?",
                                    (SIGN_IN_AGAIN, self.id, SIGN_IN_AGAIN)).rowcount
        except Exception as e:  # a busy database must not turn a call into a crash
            log.warning("%s: could not store state: %s", self.id, e)
            return
        if changed:
            reason = f" ({why.removesuffix(': sign in again')})" if why and why != "sign in again" else ""
            self.env.notify("notice", f"{self.name} ({self.id}) needs you to sign in again{reason}: run palui "
                            f"connectors login {self.id}, or use “Sign in” on its sheet. Its tools are not offered "
                            "until then.")
