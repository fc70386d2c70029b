"""OAuth 2.1 for remote (streamable HTTP) MCP servers, on the SDK's own client auth (spec §7.9).

- :mod:`.provider` — ``PaluiOAuthProvider``: the SDK's ``OAuthClientProvider`` plus what Palui adds
  (refresh ahead of expiry, stored expiry and discovery, refresh on 401, registrations per issuer,
  no browser inside a turn);
- :mod:`.storage` — the SDK's ``TokenStorage`` over per-item 0600 files under the secrets directory;
- :mod:`.signin` — the redirect handlers (none in a turn, loopback + pasted address, the web page,
  headless for tests);
- :mod:`.redact` — OAuth errors and log records without secrets; ``SignInRequired``, ``RefreshUnavailable``;
- :mod:`.revoke` — logout: RFC 7009 revocation where the server offers it;
- :mod:`.step_up` — a call refused for a scope (``403 insufficient_scope``), and the scopes a sign-in asks for;
- :mod:`.netcheck` — where the HTTP client may connect (checked at connect time: the server's own class
  of address, or public ones).

:class:`OAuthSetup` is what one connection needs; :meth:`OAuthSetup.provider` builds the ``httpx2.Auth``
the HTTP client carries. A connector configured with its own ``Authorization`` header gets none:
the person's static credentials are used as given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx2
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from palui.connectors.mcp.oauth.provider import PaluiOAuthProvider, refresh_margin
from palui.connectors.mcp.oauth.redact import (
    RefreshUnavailable,
    SignInRequired,
    describe_oauth_error,
    install_log_filter,
)
from palui.connectors.mcp.oauth.signin import CALLBACK_PATH, NoInteraction
from palui.connectors.mcp.oauth.step_up import StepUp
from palui.connectors.mcp.oauth.storage import ConnectorTokenStorage, OAuthFiles

__all__ = ["CALLBACK_PATH", "OAuthFiles", "OAuthSetup", "PaluiOAuthProvider", "RefreshUnavailable", "SignInHandler",
           "SignInRequired", "StepUp", "describe_oauth_error", "refresh_margin", "uses_oauth"]


class SignInHandler(Protocol):
    """A redirect handler pair of :mod:`.signin`."""

    redirect_uri: str
    interactive: bool

    async def redirect_handler(self, authorization_url: str) -> None: ...

    async def callback_handler(self) -> AuthorizationCodeResult: ...


def uses_oauth(headers: dict[str, str]) -> bool:
    """An HTTP connector gets OAuth unless the person gave it an ``Authorization`` header."""
    return not any(k.lower() == "authorization" for k in headers)


@dataclass
class OAuthSetup:
    """OAuth for one connection: the home's files, the connector, how a sign-in reaches Palui, and
    ``mcp.oauth.client_metadata_url`` (CIMD; None: dynamic registration). ``extra_redirect_uris`` are
    registered too (the web page's callback), so a registration serves both ways of signing in.
    ``wanted_scopes``: what a sign-in asks for besides the granted scopes (the pending step-ups, spec §7.11)."""

    secrets_dir: Path
    connector_id: str
    handler: SignInHandler = field(default_factory=NoInteraction)
    client_metadata_url: str | None = None
    extra_redirect_uris: tuple[str, ...] = ()
    wanted_scopes: tuple[str, ...] = ()

    def provider(self, server_url: str, on_sign_in_needed: Callable[[str], None] | None = None, *,
                 on_refused: Callable[[str], None] | None = None,
                 on_refresh_unavailable: Callable[[str], None] | None = None,
                 on_step_up: Callable[[StepUp], None] | None = None) -> PaluiOAuthProvider:
        """The ``httpx2.Auth`` of one connection to ``server_url``; the callbacks are told why a sign-in is
        needed, why a connection was refused (:mod:`.netcheck`), why a refresh could not be made, which call
        needs a wider scope (:mod:`.step_up`)."""
        install_log_filter()
        from palui.connectors.mcp.oauth.netcheck import checked_transport  # httpcore's backends: only when used

        def http() -> httpx2.AsyncClient:
            return httpx2.AsyncClient(transport=checked_transport(server_url, on_refused), timeout=30.0,
                                      follow_redirects=False)

        storage = ConnectorTokenStorage(OAuthFiles(self.secrets_dir), self.connector_id, server_url)
        uris: list[Any] = [self.handler.redirect_uri,
                           *[u for u in self.extra_redirect_uris if u != self.handler.redirect_uri]]
        metadata = OAuthClientMetadata(redirect_uris=uris, client_name="Palui",
                                       grant_types=["authorization_code", "refresh_token"], response_types=["code"])
        return PaluiOAuthProvider(server_url, metadata, storage, redirect_handler=self.handler.redirect_handler,
                                  callback_handler=self.handler.callback_handler,
                                  client_metadata_url=self.client_metadata_url,
                                  interactive=self.handler.interactive, on_sign_in_needed=on_sign_in_needed,
                                  http=http, on_refresh_unavailable=on_refresh_unavailable,
                                  on_result=getattr(self.handler, "settle", None), on_step_up=on_step_up,
                                  wanted_scopes=self.wanted_scopes if self.handler.interactive else ())
