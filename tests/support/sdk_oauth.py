"""An MCP server that is its own authorization server, both built from the ``mcp`` SDK's server auth.

Where ``support/oauth_server.py`` is a small authorization server of ours (which, as RFC 8252 §7.3
asks, lets a loopback redirect URI use any port), this one is the SDK's: ``MCPServer`` with an
``auth_server_provider`` mounts the SDK's ``/authorize``, ``/token``, ``/register`` and ``/revoke``
handlers (``mcp.server.auth.routes.create_auth_routes``) and its protected-resource metadata. The
SDK's ``/authorize`` compares the redirect URI with the registered ones **exactly**
(``OAuthClientInformationFull.validate_redirect_uri``): a redirect URI on another loopback port is
refused with HTTP 400 and no redirect, as many real authorization servers do.

The provider (:class:`MemoryProvider`) keeps everything in memory and consents at once; ``events``
records each request it handled (never a token). Use::

    with SDKOAuthServer() as srv:
        srv.mcp_url, srv.issuer, srv.provider.count("register")
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp_types import ToolAnnotations

from support.oauth_server import _listen


@dataclass
class MemoryProvider:
    """The SDK's ``OAuthAuthorizationServerProvider``, in memory, consenting at once."""

    access_ttl: int = 3600
    resource: str = ""
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    events: list[tuple[str, str | None]] = field(default_factory=list)  # (what, client_id)

    def count(self, what: str) -> int:
        return sum(1 for e, _ in self.events if e == what)

    def token_values(self) -> list[str]:
        return [*self.access, *self.refresh]

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info
        self.events.append(("register", client_info.client_id))

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = AuthorizationCode(code=secrets.token_urlsafe(24), scopes=params.scopes or ["mcp"],
                                 expires_at=time.time() + 60, client_id=client.client_id,
                                 code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
                                 redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
                                 resource=params.resource, subject="test-user")
        self.codes[code.code] = code
        self.events.append(("authorize", client.client_id))
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull,
                                      authorization_code: str) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + self.access_ttl, resource=resource,
                                          subject="test-user")
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource,
                                             subject="test-user")
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=self.access_ttl,
                          refresh_token=refresh, scope=" ".join(scopes))

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.events.append(("token", client.client_id))
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # rotation
        self.events.append(("refresh", client.client_id))
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.events.append(("revoke", token.client_id))
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


class SDKOAuthServer:
    """The SDK's ``MCPServer`` with the SDK's authorization server in the same app, on 127.0.0.1."""

    def __init__(self, access_ttl: int = 3600) -> None:
        self.provider = MemoryProvider(access_ttl=access_ttl)
        self._sock = _listen()
        self.issuer = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.mcp_url = f"{self.issuer}/mcp"
        self.provider.resource = self.mcp_url
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def _app(self) -> Any:
        settings = AuthSettings.model_validate({
            "issuer_url": self.issuer, "resource_server_url": self.mcp_url, "required_scopes": ["mcp"],
            "validate_token_resource": True,
            "client_registration_options": ClientRegistrationOptions(enabled=True, valid_scopes=["mcp"],
                                                                     default_scopes=["mcp"]),
            "revocation_options": RevocationOptions(enabled=True)})
        server = MCPServer("sdk-oauth", auth_server_provider=self.provider, auth=settings)

        @server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
        def echo(text: str) -> str:
            """Return the text."""
            return text

        return server.streamable_http_app(host="127.0.0.1")

    def __enter__(self) -> SDKOAuthServer:
        ready: Future[None] = Future()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            config = uvicorn.Config(self._app(), log_level="warning", lifespan="on", access_log=False)
            self._server = uvicorn.Server(config)
            task = loop.create_task(self._server.serve(sockets=[self._sock]))

            async def started() -> None:
                while self._server is not None and not self._server.started:
                    if task.done():
                        task.result()
                    await asyncio.sleep(0.01)

            try:
                loop.run_until_complete(started())
            except BaseException as e:
                ready.set_exception(e)
                return
            ready.set_result(None)
            loop.run_until_complete(task)
            loop.close()

        self._thread = threading.Thread(target=main, name="sdk-oauth", daemon=True)
        self._thread.start()
        ready.result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()
