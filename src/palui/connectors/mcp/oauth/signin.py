"""How the authorization redirect reaches Palui: the SDK's ``redirect_handler``/``callback_handler`` pairs.

- :class:`NoInteraction` — inside a turn or a job nobody waits for a browser: it raises
  :class:`SignInRequired` at once (the connector goes to ``error: sign in again``).
- :class:`LoopbackSignIn` — ``palui connectors add|login``: a one-shot listener on 127.0.0.1 takes
  the one request with the right ``state`` (RFC 8252 §7.3; others get 400), within 5 minutes, on the
  connector's port of last time (its registration lists that redirect URI) or the one a client fixes.
  Its page answers once the sign-in was checked. The front end shows or opens the authorization URL
  (:class:`palui.types.SignIn`); when it can also read a pasted redirect URL (a machine without a
  browser), whichever arrives first is used.
- :class:`WebSignIn` — the web sheet's "Sign in": the page redirects the browser to the URL, and
  ``/oauth/callback`` hands the code back (:meth:`WebSignIn.complete`, after the page checked the
  session cookie and this sign-in's ``state``).
- :class:`HeadlessSignIn` — fetches the authorization URL itself and reads the redirect: only for
  authorization servers that consent at once (the tests' server, the conformance suite).

The SDK checks the returned ``state`` (constant time) and ``iss`` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult

from palui.connectors.mcp.oauth.redact import SignInRequired
from palui.connectors.mcp.oauth.storage import OAuthFiles
from palui.text.secret_compare import same_secret
from palui.types import SignIn

CALLBACK_PATH = "/oauth/callback"
SIGN_IN_SECONDS = 300.0
VERDICT_SECONDS = 60.0  # the loopback page waits this long for the check and the code exchange


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def parse_redirect(url: str) -> AuthorizationCodeResult:
    """The ``code``/``state``/``iss`` of a redirect URL (as the browser's address bar shows it).

    Raises SignInRequired for an error answer (``error=access_denied``) or a URL without a code.
    """
    query = parse_qs(urlsplit(url.strip()).query)
    error = _first(query, "error")
    if error is not None:
        raise SignInRequired(f"the authorization server refused the sign-in ({error[:64]})")
    code = _first(query, "code")
    if code is None:
        raise SignInRequired("the address pasted has no authorization code")
    return AuthorizationCodeResult(code=code, state=_first(query, "state"), iss=_first(query, "iss"))


class NoInteraction:
    """For turns and jobs: never a sign-in (the provider normally raises before reaching this)."""

    redirect_uri = f"http://127.0.0.1{CALLBACK_PATH}"
    interactive = False

    async def redirect_handler(self, authorization_url: str) -> None:
        raise SignInRequired("sign in again")

    async def callback_handler(self) -> AuthorizationCodeResult:
        raise SignInRequired("sign in again")


class LoopbackSignIn:
    """A loopback listener (and a pasted address, when the front end can read one). Use as an async
    context manager before the connection starts, so that :attr:`redirect_uri` has its port.

    Args:
        ui: the front end's part (show the URL, read a pasted address).
        port: the port to listen on (the connector's last one, so that its registration still lists
            the redirect URI); when taken, any free port (a new registration follows, spec §7.9).
        fixed: a redirect URI the client fixes (``--redirect-uri`` of a client the person registered):
            exactly its port and path, or :class:`SignInRequired` saying the port is taken.

    The page the browser lands on speaks only once the answer was checked (``state`` here; ``iss`` and
    the code exchange by the provider, which calls :meth:`settle`).
    """

    interactive = True

    def __init__(self, ui: SignIn, port: int = 0, fixed: str | None = None) -> None:
        self.ui = ui
        self.timeout = ui.timeout or SIGN_IN_SECONDS
        self.fixed = fixed
        fixed_parts = urlsplit(fixed) if fixed else None
        self._port = (fixed_parts.port or 80) if fixed_parts else port
        self._path = (fixed_parts.path or "/") if fixed_parts else CALLBACK_PATH
        self._server: asyncio.Server | None = None
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self._verdict: asyncio.Future[str | None] | None = None
        self.rejected = 0

    @property
    def redirect_uri(self) -> str:
        return self.fixed or f"http://127.0.0.1:{self._port}{CALLBACK_PATH}"

    @property
    def port(self) -> int:
        return self._port

    async def __aenter__(self) -> LoopbackSignIn:
        host = (urlsplit(self.fixed).hostname or "127.0.0.1") if self.fixed else "127.0.0.1"
        try:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1" if host == "localhost" else host,
                                                      self._port)
        except OSError:
            if self.fixed:
                raise SignInRequired(f"the redirect URI {self.fixed} that this client fixes needs port {self._port} "
                                     "on this machine, and it is taken: free it, then sign in again") from None
            # the port of the last sign-in is taken: any free one (its registration is then made again)
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self._port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._verdict is not None and not self._verdict.done():
            self._verdict.set_result("the sign-in did not finish")
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def redirect_handler(self, authorization_url: str) -> None:
        self._state = _first(parse_qs(urlsplit(authorization_url).query), "state")
        loop = asyncio.get_running_loop()
        self._result = loop.create_future()
        self._verdict = loop.create_future()
        await self.ui.show(authorization_url)

    def settle(self, error: str | None) -> None:
        """The provider checked the answer and exchanged the code: None (signed in) or why it was refused."""
        if self._verdict is not None and not self._verdict.done():
            self._verdict.set_result(error)

    async def callback_handler(self) -> AuthorizationCodeResult:
        if self._result is None:
            raise OAuthFlowError("no authorization request was started")
        waits: list[asyncio.Future[Any]] = [self._result]
        pasted: asyncio.Task[str] | None = None
        if self.ui.paste is not None:
            pasted = asyncio.ensure_future(self.ui.paste())
            waits.append(pasted)
        try:
            done, _ = await asyncio.wait(waits, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if pasted is not None and not pasted.done():
                pasted.cancel()
        if not done:
            raise SignInRequired(f"no sign-in within {self.timeout:.0f} s")
        if self._result in done:
            return self._result.result()
        assert pasted is not None
        return parse_redirect(pasted.result())

    async def _verdict_text(self) -> str:
        if self._verdict is None:
            return "Signed in. You can close this page and go back to Palui."
        try:
            error = await asyncio.wait_for(asyncio.shield(self._verdict), VERDICT_SECONDS)
        except TimeoutError:
            return "Palui is still checking the sign-in: look at the terminal."
        if error is None:
            return "Signed in. You can close this page and go back to Palui."
        return f"The sign-in was refused: {error}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            parts = urlsplit(target)
            state = _first(parse_qs(parts.query), "state")
            ok = (method == "GET" and parts.path == self._path and self._result is not None
                  and not self._result.done() and self._state is not None and state is not None
                  and same_secret(state, self._state))
            if ok:
                assert self._result is not None
                try:
                    self._result.set_result(parse_redirect(f"http://127.0.0.1{target}"))
                    body, status = await self._verdict_text(), "200 OK"
                except SignInRequired as e:
                    self._result.set_exception(e)
                    body, status = f"The sign-in was refused: {e}", "200 OK"
            else:
                self.rejected += 1
                body, status = "Not the sign-in Palui waits for.", "400 Bad Request"
            payload = f"<!doctype html><title>Palui</title><p>{html.escape(body)}</p>".encode()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: "
                         f"{len(payload)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n".encode() + payload)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError, OSError):
            pass
        finally:
            writer.close()


def loopback_with_port(uris: list[str]) -> str | None:
    """The first loopback ``http://127.0.0.1:PORT/…`` (or ``localhost``) redirect URI with a port in ``uris``."""
    for uri in uris:
        try:
            parts = urlsplit(uri)
            port = parts.port
        except ValueError:
            continue
        if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost") and port:
            return uri
    return None


def fixed_redirect(files: OAuthFiles, connector_id: str) -> str | None:
    """The loopback redirect URI a client the person registered fixes (``--redirect-uri``: one with a
    port), or None (any port will do: the connector's port of last time is tried first)."""
    pre = files.pre_registered(connector_id)
    return loopback_with_port([str(u) for u in (pre.redirect_uris or [])] if pre is not None else [])


async def metadata_document_redirect(url: str) -> str | None:
    """The loopback redirect URI with a port that the Client ID Metadata Document at ``url`` lists (the
    authorization server checks the redirect URI against the document), or None: it lists none, or it
    could not be read (the sign-in then listens on the port of last time). Fetched like every sign-in
    connection, checked at connect time (:mod:`.netcheck`)."""
    from palui.connectors.mcp.oauth.netcheck import checked_transport

    try:
        async with httpx2.AsyncClient(transport=checked_transport(url), timeout=10.0, follow_redirects=False) as http:
            response = await http.get(url, headers={"Accept": "application/json"})
        document = response.json() if response.status_code == 200 else {}
    except (httpx2.HTTPError, ValueError):
        return None
    uris = document.get("redirect_uris") if isinstance(document, dict) else None
    return loopback_with_port([u for u in uris if isinstance(u, str)] if isinstance(uris, list) else [])


@contextlib.asynccontextmanager
async def loopback_sign_in(files: OAuthFiles, connector_id: str, ui: SignIn,
                           client_metadata_url: str | None = None) -> AsyncIterator[LoopbackSignIn]:
    """The :class:`LoopbackSignIn` of ``connector_id``: on the redirect URI its client fixes (a client the
    person registered, else the Client ID Metadata Document ``client_metadata_url``), else on the port of
    its last sign-in (remembered for the next one, so that its registration still fits)."""
    fixed = fixed_redirect(files, connector_id)
    if fixed is None and client_metadata_url and files.pre_registered(connector_id) is None:
        fixed = await metadata_document_redirect(client_metadata_url)
    async with LoopbackSignIn(ui, port=files.loopback_port(connector_id), fixed=fixed) as handler:
        if fixed is None:
            files.save_loopback_port(connector_id, handler.port)
        yield handler


class WebSignIn:
    """The web sheet's sign-in: ``authorization_url`` resolves once the SDK built it; :meth:`complete`
    takes the query of ``/oauth/callback``."""

    interactive = True

    def __init__(self, redirect_uri: str, timeout: float = SIGN_IN_SECONDS) -> None:
        self.redirect_uri = redirect_uri
        self.timeout = timeout
        self.state: str | None = None
        self.authorization_url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._code: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()

    async def redirect_handler(self, authorization_url: str) -> None:
        self.state = _first(parse_qs(urlsplit(authorization_url).query), "state")
        if not self.authorization_url.done():
            self.authorization_url.set_result(authorization_url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        try:
            return await asyncio.wait_for(asyncio.shield(self._code), self.timeout)
        except TimeoutError:
            raise SignInRequired(f"no sign-in within {self.timeout:.0f} s") from None

    def matches(self, state: str | None) -> bool:
        return bool(state and self.state and same_secret(state, self.state))

    def complete(self, query_url: str) -> None:
        """Hand the callback's address to the waiting flow (the caller checked :meth:`matches`)."""
        if self._code.done():
            return
        try:
            self._code.set_result(parse_redirect(query_url))
        except SignInRequired as e:
            self._code.set_exception(e)


class HeadlessSignIn:
    """Follows the authorization URL itself and reads the redirect's ``Location`` (auto-consent servers only)."""

    interactive = True
    redirect_uri = "http://localhost:3000/callback"

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._location: str | None = None
        self.authorizations = 0

    async def redirect_handler(self, authorization_url: str) -> None:
        self.authorizations += 1
        async with httpx2.AsyncClient(follow_redirects=False, timeout=self.timeout) as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise SignInRequired(f"the authorization endpoint answered HTTP {response.status_code}, not a redirect")
        self._location = location

    async def callback_handler(self) -> AuthorizationCodeResult:
        if self._location is None:
            raise SignInRequired("no authorization answer")
        location, self._location = self._location, None
        return parse_redirect(location)
