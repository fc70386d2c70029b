"""The SDK's OAuth client (``mcp.client.auth.OAuthClientProvider``) with what Palui adds around it.

The SDK does protected-resource and authorization-server discovery (RFC 9728, RFC 8414), PKCE S256,
``resource`` (RFC 8707), dynamic registration (RFC 7591), Client ID Metadata Documents, the ``iss``
check (RFC 9207), scope step-up on ``403 insufficient_scope`` and dropping credentials when the
issuer changes. :class:`PaluiOAuthProvider` adds, each because the SDK alone asks the person to sign
in again where a refresh would do, or shares what it should not:

1. **Refresh ahead of expiry.** The SDK refreshes only once the lifetime is over; Palui refreshes
   when less than :func:`refresh_margin` is left: min(max(60 s, 10 % of the lifetime), 50 % of the
   lifetime) (the cap keeps a token of 60 s or less from being refreshed on every request).
2. **Stored tokens keep their expiry.** The SDK loads tokens without one (= never expires).
3. **The discovered metadata is stored** with the tokens and restored, so a new process refreshes
   at the authorization server's token endpoint, not at ``{MCP origin}/token``.
4. **A 401 to a token Palui holds is answered with one refresh and a resend** before the SDK's
   interactive flow sees it (a token revoked early, a restarted resource server).
5. **Registrations per issuer.** Once discovery names the issuer, a registration another connector
   made there (with this redirect URI) is used instead of registering again; an issuer change drops
   this connector's stored tokens too, not only the SDK's copy.
6. **Nobody waits for a browser in a turn.** Without a person (``interactive=False``) a 401 or a
   step-up that a refresh cannot answer raises :class:`SignInRequired` at once, before any
   discovery or registration request, and ``on_sign_in_needed`` is told.

Private SDK API used (mcp pinned to 2.3.0; the tests catch a change): ``OAuthContext`` fields and
``update_token_expiry``, ``OAuthClientProvider._initialize``, ``_auth_flow``, ``_refresh_token``,
``_handle_refresh_response``, ``_handle_token_response`` and ``_add_auth_header``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from palui.connectors.mcp.oauth.redact import SignInRequired
from palui.connectors.mcp.oauth.storage import ConnectorTokenStorage, Discovery


def refresh_margin(lifetime: float) -> float:
    """Seconds before expiry at which a token of ``lifetime`` seconds is refreshed (spec §7.9):
    ``min(max(60, 0.1 * lifetime), 0.5 * lifetime)``."""
    return min(max(60.0, 0.1 * lifetime), 0.5 * lifetime)


class _Context(OAuthContext):
    """``OAuthContext`` whose expiry starts :func:`refresh_margin` early, whose ``client_info`` finds a
    registration of the discovered issuer, and which tells the provider when the SDK drops the
    credentials because the issuer changed (the only place the SDK sets ``client_info`` to None)."""

    palui_storage: ConnectorTokenStorage | None = None
    palui_redirect_uri: str = ""
    palui_loading = False

    def update_token_expiry(self, token: OAuthToken) -> None:
        if token.expires_in is None:
            self.token_expiry_time = None
            return
        lifetime = float(token.expires_in)
        self.token_expiry_time = time.time() + lifetime - refresh_margin(lifetime)

    @property
    def client_info(self) -> OAuthClientInformationFull | None:
        own: OAuthClientInformationFull | None = self.__dict__.get("_palui_client_info")
        if own is None and self.oauth_metadata is not None and self.palui_storage is not None:
            own = self.palui_storage.shared_registration(str(self.oauth_metadata.issuer), self.palui_redirect_uri)
            if own is not None:
                self.__dict__["_palui_client_info"] = own
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
    """

    def __init__(self, server_url: str, client_metadata: OAuthClientMetadata, storage: ConnectorTokenStorage, *,
                 redirect_handler: Callable[[str], Awaitable[None]],
                 callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]],
                 client_metadata_url: str | None = None, interactive: bool = False,
                 on_sign_in_needed: Callable[[str], None] | None = None) -> None:
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

    def _need_sign_in(self, why: str) -> SignInRequired:
        if self.on_sign_in_needed is not None:
            self.on_sign_in_needed(why)
        return SignInRequired(why)

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        inner = super()._auth_flow(request)
        refreshed = False
        try:
            outgoing = await inner.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and response.status_code in (401, 403):
                    sent_token = request.headers.get("authorization", "").lower().startswith("bearer ")
                    if (response.status_code == 401 and sent_token and not refreshed
                            and self.context.can_refresh_token()):
                        refreshed = True
                        refresh_response = yield await self._refresh_token()
                        if await self._handle_refresh_response(refresh_response):
                            self._add_auth_header(request)
                            response = yield request
                    step_up = (response.status_code == 403
                               and extract_field_from_www_auth(response, "error") == "insufficient_scope")
                    if not self.interactive and (response.status_code == 401 or step_up):
                        raise self._need_sign_in("the server needs more permissions: sign in again" if step_up
                                                 else "sign in again")
                outgoing = await inner.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await inner.aclose()

    async def _initialize(self) -> None:
        ctx = self.context
        assert isinstance(ctx, _Context)
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
            ctx.token_expiry_time = stored.expires_at - refresh_margin(stored.lifetime)

    def _note_issuer(self) -> None:
        meta = self.context.oauth_metadata
        self.palui_storage.issuer_now = str(meta.issuer) if meta is not None else self.context.auth_server_url
        info = self.context.client_info
        self.palui_storage.client_id_now = info.client_id if info is not None else None

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        self._note_issuer()
        await super()._handle_token_response(response)
        self._save_discovery()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        self._note_issuer()
        ok: bool = await super()._handle_refresh_response(response)
        if ok:
            self._save_discovery()
        return ok

    def _save_discovery(self) -> None:
        if self.context.oauth_metadata is not None:
            self.palui_storage.set_discovery(Discovery(self.context.auth_server_url, self.context.oauth_metadata,
                                                       self.context.protected_resource_metadata))

    def tokens_now(self) -> dict[str, Any]:
        """For tests and ``connectors show``: when the held token expires and when it refreshes (epoch s)."""
        stored = self.palui_storage.stored
        return {"expires_at": stored.expires_at if stored else None, "refresh_at": self.context.token_expiry_time}
