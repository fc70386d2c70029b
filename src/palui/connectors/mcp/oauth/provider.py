"""The SDK's OAuth client (``mcp.client.auth.OAuthClientProvider``) with what Palui adds around it.

The SDK does protected-resource and authorization-server discovery (RFC 9728, RFC 8414), PKCE S256,
``resource`` (RFC 8707), dynamic registration (RFC 7591), Client ID Metadata Documents, the ``iss``
check (RFC 9207), scope step-up on ``403 insufficient_scope`` and dropping credentials when the
issuer changes. :class:`PaluiOAuthProvider` adds, each because the SDK alone asks the person to sign
in again where a refresh would do, or shares what it should not (spec §7.9):

1. **Refresh ahead of expiry.** The SDK refreshes only once the lifetime is over; Palui refreshes
   when less than :func:`refresh_margin` is left: min(max(60 s, 10 % of the lifetime), 50 % of the
   lifetime) (the cap keeps a token of 60 s or less from being refreshed on every request).
2. **Stored tokens keep their expiry.** The SDK loads tokens without one (= never expires).
3. **The discovered metadata is stored** with the tokens and restored, so a new process refreshes
   at the authorization server's token endpoint, not at ``{MCP origin}/token``.
4. **A 401 to a token Palui holds is answered with one refresh and a resend** before the SDK's
   interactive flow sees it (a token revoked early, a restarted resource server).
5. **Refresh errors are split.** Only ``invalid_grant``, ``invalid_client`` and
   ``unauthorized_client`` end the grant: the tokens are deleted and a sign-in is needed. Anything
   else (a 5xx, no connection, another error) is an outage: the tokens are kept, the access token is
   used while it lasts, and the refresh is tried again after a back-off (1 s, 2 s, 4 s… 60 s); once
   the access token is gone, :class:`RefreshUnavailable` is raised. The SDK clears the tokens on any
   failed refresh.
6. **One refresh at a time, across processes.** A refresh holds the connector's lock file and reads
   the token file again first: a token another process refreshed meanwhile is taken, not refreshed
   again (with rotating refresh tokens the second refresh would be refused).
7. **Registrations per issuer, used only for the redirect URI they list.** Once discovery names the
   issuer, a registration another connector made there is used if it lists this sign-in's redirect
   URI exactly; otherwise (another loopback port) the SDK registers again. A client the person
   registered (``--client-id``) or a Client ID Metadata Document is used as it is. An issuer change
   drops this connector's stored tokens too, not only the SDK's copy.
8. **Nobody waits for a browser in a turn.** Without a person (``interactive=False``) a 401 or a
   step-up that a refresh cannot answer raises :class:`SignInRequired` at once, before any
   discovery or registration request, and ``on_sign_in_needed`` is told.
9. **The callback page speaks after the check**: the sign-in handler is told (``on_result``) once the
   answer's ``state``/``iss`` were checked and the code exchanged, or why that failed.

Private SDK API used (mcp pinned to 2.3.0; the tests catch a change): ``OAuthContext`` fields and
``update_token_expiry``, ``OAuthClientProvider._initialize``, ``_initialized``, ``_auth_flow``,
``_refresh_token``, ``_handle_refresh_response``, ``_handle_token_response``,
``_perform_authorization_code_grant`` and ``_add_auth_header``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth, issuers_match
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from palui.connectors.mcp.oauth.redact import (
    GRANT_ENDED,
    RefreshUnavailable,
    SignInRequired,
    describe_oauth_error,
    oauth_error_code,
)
from palui.connectors.mcp.oauth.step_up import StepUp, called_tool, issuer_moved, read_metadata, scopes, union
from palui.connectors.mcp.oauth.step_up import step_up as step_up_of
from palui.connectors.mcp.oauth.storage import ConnectorTokenStorage, Discovery, StoredTokens, redirect_allowed

MAX_RETRY_SECONDS = 60.0


def refresh_margin(lifetime: float) -> float:
    """Seconds before expiry at which a token of ``lifetime`` seconds is refreshed (spec §7.9):
    ``min(max(60, 0.1 * lifetime), 0.5 * lifetime)``."""
    return min(max(60.0, 0.1 * lifetime), 0.5 * lifetime)


def retry_seconds(failures: int) -> float:
    """Wait before the next refresh after ``failures`` failed ones in a row: 1 s, 2 s, 4 s… 60 s."""
    return min(2.0 ** max(failures - 1, 0), MAX_RETRY_SECONDS)


class _Context(OAuthContext):
    """``OAuthContext`` whose expiry starts :func:`refresh_margin` early, whose token stays valid until
    its real expiry while a refresh waits out an outage, whose ``client_info`` finds a registration of
    the discovered issuer that lists this sign-in's redirect URI, and which tells the provider when the
    SDK drops the credentials because the issuer changed (the only place the SDK sets ``client_info``
    to None)."""

    palui_storage: ConnectorTokenStorage | None = None
    palui_redirect_uri: str = ""
    palui_loading = False
    palui_authorizing = False  # a full sign-in runs: the client must allow this redirect URI exactly
    palui_expires_at: float | None = None  # the access token's real expiry (epoch s)
    palui_retry_at = 0.0  # no refresh before this (epoch s) after an outage

    def update_token_expiry(self, token: OAuthToken) -> None:
        if token.expires_in is None:
            self.token_expiry_time = self.palui_expires_at = None
            return
        lifetime = float(token.expires_in)
        self.palui_expires_at = time.time() + lifetime
        self.token_expiry_time = self.palui_expires_at - refresh_margin(lifetime)

    def is_token_valid(self) -> bool:
        if super().is_token_valid():
            return True
        now = time.time()  # waiting out an outage: the access token serves until it really expires
        return bool(self.current_tokens and self.palui_expires_at is not None and now < self.palui_expires_at
                    and now < self.palui_retry_at)

    def _fixed_client(self, info: OAuthClientInformationFull) -> bool:
        """A client whose redirect URIs the person fixed: pre-registered, or a Client ID Metadata Document."""
        if self.client_metadata_url is not None and info.client_id == self.client_metadata_url:
            return True
        storage = self.palui_storage
        pre = storage.files.pre_registered(storage.connector_id) if storage is not None else None
        return pre is not None and pre.client_id == info.client_id

    @property
    def client_info(self) -> OAuthClientInformationFull | None:
        own: OAuthClientInformationFull | None = self.__dict__.get("_palui_client_info")
        if own is None and self.oauth_metadata is not None and self.palui_storage is not None:
            own = self.palui_storage.shared_registration(str(self.oauth_metadata.issuer), self.palui_redirect_uri)
            if own is not None:
                self.__dict__["_palui_client_info"] = own
        if (own is not None and self.palui_authorizing and not self._fixed_client(own)
                and not redirect_allowed(own, self.palui_redirect_uri)):
            # Registered for another redirect URI (another loopback port): an authorization server that
            # compares exactly would refuse it, so the SDK registers again (its tokens stay until then).
            found = (self.palui_storage.shared_registration(str(self.oauth_metadata.issuer), self.palui_redirect_uri)
                     if self.oauth_metadata is not None and self.palui_storage is not None else None)
            if found is None:
                return None
            self.__dict__["_palui_client_info"] = own = found
        return own

    @client_info.setter
    def client_info(self, value: OAuthClientInformationFull | None) -> None:
        old = self.__dict__.get("_palui_client_info")
        self.__dict__["_palui_client_info"] = value
        if value is None and old is not None and not self.palui_loading and self.palui_storage is not None:
            self.palui_storage.drop_tokens()  # SEP-2352: another issuer now; its tokens are not ours to send


class PaluiOAuthProvider(OAuthClientProvider):
    """``OAuthClientProvider`` for one connector (see the module docstring).

    Args:
        server_url: the MCP endpoint.
        client_metadata: what dynamic registration sends; ``redirect_uris[0]`` is this sign-in's.
        storage: the connector's :class:`ConnectorTokenStorage`.
        redirect_handler / callback_handler: the SDK's pair (a :mod:`.signin` handler).
        client_metadata_url: ``mcp.oauth.client_metadata_url`` (CIMD), None for dynamic registration.
        interactive: a person takes part (``palui connectors add|login``, the web sheet's "Sign in").
        on_sign_in_needed: called with the reason when a sign-in is needed and nobody can do it.
        http: makes the HTTP client of a refresh (the checked transport of :mod:`.netcheck`).
        on_refresh_unavailable: called with the reason when a refresh met an outage the held token
            cannot outlast.
        on_result: told once the authorization answer was checked and exchanged: None (signed in)
            or why it was refused (the loopback page says it).
        on_step_up: without a person, told of a ``tools/call`` refused with ``403 insufficient_scope``; the
            403 then goes to that call alone (spec §7.11). None: such a 403 needs a sign-in, as a 401.
        wanted_scopes: with a person, scopes the sign-in asks for besides the granted and challenged ones
            (the pending step-ups), each only if the protected-resource metadata lists it.
    """

    def __init__(self, server_url: str, client_metadata: OAuthClientMetadata, storage: ConnectorTokenStorage, *,
                 redirect_handler: Callable[[str], Awaitable[None]],
                 callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
                 client_metadata_url: str | None = None, interactive: bool = False,
                 on_sign_in_needed: Callable[[str], None] | None = None,
                 http: Callable[[], httpx2.AsyncClient] | None = None,
                 on_refresh_unavailable: Callable[[str], None] | None = None,
                 on_result: Callable[[str | None], None] | None = None,
                 on_step_up: Callable[[StepUp], None] | None = None, wanted_scopes: tuple[str, ...] = ()) -> None:
        super().__init__(server_url, client_metadata, storage, redirect_handler=redirect_handler,
                         callback_handler=callback_handler, client_metadata_url=client_metadata_url)
        old = self.context
        ctx = _Context(server_url=old.server_url, client_metadata=old.client_metadata, storage=old.storage,
                       redirect_handler=old.redirect_handler, callback_handler=old.callback_handler,
                       client_metadata_url=old.client_metadata_url)
        ctx.palui_storage = storage
        uris = client_metadata.redirect_uris
        ctx.palui_redirect_uri = str(uris[0]) if uris else ""
        self.context = ctx
        self.palui_storage = storage
        self.interactive = interactive
        self.on_sign_in_needed = on_sign_in_needed
        self.on_refresh_unavailable = on_refresh_unavailable
        self.on_result = on_result
        self._http = http or (lambda: httpx2.AsyncClient(timeout=30.0, follow_redirects=False))
        self._palui_lock = anyio.Lock()
        self._refresh_failures = 0
        self.issuer_changed: str | None = None  # why the held tokens were dropped before a refresh
        self.on_step_up = on_step_up
        self.wanted_scopes = wanted_scopes
        self._granted_before: tuple[str, ...] = ()  # the scopes held when a sign-in for wanted ones began
        self._widening = False  # a sign-in for the wanted scopes was started (once per connection)

    @property
    def _ctx(self) -> _Context:
        assert isinstance(self.context, _Context)
        return self.context

    def _need_sign_in(self, why: str) -> SignInRequired:
        if self.on_sign_in_needed is not None:
            self.on_sign_in_needed(why)
        return SignInRequired(why)

    # -- the flow -----------------------------------------------------------------------------------------

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        async with self._palui_lock:  # before the SDK's flow: it then finds a token it need not refresh
            if not self._initialized:
                await self._initialize()
            ctx = self._ctx
            if self.interactive and self.wanted_scopes and ctx.current_tokens is not None and not self._widening:
                held = scopes(ctx.current_tokens.scope)
                if not set(self.wanted_scopes) <= set(held):
                    # spec §7.11: a sign-in for the union, even though the held token still works; the stored
                    # tokens stay until the new ones arrive
                    self._granted_before, self._widening = held, True
                    ctx.current_tokens = None
            if ctx.current_tokens is not None and ctx.can_refresh_token() and not ctx.is_token_valid():
                await self._refresh_locked(force=False)
        inner = super()._auth_flow(request)
        refreshed = False
        try:
            outgoing = await inner.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and response.status_code in (401, 403):
                    sent_token = request.headers.get("authorization", "").lower().startswith("bearer ")
                    if response.status_code == 401 and sent_token and not refreshed:
                        refreshed = True
                        async with self._palui_lock:
                            renewed = await self._refresh_locked(force=True)
                        if renewed:
                            self._add_auth_header(request)
                            response = yield request
                    step_up = (response.status_code == 403
                               and extract_field_from_www_auth(response, "error") == "insufficient_scope")
                    tool = called_tool(request) if step_up and not self.interactive else None
                    if tool is not None and self.on_step_up is not None:
                        # spec §7.11: only this call needs more; the 403 goes to it, the person is asked
                        prm = self.context.protected_resource_metadata or await read_metadata(
                            self._http, self.context.server_url)
                        granted = self._ctx.current_tokens.scope if self._ctx.current_tokens else None
                        self.on_step_up(step_up_of(tool, extract_scope_from_www_auth(response), granted,
                                                   prm.scopes_supported if prm is not None else None))
                        return
                    if response.status_code == 401 or step_up:
                        if not self.interactive:
                            raise self._need_sign_in("the server needs more permissions: sign in again" if step_up
                                                     else self.issuer_changed or "sign in again")
                        self._ctx.palui_authorizing = True
                outgoing = await inner.asend(response)
        except StopAsyncIteration:
            return
        finally:
            self._ctx.palui_authorizing = False
            await inner.aclose()

    # -- refreshing ---------------------------------------------------------------------------------------

    def _adopt(self, fresh: StoredTokens) -> None:
        """Take tokens another process stored (a refresh or a sign-in of its own)."""
        ctx = self._ctx
        token = fresh.token
        if fresh.expires_at is not None:
            token = token.model_copy(update={"expires_in": max(0, int(fresh.expires_at - time.time()))})
        ctx.current_tokens = token
        ctx.palui_expires_at = fresh.expires_at
        ctx.token_expiry_time = (fresh.expires_at - refresh_margin(fresh.lifetime)
                                 if fresh.expires_at is not None and fresh.lifetime is not None else None)
        ctx.palui_retry_at = 0.0
        info = ctx.client_info
        if fresh.client_id and (info is None or info.client_id != fresh.client_id):
            found = self.palui_storage.files.pre_registered(self.palui_storage.connector_id)
            if found is None or found.client_id != fresh.client_id:
                found = self.palui_storage.files.registration(fresh.issuer or "", fresh.client_id)
            ctx.palui_loading = True
            try:
                ctx.client_info = found
            finally:
                ctx.palui_loading = False

    async def _refresh_locked(self, force: bool) -> bool:
        """Refresh (the caller holds ``_palui_lock``). True when a usable token is held afterwards (refreshed,
        taken from another process, or the held one while an outage is waited out); False when the grant
        ended or there is nothing to refresh (a sign-in is needed). ``force``: the held access token was
        refused. Raises RefreshUnavailable (an outage, and no usable token)."""
        ctx = self._ctx
        held = ctx.current_tokens
        async with self.palui_storage.refresh_lock():
            fresh = self.palui_storage.reload()
            if fresh is None:  # signed out, or the grant ended, in another process
                ctx.clear_tokens()
                return False
            if held is None or fresh.token.access_token != held.access_token:
                self._adopt(fresh)
                if ctx.is_token_valid():
                    return True
            if not ctx.can_refresh_token():
                return False
            moved = issuer_moved(await read_metadata(self._http, self.context.server_url), fresh.issuer)
            if moved is not None:  # spec §7.9: no refresh goes to an issuer the server no longer names
                self._grant_ended()
                self.issuer_changed = (f"the server now uses another authorization server ({moved}): sign in "
                                       "again")
                return False
            self._note_issuer()
            request = await self._refresh_token()
            try:
                async with self._http() as http:
                    response = await http.send(request)
            except httpx2.HTTPError as e:
                return self._outage(f"the token endpoint could not be reached ({type(e).__name__})", force)
            code = oauth_error_code(response.content) if response.status_code != 200 else None
            if response.status_code == 200:
                if await OAuthClientProvider._handle_refresh_response(self, response):
                    self._refresh_failures = 0
                    ctx.palui_retry_at = 0.0
                    self._save_discovery()
                    return True
                return self._outage("the token endpoint's answer could not be used", force)
            if code in GRANT_ENDED:
                self._grant_ended()
                return False
            return self._outage(f"the token endpoint answered HTTP {response.status_code}"
                                + (f", {code}" if code else ""), force)

    def _grant_ended(self) -> None:
        """The refresh was refused for good: the tokens are deleted (``connectors show``: not signed in)."""
        self._ctx.clear_tokens()
        self._ctx.palui_expires_at = None
        self.palui_storage.drop_tokens()

    def _outage(self, why: str, force: bool) -> bool:
        self._refresh_failures += 1
        wait = retry_seconds(self._refresh_failures)
        ctx = self._ctx
        ctx.palui_retry_at = time.time() + wait
        if not force and ctx.is_token_valid():
            return True
        message = (f"could not refresh its sign-in: {why}; the tokens are kept and Palui tries again"
                   f" (next in {wait:.0f} s)")
        if self.on_refresh_unavailable is not None:
            self.on_refresh_unavailable(message)
        raise RefreshUnavailable(message)

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        # Only reached if the SDK refreshes by itself (Palui refreshes before its flow runs): the same split.
        self._note_issuer()
        if response.status_code == 200:
            ok: bool = await super()._handle_refresh_response(response)
            if ok:
                self._save_discovery()
            return ok
        if oauth_error_code(await response.aread()) in GRANT_ENDED:
            self._grant_ended()
            return False
        return self._outage(f"the token endpoint answered HTTP {response.status_code}", True)

    # -- the SDK's steps, noted -----------------------------------------------------------------------------

    async def _initialize(self) -> None:
        ctx = self._ctx
        ctx.palui_loading = True
        try:
            await super()._initialize()
        finally:
            ctx.palui_loading = False
        found: Discovery | None = self.palui_storage.discovery
        if found is not None and ctx.oauth_metadata is None:
            ctx.auth_server_url = found.auth_server_url
            ctx.oauth_metadata = found.oauth_metadata
            ctx.protected_resource_metadata = found.protected_resource_metadata
        stored = self.palui_storage.stored
        if stored is not None and stored.expires_at is not None and stored.lifetime is not None:
            ctx.palui_expires_at = stored.expires_at
            ctx.token_expiry_time = stored.expires_at - refresh_margin(stored.lifetime)

    def _select_authorization_server(self, advertised: list[str]) -> str:
        chosen = super()._select_authorization_server(advertised)
        stored = self.palui_storage.stored
        if stored is not None and stored.issuer and not issuers_match(stored.issuer, chosen):
            # SEP-2352 for Palui's files too, also when the SDK skips its own check (a client of
            # another redirect URI is not offered to it during a sign-in).
            self.palui_storage.drop_tokens()
        return chosen

    def _note_issuer(self) -> None:
        meta = self.context.oauth_metadata
        self.palui_storage.issuer_now = str(meta.issuer) if meta is not None else self.context.auth_server_url
        info = self.context.client_info
        self.palui_storage.client_id_now = info.client_id if info is not None else None

    def _settle(self, error: str | None) -> None:
        if self.on_result is not None:
            self.on_result(error)

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        if self.wanted_scopes:
            # spec §7.11: the union of what was granted, what the server challenges and the pending step-ups,
            # never a scope the protected-resource metadata does not list
            prm = self.context.protected_resource_metadata
            listed = set(prm.scopes_supported or ()) if prm is not None else set()
            metadata = self.context.client_metadata
            held = self._granted_before or scopes(self.context.current_tokens.scope if self.context.current_tokens
                                                  else None)
            asked = union(scopes(metadata.scope), held, [s for s in self.wanted_scopes if s in listed])
            metadata.scope = " ".join(asked) or None
        try:
            return await super()._perform_authorization_code_grant()
        except Exception as e:  # the state or iss check refused the answer: the page says so
            self._settle(describe_oauth_error(e))
            raise

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        self._note_issuer()
        try:
            await super()._handle_token_response(response)
        except Exception as e:
            self._settle(describe_oauth_error(e))
            raise
        self._save_discovery()
        self._settle(None)

    def _save_discovery(self) -> None:
        if self.context.oauth_metadata is not None:
            self.palui_storage.set_discovery(Discovery(self.context.auth_server_url, self.context.oauth_metadata,
                                                       self.context.protected_resource_metadata))
