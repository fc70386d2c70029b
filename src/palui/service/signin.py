"""Service part: signing in to remote MCP servers (OAuth 2.1, spec §7.9).

- :meth:`SignInPart.login_async` — ``palui connectors login ID``: connect with the person
  taking part (a loopback listener on 127.0.0.1 and, when the front end can read one, a pasted
  redirect address), store the tokens, sync the tools.
- :meth:`logout_async` — delete the connector's tokens, revoking them where the server offers it.
- :meth:`start_web` / :meth:`complete_web` — the web sheet's "Sign in": the first
  returns the authorization URL the page sends the browser to; ``/oauth/callback`` (after the page
  checked the session cookie) hands the browser's address to the second, which checks the ``state``.

Inside a turn nobody signs in: a connector that needs it is ``error: sign in again`` and refuses at
once until one of these succeeds. Tokens live in 0600 files under the secrets directory
(:mod:`palui.connectors.mcp.oauth.storage`), never in the database, a log line or a page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from palui.config import Settings
from palui.connectors.hub import ConnectorHub
from palui.errors import ConnectorError, NotFound, UsageError
from palui.service.connectors import ConnectorsPart
from palui.store import scope_requests
from palui.store.db import Database
from palui.types import OAuthClient, SignIn

if TYPE_CHECKING:
    import asyncio

WEB_SIGN_IN_WAIT = 30.0  # seconds the page waits for the authorization URL, or for the end of the sign-in


class SignInPart:
    """OAuth sign-in and sign-out of MCP connectors.

    Args:
        db, settings, hub: the service's shared collaborators.
        connectors_part: the MCP connectors (their rows, a one-time connection, a client the person registered,
            whether a connector holds tokens).
        redecide: re-decides pending approvals (spec §5) once a sign-in synced the tools.
    """

    def __init__(self, db: Database, settings: Settings, hub: ConnectorHub, connectors_part: ConnectorsPart,
                 redecide: Callable[[], object]) -> None:
        self.db = db
        self.settings = settings
        self.hub = hub
        self.connectors_part = connectors_part
        self.redecide = redecide
        # The web sheet's sign-ins waiting for the browser to come back, by their OAuth ``state``.
        self._web_sign_ins: dict[str, tuple[Any, asyncio.Task[dict[str, Any]]]] = {}

    def _http_row(self, cid: str) -> dict[str, Any]:
        row = self.connectors_part.row(cid)
        if row["transport"] != "http":
            raise UsageError(f"{cid} is a stdio server: only remote (HTTP) servers sign in")
        return row

    async def _sign_in(self, cid: str, *, sign_in: SignIn | None = None, handler: Any = None,
                       client: OAuthClient | None = None) -> dict[str, Any]:
        from palui.connectors.mcp import config_from_row

        row = self._http_row(cid)
        self.connectors_part.save_client(cid, client)
        live = self.hub.forget(cid)  # the next use connects with the new tokens
        if live is not None:
            await live.close()
        with self.db.write() as c:  # a new attempt: no longer "sign in again" (a failure sets it again)
            c.execute("UPDATE connectors SET state = 'connecting' WHERE id = ?", (cid,))
        try:
            connector = await self.connectors_part.connect_once(cid, row["name"], config_from_row(self.hub.env, row),
                                                                sign_in, handler)
        except ConnectorError:
            with self.db.write() as c:
                c.execute("UPDATE connectors SET state = 'error: sign in again' WHERE id = ? AND state = 'connecting'",
                          (cid,))
            raise
        self.redecide()
        report = connector.last_report
        signed = self.connectors_part.oauth_state(cid)
        # spec §7.11: the step-ups this sign-in's scopes cover are answered
        granted = scope_requests.settle(self.db, cid, tuple(signed.get("scopes") or ()))
        return {"id": cid, "state": "connected", "signed_in": signed["signed_in"],
                "added": report.added if report else [], "changed": report.changed if report else [],
                "scopes": signed.get("scopes") or [], "granted": [r["id"] for r in granted],
                "waiting": [r["id"] for r in scope_requests.of_connector(self.db, cid)]}

    async def login_async(self, cid: str, sign_in: SignIn, client: OAuthClient | None = None) -> dict[str, Any]:
        """Sign in to ``cid`` now (``palui connectors login``). Returns ``{"id","state","signed_in","added",
        "changed","scopes","granted","waiting"}``: the scopes the token holds, the step-ups (``s-…``) it granted
        and those still waiting (spec §7.11: the sign-in asks for the union of the granted scopes and theirs).
        Raises NotFound, UsageError (not an HTTP connector), ConnectorError (the sign-in or the connection
        failed: the message says why, without secrets)."""
        return await self._sign_in(cid, sign_in=sign_in, client=client)

    async def logout_async(self, cid: str) -> dict[str, Any]:
        """Forget ``cid``'s tokens, revoking them first where the server offers revocation (RFC 7009).
        Returns ``{"id","revocation"}`` (``revoked``, ``refused by the server``, ``not offered by the
        server``, ``no tokens``); its state becomes ``error: sign in again``."""
        from palui.connectors.mcp import config_from_row
        from palui.connectors.mcp.oauth.revoke import revoke_and_forget

        row = self._http_row(cid)
        live = self.hub.forget(cid)
        if live is not None:
            await live.close()
        outcome = await revoke_and_forget(self.settings.secrets_dir, cid, config_from_row(self.hub.env, row).url or "")
        with self.db.write() as c:
            c.execute("UPDATE connectors SET state = 'error: sign in again' WHERE id = ?", (cid,))
        return {"id": cid, "revocation": outcome}

    # -- the web sheet's "Sign in" ----------------------------------------------------------------------

    async def start_web(self, cid: str, callback_url: str) -> str | None:
        """Start signing in to ``cid`` from the web page, whose ``/oauth/callback`` is ``callback_url``.
        Returns the authorization URL to send the browser to, or None when the connection succeeded
        without the person (a refresh did it). Raises ConnectorError (the connection failed first)."""
        import asyncio

        from palui.connectors.mcp.oauth.signin import WebSignIn

        self._http_row(cid)
        handler = WebSignIn(callback_url)
        task = asyncio.ensure_future(self._sign_in(cid, handler=handler))
        waits: set[asyncio.Future[Any]] = {task, handler.authorization_url}
        done, _ = await asyncio.wait(waits, timeout=WEB_SIGN_IN_WAIT, return_when=asyncio.FIRST_COMPLETED)
        if handler.authorization_url.done():
            self._web_sign_ins = {s: v for s, v in self._web_sign_ins.items() if not v[1].done()}
            self._web_sign_ins[handler.state or ""] = (handler, task)
            return handler.authorization_url.result()
        if task in done:
            task.result()  # raises ConnectorError
            return None
        task.cancel()
        raise ConnectorError(f"{cid}: the server did not start a sign-in within {WEB_SIGN_IN_WAIT:.0f} s")

    async def complete_web(self, callback_url: str) -> dict[str, Any]:
        """The browser came back to ``/oauth/callback`` at ``callback_url``: hand it to the sign-in whose
        ``state`` it carries and wait for it to finish. Returns :meth:`login_async`'s shape.
        Raises NotFound (no sign-in of this page has that state: never started here, finished, or
        expired), ConnectorError (the sign-in failed)."""
        import asyncio
        from urllib.parse import parse_qs, urlsplit

        state = (parse_qs(urlsplit(callback_url).query).get("state") or [""])[0]
        found = next(((h, t) for h, t in self._web_sign_ins.values() if h.matches(state) and not t.done()), None)
        if found is None:
            raise NotFound("this sign-in was not started by this page, or it finished or expired; start it again")
        handler, task = found
        handler.complete(callback_url)
        try:
            return await asyncio.wait_for(asyncio.shield(task), WEB_SIGN_IN_WAIT)
        finally:
            self._web_sign_ins.pop(handler.state or "", None)
