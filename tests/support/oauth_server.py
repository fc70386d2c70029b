"""An OAuth-protected streamable-HTTP MCP server for tests, with a small authorization server of our own.

Two parts, on 127.0.0.1, each on a free port:

- **Authorization server** (:class:`AuthorizationServer`, ours, Starlette): RFC 8414 metadata at
  ``/.well-known/oauth-authorization-server`` (and the OIDC alias), ``/authorize`` that answers at
  once with a redirect carrying ``code``, ``state`` and ``iss`` (auto-consent, RFC 9207), ``/token``
  (``authorization_code`` with a PKCE S256 check, ``refresh_token`` with rotation; client
  authentication ``none``, ``client_secret_post``, ``client_secret_basic``), ``/register`` (RFC 7591),
  ``/revoke`` (RFC 7009) and, for tests, ``/_test/*`` admin endpoints. Tokens are opaque random
  strings bound to their client, scopes, ``resource`` (RFC 8707) and issuer; lifetimes are
  configurable (seconds) and can be changed while running.
- **Resource servers** (:class:`ResourceServer`): the SDK's ``MCPServer`` with the SDK's own server
  auth support - ``token_verifier`` (ours: it asks the authorization server's in-memory state),
  ``AuthSettings`` (``issuer_url``, ``resource_server_url``, ``required_scopes``,
  ``validate_token_resource=True``), so the SDK serves the RFC 9728 protected-resource metadata at
  ``/.well-known/oauth-protected-resource/mcp``, answers 401 with ``WWW-Authenticate: Bearer …
  resource_metadata="…"`` and checks the bearer token, its scopes and its resource. Tools:
  ``whoami`` (who the token says you are; never the token), ``echo``, and ``admin_echo``, which
  needs scope ``mcp:admin`` (a 403 ``insufficient_scope`` challenge at the HTTP level, for step-up).
  ``OAuthTestServer(step_up=True)`` makes them a server as MCP's scope step-up expects: its 401 names the
  scope a first sign-in needs (``scope="mcp"``), its protected-resource metadata lists every scope it may
  ask for (``mcp``, ``mcp:admin``), and one more tool, ``root_echo``, asks for ``mcp:root``, which the
  metadata does not list (a client must never ask for it).

Several resource servers may share one authorization server (two connectors of one issuer), and a
resource server can be moved to another authorization server while running (an issuer change): it
restarts on the same port with the new issuer in its metadata and refuses the old issuer's tokens.

In-process use (a background thread with its own event loop)::

    with OAuthTestServer(AuthServerOptions(access_token_ttl=5), resource_servers=2) as srv:
        srv.mcp_url(0), srv.mcp_url(1), srv.issuer
        srv.auth.revoke_refresh_tokens()
        as2 = srv.add_authorization_server()
        srv.move_resource_server(0, as2)

As a subprocess::

    python oauth_test_server.py [--access-token-ttl S] [--resource-servers N] [--no-registration] ...

prints one JSON line ``{"issuer": …, "mcp_urls": […], "admin": …}`` on stdout once listening, then
serves until killed. The admin endpoints (``POST {issuer}/_test/revoke-refresh-tokens``,
``/_test/expire-access-tokens``, ``/_test/options`` with a JSON body, ``GET /_test/events``) let a
test drive it from outside.

Nothing here logs or returns a token value except the token endpoint itself.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import socket
import threading
import time
import warnings
from collections.abc import Awaitable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import unquote, urlencode, urlsplit

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

try:
    from support.tcp import listen_tcp
except ImportError:  # run as a program: tests/support is first on sys.path
    from tcp import listen_tcp  # type: ignore[no-redef]

log = logging.getLogger("oauth_test_server")

TokenEndpointAuthMethod = Literal["none", "client_secret_post", "client_secret_basic"]
ALL_AUTH_METHODS: tuple[TokenEndpointAuthMethod, ...] = ("none", "client_secret_post", "client_secret_basic")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
ADMIN_SCOPE = "mcp:admin"


# --------------------------------------------------------------------------------------------------
# configuration and records
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreRegisteredClient:
    """A client the authorization server knows without dynamic registration."""

    client_id: str
    client_secret: str | None
    token_endpoint_auth_method: TokenEndpointAuthMethod = "client_secret_basic"
    redirect_uris: tuple[str, ...] = ()
    """Empty: any loopback redirect URI is accepted for this client (tests pick free ports)."""
    grant_types: tuple[str, ...] = ("authorization_code", "refresh_token")


@dataclass(frozen=True)
class AuthServerOptions:
    """How the authorization server behaves. Every field can be changed while it runs (``set_options``)."""

    access_token_ttl: int = 3600
    """Seconds; ``expires_in`` of every access token."""
    refresh_token_ttl: int | None = None
    """Seconds, or None for refresh tokens that do not expire."""
    issue_refresh_tokens: bool = True
    """Issue a refresh token when the client registered the ``refresh_token`` grant."""
    rotate_refresh_tokens: bool = True
    """A refresh gives a new refresh token and revokes the old one (OAuth 2.1 for public clients)."""
    scopes_supported: tuple[str, ...] = ("mcp", ADMIN_SCOPE, "offline_access")
    default_scopes: tuple[str, ...] = ("mcp",)
    """Granted when the authorization request names no scope."""
    dynamic_registration: bool = True
    revocation: bool = True
    iss_in_redirect: bool = True
    """Send RFC 9207 ``iss`` with the authorization response (and advertise it)."""
    token_endpoint_auth_methods: tuple[TokenEndpointAuthMethod, ...] = ALL_AUTH_METHODS
    consent: Literal["approve", "deny"] = "approve"
    """What the (automatic) person answers at /authorize: deny redirects with ``error=access_denied``."""
    pre_registered: tuple[PreRegisteredClient, ...] = ()
    admin_endpoints: bool = True
    refresh_status: int | None = None
    """Answer every refresh request with this HTTP status (e.g. 503, an outage) instead of tokens."""
    token_delay: float = 0.0
    """Seconds the token endpoint waits before it answers (two refreshes at once overlap)."""
    iss_value: str | None = None
    """The ``iss`` sent with the authorization response instead of the issuer (a mix-up attack)."""


@dataclass
class Client:
    client_id: str
    client_secret: str | None
    token_endpoint_auth_method: TokenEndpointAuthMethod
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    metadata: dict[str, Any]


@dataclass
class AuthorizationCode:
    code: str
    client_id: str
    redirect_uri: str
    code_challenge: str
    scopes: tuple[str, ...]
    resource: str | None
    expires_at: float
    used: bool = False
    family: str = ""


@dataclass
class IssuedToken:
    token: str
    kind: Literal["access", "refresh"]
    client_id: str
    scopes: tuple[str, ...]
    resource: str | None
    issuer: str
    subject: str
    expires_at: float | None
    family: str
    """All tokens of one grant (the code and every refresh after it) share a family."""
    revoked: bool = False

    def active(self, now: float) -> bool:
        return not self.revoked and (self.expires_at is None or now < self.expires_at)


@dataclass(frozen=True)
class Event:
    """One request the authorization server handled; never carries a token or secret value."""

    endpoint: str
    ok: bool
    client_id: str | None = None
    grant_type: str | None = None
    error: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "ok": self.ok, "client_id": self.client_id,
                "grant_type": self.grant_type, "error": self.error, "detail": dict(self.detail)}


class OAuthError(Exception):
    """An RFC 6749 §5.2 error response."""

    def __init__(self, error: str, description: str, status: int = 400, *, basic_challenge: bool = False) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status
        self.basic_challenge = basic_challenge

    def response(self) -> JSONResponse:
        headers = {"Cache-Control": "no-store"}
        if self.basic_challenge:
            headers["WWW-Authenticate"] = 'Basic realm="oauth-test"'
        return JSONResponse({"error": self.error, "error_description": self.description},
                            status_code=self.status, headers=headers)


def _b64url_sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode("ascii")).digest()).decode().rstrip("=")


def _is_loopback_redirect(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS | {"::1"}


def _redirect_uri_matches(registered: tuple[str, ...], requested: str) -> bool:
    """Exact match, except that a loopback redirect may use any port (RFC 8252 §7.3)."""
    if requested in registered:
        return True
    if not _is_loopback_redirect(requested):
        return False
    if not registered:  # a pre-registered client without fixed URIs: any loopback URI
        return True
    want = urlsplit(requested)
    for uri in registered:
        have = urlsplit(uri)
        same = (have.hostname, have.path, have.query) == (want.hostname, want.path, want.query)
        if _is_loopback_redirect(uri) and same:
            return True
    return False


# --------------------------------------------------------------------------------------------------
# authorization server
# --------------------------------------------------------------------------------------------------


class AuthorizationServer:
    """State and HTTP app of one small authorization server (one issuer).

    Thread-safe: the HTTP handlers run on the server thread's event loop, the admin methods may be
    called from the test's thread.
    """

    def __init__(self, options: AuthServerOptions | None = None, *, subject: str = "test-user") -> None:
        self._options = options or AuthServerOptions()
        self.subject = subject
        self.issuer = ""  # set by :meth:`bind` once the port is known
        self._lock = threading.Lock()
        self._clients: dict[str, Client] = {}
        self._codes: dict[str, AuthorizationCode] = {}
        self._tokens: dict[str, IssuedToken] = {}
        self._events: list[Event] = []
        self.resources: set[str] = set()
        """The resource identifiers (RFC 8707) this server issues tokens for; filled by resource servers."""
        for pre in self._options.pre_registered:
            self._add_pre_registered(pre)

    # -- configuration -------------------------------------------------------------------------------

    def bind(self, base_url: str) -> None:
        self.issuer = base_url.rstrip("/")

    @property
    def options(self) -> AuthServerOptions:
        with self._lock:
            return self._options

    def set_options(self, **changes: Any) -> AuthServerOptions:
        """Change options while running, e.g. ``set_options(access_token_ttl=2)``."""
        with self._lock:
            self._options = replace(self._options, **changes)
            for pre in self._options.pre_registered:
                if pre.client_id not in self._clients:
                    self._add_pre_registered(pre)
            return self._options

    def _add_pre_registered(self, pre: PreRegisteredClient) -> None:
        self._clients[pre.client_id] = Client(
            client_id=pre.client_id, client_secret=pre.client_secret,
            token_endpoint_auth_method=pre.token_endpoint_auth_method, redirect_uris=pre.redirect_uris,
            grant_types=pre.grant_types, metadata={"client_name": "pre-registered"})

    # -- admin (tests) ---------------------------------------------------------------------------------

    def events(self, endpoint: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self._events if endpoint is None or e.endpoint == endpoint]

    def count(self, endpoint: str, *, grant_type: str | None = None, ok: bool | None = None) -> int:
        return sum(1 for e in self.events(endpoint)
                   if (grant_type is None or e.grant_type == grant_type) and (ok is None or e.ok == ok))

    def clients(self) -> list[str]:
        with self._lock:
            return list(self._clients)

    def revoke_refresh_tokens(self) -> int:
        """Revoke every refresh token (as if the person revoked the grant at the provider). Returns how many."""
        with self._lock:
            n = 0
            for t in self._tokens.values():
                if t.kind == "refresh" and not t.revoked:
                    t.revoked = True
                    n += 1
            return n

    def expire_access_tokens(self) -> int:
        """Make every access token expired now (the next request with one gets 401)."""
        now = time.time()
        with self._lock:
            n = 0
            for t in self._tokens.values():
                if t.kind == "access" and t.active(now):
                    t.expires_at = now - 1
                    n += 1
            return n

    def active_access_tokens(self) -> int:
        now = time.time()
        with self._lock:
            return sum(1 for t in self._tokens.values() if t.kind == "access" and t.active(now))

    def is_known_token(self, value: str) -> bool:
        """Whether ``value`` is a token this server issued (to check that a secret did not leak somewhere)."""
        with self._lock:
            return value in self._tokens

    def token_values(self) -> list[str]:
        """Every token value issued so far (tests search logs and outputs for them)."""
        with self._lock:
            return list(self._tokens)

    # -- verification (the resource servers' side) ---------------------------------------------------------

    def introspect(self, token: str) -> IssuedToken | None:
        """The active access token record for ``token``, or None (unknown, expired, revoked, a refresh token)."""
        with self._lock:
            rec = self._tokens.get(token)
            if rec is None or rec.kind != "access" or not rec.active(time.time()):
                return None
            return replace(rec)

    # -- HTTP ------------------------------------------------------------------------------------------------

    def app(self) -> Starlette:
        routes = [
            Route("/.well-known/oauth-authorization-server", self._metadata, methods=["GET"]),
            Route("/.well-known/openid-configuration", self._metadata, methods=["GET"]),
            Route("/authorize", self._authorize, methods=["GET"]),
            Route("/token", self._token, methods=["POST"]),
            Route("/register", self._register, methods=["POST"]),
            Route("/revoke", self._revoke, methods=["POST"]),
            Route("/_test/revoke-refresh-tokens", self._admin_revoke, methods=["POST"]),
            Route("/_test/expire-access-tokens", self._admin_expire, methods=["POST"]),
            Route("/_test/options", self._admin_options, methods=["POST"]),
            Route("/_test/events", self._admin_events, methods=["GET"]),
        ]
        return Starlette(routes=routes)

    def metadata(self) -> dict[str, Any]:
        o = self.options
        md: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "scopes_supported": list(o.scopes_supported),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": list(o.token_endpoint_auth_methods),
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": o.iss_in_redirect,
        }
        if o.dynamic_registration:
            md["registration_endpoint"] = f"{self.issuer}/register"
        if o.revocation:
            md["revocation_endpoint"] = f"{self.issuer}/revoke"
            md["revocation_endpoint_auth_methods_supported"] = list(o.token_endpoint_auth_methods)
        return md

    async def _metadata(self, request: Request) -> Response:
        self._event(Event("metadata", True, detail={"path": request.url.path}))
        return JSONResponse(self.metadata())

    def _event(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    # /authorize ------------------------------------------------------------------------------------------

    async def _authorize(self, request: Request) -> Response:
        q = request.query_params
        client_id = q.get("client_id", "")
        redirect_uri = q.get("redirect_uri", "")
        with self._lock:
            client = self._clients.get(client_id)
        # RFC 6749 §4.1.2.1: with an unknown client or a bad redirect URI, never redirect.
        if client is None:
            self._event(Event("authorize", False, client_id or None, error="unknown_client"))
            return PlainTextResponse("unknown client_id", status_code=400)
        if not redirect_uri or not _redirect_uri_matches(client.redirect_uris, redirect_uri):
            self._event(Event("authorize", False, client_id, error="bad_redirect_uri"))
            return PlainTextResponse("redirect_uri is not registered for this client", status_code=400)
        state = q.get("state")
        o = self.options

        def back(params: dict[str, str]) -> RedirectResponse:
            if state is not None:
                params["state"] = state
            if o.iss_in_redirect:
                params["iss"] = o.iss_value or self.issuer
            sep = "&" if urlsplit(redirect_uri).query else "?"
            return RedirectResponse(f"{redirect_uri}{sep}{urlencode(params)}", status_code=302)

        def refuse(error: str, description: str) -> RedirectResponse:
            self._event(Event("authorize", False, client_id, error=error))
            return back({"error": error, "error_description": description})

        if q.get("response_type") != "code":
            return refuse("unsupported_response_type", "only response_type=code")
        challenge = q.get("code_challenge")
        if not challenge or q.get("code_challenge_method") != "S256":
            return refuse("invalid_request", "PKCE with code_challenge_method=S256 is required")
        scope = q.get("scope")
        scopes = tuple(scope.split()) if scope else o.default_scopes
        unknown = [s for s in scopes if s not in o.scopes_supported]
        if unknown:
            return refuse("invalid_scope", f"unknown scope {unknown[0]}")
        resource = q.get("resource")
        if resource is not None and resource not in self.resources:
            return refuse("invalid_target", "unknown resource")
        if o.consent == "deny":
            return refuse("access_denied", "the person declined")
        code = AuthorizationCode(code=secrets.token_urlsafe(24), client_id=client_id, redirect_uri=redirect_uri,
                                 code_challenge=challenge, scopes=scopes, resource=resource,
                                 expires_at=time.time() + 60, family=secrets.token_hex(8))
        with self._lock:
            self._codes[code.code] = code
        self._event(Event("authorize", True, client_id, detail={"scopes": list(scopes), "resource": resource}))
        return back({"code": code.code})

    # /token ------------------------------------------------------------------------------------------------

    async def _token(self, request: Request) -> Response:
        form = await request.form()
        data = {k: str(v) for k, v in form.items()}
        grant_type = data.get("grant_type")
        client_id: str | None = None
        o = self.options
        if o.token_delay:
            await asyncio.sleep(o.token_delay)
        if grant_type == "refresh_token" and o.refresh_status is not None:
            self._event(Event("token", False, None, grant_type, "temporarily_unavailable"))
            return JSONResponse({"error": "temporarily_unavailable", "error_description": "try again later"},
                                status_code=o.refresh_status)
        try:
            client = self._authenticate_client(request, data)
            client_id = client.client_id
            if grant_type == "authorization_code":
                body = self._grant_code(client, data)
            elif grant_type == "refresh_token":
                body = self._grant_refresh(client, data)
            else:
                raise OAuthError("unsupported_grant_type", f"grant_type {grant_type!r} is not supported")
        except OAuthError as e:
            self._event(Event("token", False, client_id, grant_type, e.error))
            return e.response()
        self._event(Event("token", True, client_id, grant_type,
                          detail={"scope": body.get("scope"), "refresh_token": "refresh_token" in body}))
        return JSONResponse(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})

    def _authenticate_client(self, request: Request, data: dict[str, str]) -> Client:
        header = request.headers.get("authorization", "")
        method: TokenEndpointAuthMethod
        if header.lower().startswith("basic "):
            try:
                raw = base64.b64decode(header[6:].strip(), validate=True).decode()
                cid_raw, secret_raw = raw.split(":", 1)
            except (ValueError, UnicodeDecodeError):
                raise OAuthError("invalid_client", "malformed Basic credentials", 401, basic_challenge=True) from None
            client_id, secret, method = unquote(cid_raw), unquote(secret_raw), "client_secret_basic"
        elif "client_secret" in data:
            client_id, secret, method = data.get("client_id", ""), data["client_secret"], "client_secret_post"
        else:
            client_id, secret, method = data.get("client_id", ""), None, "none"
        with self._lock:
            client = self._clients.get(client_id)
        if client is None:
            raise OAuthError("invalid_client", "unknown client", 401, basic_challenge=method == "client_secret_basic")
        if method not in self.options.token_endpoint_auth_methods:
            raise OAuthError("invalid_client", f"{method} is not supported here", 401)
        if client.token_endpoint_auth_method != method:
            raise OAuthError("invalid_client", f"client must authenticate with {client.token_endpoint_auth_method}",
                             401, basic_challenge=client.token_endpoint_auth_method == "client_secret_basic")
        if method != "none":
            if client.client_secret is None or secret is None or not hmac.compare_digest(secret, client.client_secret):
                raise OAuthError("invalid_client", "bad client credentials", 401,
                                 basic_challenge=method == "client_secret_basic")
        return client

    def _grant_code(self, client: Client, data: dict[str, str]) -> dict[str, Any]:
        now = time.time()
        with self._lock:
            code = self._codes.get(data.get("code", ""))
            if code is None or code.client_id != client.client_id:
                raise OAuthError("invalid_grant", "unknown authorization code")
            if code.used:
                # RFC 6749 §4.1.2: a reused code revokes what it gave
                for t in self._tokens.values():
                    if t.family == code.family:
                        t.revoked = True
                raise OAuthError("invalid_grant", "authorization code already used")
            code.used = True
        if now > code.expires_at:
            raise OAuthError("invalid_grant", "authorization code expired")
        if data.get("redirect_uri") != code.redirect_uri:
            raise OAuthError("invalid_grant", "redirect_uri does not match the authorization request")
        verifier = data.get("code_verifier", "")
        if not (43 <= len(verifier) <= 128) or not hmac.compare_digest(_b64url_sha256(verifier), code.code_challenge):
            raise OAuthError("invalid_grant", "PKCE verification failed")
        resource = data.get("resource", code.resource)
        if resource != code.resource:
            raise OAuthError("invalid_target", "resource differs from the authorization request")
        return self._issue(client, code.scopes, resource, code.family)

    def _grant_refresh(self, client: Client, data: dict[str, str]) -> dict[str, Any]:
        now = time.time()
        with self._lock:
            old = self._tokens.get(data.get("refresh_token", ""))
            if old is None or old.kind != "refresh" or old.client_id != client.client_id or not old.active(now):
                raise OAuthError("invalid_grant", "refresh token is invalid, expired or revoked")
            scope = data.get("scope")
            scopes = tuple(scope.split()) if scope else old.scopes
            if any(s not in old.scopes for s in scopes):
                raise OAuthError("invalid_scope", "a refresh cannot widen the grant")
            resource = data.get("resource", old.resource)
            if resource != old.resource:
                raise OAuthError("invalid_target", "resource differs from the original grant")
            if self._options.rotate_refresh_tokens:
                old.revoked = True
        return self._issue(client, scopes, resource, old.family,
                           keep_refresh=None if self.options.rotate_refresh_tokens else old.token)

    def _issue(self, client: Client, scopes: tuple[str, ...], resource: str | None, family: str,
               *, keep_refresh: str | None = None) -> dict[str, Any]:
        o = self.options
        now = time.time()
        access = IssuedToken(token=f"at_{secrets.token_urlsafe(24)}", kind="access", client_id=client.client_id,
                             scopes=scopes, resource=resource, issuer=self.issuer, subject=self.subject,
                             expires_at=now + o.access_token_ttl, family=family)
        body: dict[str, Any] = {"access_token": access.token, "token_type": "Bearer",
                                "expires_in": o.access_token_ttl, "scope": " ".join(scopes)}
        with self._lock:
            self._tokens[access.token] = access
            if keep_refresh is not None:
                body["refresh_token"] = keep_refresh
            elif o.issue_refresh_tokens and "refresh_token" in client.grant_types:
                refresh = IssuedToken(token=f"rt_{secrets.token_urlsafe(24)}", kind="refresh",
                                      client_id=client.client_id, scopes=scopes, resource=resource,
                                      issuer=self.issuer, subject=self.subject,
                                      expires_at=None if o.refresh_token_ttl is None else now + o.refresh_token_ttl,
                                      family=family)
                self._tokens[refresh.token] = refresh
                body["refresh_token"] = refresh.token
        return body

    # /register ---------------------------------------------------------------------------------------------

    async def _register(self, request: Request) -> Response:
        o = self.options
        if not o.dynamic_registration:
            self._event(Event("register", False, error="disabled"))
            return JSONResponse({"error": "invalid_request", "error_description": "registration is disabled"},
                                status_code=404)
        try:
            meta = await request.json()
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            return self._registration_error("invalid_client_metadata", "the body must be a JSON object")
        uris = meta.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
            return self._registration_error("invalid_redirect_uri", "redirect_uris must be a non-empty list")
        method = meta.get("token_endpoint_auth_method") or "client_secret_basic"  # RFC 7591 §2 default
        if method not in o.token_endpoint_auth_methods:
            method = o.token_endpoint_auth_methods[0]
        grant_types = meta.get("grant_types") or ["authorization_code"]
        if not isinstance(grant_types, list):
            return self._registration_error("invalid_client_metadata", "grant_types must be a list")
        client = Client(client_id=f"client_{secrets.token_hex(8)}",
                        client_secret=None if method == "none" else secrets.token_urlsafe(24),
                        token_endpoint_auth_method=method, redirect_uris=tuple(uris),
                        grant_types=tuple(str(g) for g in grant_types), metadata=meta)
        with self._lock:
            self._clients[client.client_id] = client
        self._event(Event("register", True, client.client_id,
                          detail={"token_endpoint_auth_method": method,
                                  "application_type": meta.get("application_type")}))
        body: dict[str, Any] = {
            **{k: v for k, v in meta.items() if k in ("client_name", "scope", "application_type", "response_types")},
            "client_id": client.client_id,
            "client_id_issued_at": int(time.time()),
            "redirect_uris": list(client.redirect_uris),
            "grant_types": list(client.grant_types),
            "token_endpoint_auth_method": method,
        }
        if client.client_secret is not None:
            body["client_secret"] = client.client_secret
            body["client_secret_expires_at"] = 0
        return JSONResponse(body, status_code=201, headers={"Cache-Control": "no-store"})

    def _registration_error(self, error: str, description: str) -> Response:
        self._event(Event("register", False, error=error))
        return JSONResponse({"error": error, "error_description": description}, status_code=400)

    # /revoke -----------------------------------------------------------------------------------------------

    async def _revoke(self, request: Request) -> Response:
        if not self.options.revocation:
            return PlainTextResponse("not found", status_code=404)
        form = await request.form()
        data = {k: str(v) for k, v in form.items()}
        try:
            client = self._authenticate_client(request, data)
        except OAuthError as e:
            self._event(Event("revoke", False, error=e.error))
            return e.response()
        with self._lock:
            rec = self._tokens.get(data.get("token", ""))
            if rec is not None and rec.client_id == client.client_id:
                rec.revoked = True
                if rec.kind == "refresh":  # revoking the grant ends its access tokens too
                    for t in self._tokens.values():
                        if t.family == rec.family:
                            t.revoked = True
        self._event(Event("revoke", True, client.client_id, detail={"hint": data.get("token_type_hint")}))
        return Response(status_code=200)  # RFC 7009 §2.2: 200 also for unknown tokens

    # /_test ------------------------------------------------------------------------------------------------

    def _admin_allowed(self) -> Response | None:
        return None if self.options.admin_endpoints else PlainTextResponse("not found", status_code=404)

    async def _admin_revoke(self, request: Request) -> Response:
        return self._admin_allowed() or JSONResponse({"revoked": self.revoke_refresh_tokens()})

    async def _admin_expire(self, request: Request) -> Response:
        return self._admin_allowed() or JSONResponse({"expired": self.expire_access_tokens()})

    async def _admin_options(self, request: Request) -> Response:
        refused = self._admin_allowed()
        if refused:
            return refused
        changes = await request.json()
        allowed = {"access_token_ttl", "refresh_token_ttl", "issue_refresh_tokens", "rotate_refresh_tokens",
                   "dynamic_registration", "revocation", "iss_in_redirect", "consent"}
        if not isinstance(changes, dict) or not set(changes) <= allowed:
            return JSONResponse({"error": f"options are {sorted(allowed)}"}, status_code=400)
        o = self.set_options(**changes)
        return JSONResponse({k: getattr(o, k) for k in sorted(allowed)})

    async def _admin_events(self, request: Request) -> Response:
        return self._admin_allowed() or JSONResponse([e.as_json() for e in self.events()])


# --------------------------------------------------------------------------------------------------
# resource server (the SDK's MCPServer with the SDK's server auth)
# --------------------------------------------------------------------------------------------------


class IssuerTokenVerifier:
    """The SDK's ``TokenVerifier`` protocol, answered from one authorization server's state.

    Only tokens of ``auth`` (its current issuer) count: after a resource server moves to another
    authorization server, the old issuer's tokens are refused.
    """

    def __init__(self, auth: AuthorizationServer) -> None:
        self.auth = auth

    async def verify_token(self, token: str) -> AccessToken | None:
        rec = self.auth.introspect(token)
        if rec is None or rec.issuer != self.auth.issuer:
            return None
        return AccessToken(token=token, client_id=rec.client_id, scopes=list(rec.scopes),
                           expires_at=int(rec.expires_at) if rec.expires_at is not None else None,
                           resource=rec.resource, subject=rec.subject, claims={"iss": rec.issuer})


def build_mcp_server(name: str, auth: AuthorizationServer, resource_url: str, step_up: bool = False) -> MCPServer:
    """The SDK's MCPServer, protected by the SDK's bearer-auth middleware and PRM route."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # validate_token_resource is set explicitly; no deprecation noise
        # model_validate, not AnyHttpUrl(...): AuthSettings keeps a path-less issuer without the trailing
        # slash that a bare AnyHttpUrl adds (RFC 8414 issuer comparison is exact)
        settings = AuthSettings.model_validate({"issuer_url": auth.issuer, "resource_server_url": resource_url,
                                                "required_scopes": ["mcp"], "validate_token_resource": True})
    server = MCPServer(name, token_verifier=IssuerTokenVerifier(auth), auth=settings)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
    def whoami() -> str:
        """Who the access token says the caller is (client, subject, scopes, resource); never the token."""
        tok = get_access_token()
        if tok is None:
            return "anonymous"
        return json.dumps({"client_id": tok.client_id, "subject": tok.subject, "scopes": sorted(tok.scopes),
                           "resource": tok.resource, "issuer": (tok.claims or {}).get("iss")}, sort_keys=True)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def admin_echo(text: str) -> str:
        """Return the text; needs scope mcp:admin (the HTTP layer answers 403 insufficient_scope without it)."""
        return f"admin: {text}"

    if step_up:
        @server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
        def root_echo(text: str) -> str:
            """Return the text; needs scope mcp:root, which the protected-resource metadata does not list."""
            return f"root: {text}"

    return server


class StepUpScopes:
    """ASGI middleware: a ``tools/call`` of a tool in ``tools`` without its scope gets HTTP 403
    ``insufficient_scope`` with a ``WWW-Authenticate`` challenge naming that scope (MCP scope step-up).

    The SDK's ``RequireAuthMiddleware`` only knows scopes for the whole endpoint; this adds per-tool
    scopes in front of it. The body is buffered and replayed to the app.
    """

    def __init__(self, app: ASGIApp, verifier: IssuerTokenVerifier, tools: Mapping[str, str], metadata_url: str,
                 challenge_scope: str | None = None, listed_scopes: tuple[str, ...] | None = None) -> None:
        self.app = app
        self.verifier = verifier
        self.tools = dict(tools)
        self.metadata_url = metadata_url
        self.challenge_scope = challenge_scope  # named in every 401 challenge (the first sign-in's scope)
        self.listed_scopes = listed_scopes  # the protected-resource metadata's scopes_supported instead of the SDK's

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.listed_scopes is not None and scope["method"] == "GET" and \
                scope["path"] == urlsplit(self.metadata_url).path:
            await self._metadata(scope, receive, send)
            return
        if scope["type"] == "http" and self.challenge_scope is not None:
            send = self._challenging(send)
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        needed = self._needed_scope(body)
        if needed is not None:
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            auth = headers.get("authorization", "")
            rec = await self.verifier.verify_token(auth[7:]) if auth.lower().startswith("bearer ") else None
            if rec is not None and needed not in rec.scopes:
                challenge = (f'Bearer error="insufficient_scope", scope="{" ".join([*rec.scopes, needed])}", '
                             f'resource_metadata="{self.metadata_url}", error_description="needs {needed}"')
                response = JSONResponse({"error": "insufficient_scope", "error_description": f"needs {needed}"},
                                        status_code=403, headers={"WWW-Authenticate": challenge})
                await response(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent: list[Message] = []

        async def keep(message: Message) -> None:
            sent.append(message)

        await self.app(scope, receive, keep)
        body = json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))
        body["scopes_supported"] = list(self.listed_scopes or ())
        await JSONResponse(body)(scope, receive, send)

    def _challenging(self, send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                headers = []
                for k, v in message.get("headers", []):
                    if k.lower() == b"www-authenticate":
                        v = v + f', scope="{self.challenge_scope}"'.encode()
                    headers.append((k, v))
                message = {**message, "headers": headers}
            await send(message)

        return wrapped

    def _needed_scope(self, body: bytes) -> str | None:
        try:
            msg = json.loads(body)
        except ValueError:
            return None
        if isinstance(msg, dict) and msg.get("method") == "tools/call":
            name = (msg.get("params") or {}).get("name")
            return self.tools.get(name) if isinstance(name, str) else None
        return None


# --------------------------------------------------------------------------------------------------
# running it: one background thread, one event loop, several uvicorn servers on pre-bound sockets
# --------------------------------------------------------------------------------------------------


def _listen(port: int = 0, host: str = "127.0.0.1") -> socket.socket:
    return listen_tcp(host, port)


@dataclass
class _Running:
    server: uvicorn.Server
    task: asyncio.Task[None]
    sock: socket.socket

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])


@dataclass
class ResourceServer:
    """One protected MCP server: its URL, the authorization server it trusts, its uvicorn."""

    name: str
    auth: AuthorizationServer
    port: int
    running: _Running | None = None
    host: str = "127.0.0.1"
    """Another loopback address (127.0.0.2) lets a test give the server another address class
    (``PALUI_TEST_ADDRESS_CLASSES``) than its authorization server on 127.0.0.1."""
    step_up: bool = False
    """Behave as MCP's scope step-up expects (see the module docstring)."""

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def metadata_url(self) -> str:
        return f"{self.base_url}/.well-known/oauth-protected-resource/mcp"

    def app(self) -> ASGIApp:
        self.auth.resources.add(self.mcp_url)
        mcp = build_mcp_server(self.name, self.auth, self.mcp_url, self.step_up)
        inner = mcp.streamable_http_app(host=self.host)
        if not self.step_up:
            return StepUpScopes(inner, IssuerTokenVerifier(self.auth), {"admin_echo": ADMIN_SCOPE}, self.metadata_url)
        return StepUpScopes(inner, IssuerTokenVerifier(self.auth), {"admin_echo": ADMIN_SCOPE, "root_echo": "mcp:root"},
                            self.metadata_url, challenge_scope="mcp", listed_scopes=("mcp", ADMIN_SCOPE))


class OAuthTestServer:
    """An authorization server and ``resource_servers`` protected MCP servers, in a background thread."""

    def __init__(self, options: AuthServerOptions | None = None, *, resource_servers: int = 1,
                 log_level: str = "warning", resource_host: str = "127.0.0.1", step_up: bool = False) -> None:
        self.resource_host = resource_host
        self.step_up = step_up
        self.auth = AuthorizationServer(options)
        self._extra_auth: list[AuthorizationServer] = []
        self._n_resources = resource_servers
        self._log_level = log_level
        self.resource_servers: list[ResourceServer] = []
        self._auth_running: dict[int, _Running] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- public ------------------------------------------------------------------------------------------

    @property
    def issuer(self) -> str:
        return self.auth.issuer

    def mcp_url(self, index: int = 0) -> str:
        return self.resource_servers[index].mcp_url

    def __enter__(self) -> OAuthTestServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._thread_main, args=(ready,), name="oauth-test-server", daemon=True)
        self._thread.start()
        ready.result(timeout=30)

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop = None

    def add_authorization_server(self, options: AuthServerOptions | None = None) -> AuthorizationServer:
        """Start another authorization server (another issuer) and return it."""
        auth = AuthorizationServer(options or self.auth.options)
        self._call(self._start_auth(auth))
        self._extra_auth.append(auth)
        return auth

    def move_resource_server(self, index: int, auth: AuthorizationServer) -> None:
        """Restart resource server ``index`` on its port, trusting ``auth`` (an issuer change)."""
        self._call(self._move(index, auth))

    # -- thread / loop ---------------------------------------------------------------------------------------

    def _call(self, coro: Awaitable[Any]) -> Any:
        assert self._loop is not None, "not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)  # type: ignore[arg-type]

    def _thread_main(self, ready: Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def boot() -> None:
            await self._start_auth(self.auth)
            for i in range(self._n_resources):
                rs = ResourceServer(name=f"oauth-test-{i}", auth=self.auth, port=0, host=self.resource_host,
                                    step_up=self.step_up)
                self.resource_servers.append(rs)
                await self._start_resource(rs)

        try:
            loop.run_until_complete(boot())
        except BaseException as e:  # report start-up failures to start()
            ready.set_exception(e)
            return
        ready.set_result(None)
        loop.run_forever()
        loop.close()

    async def _serve(self, app: ASGIApp, sock: socket.socket) -> _Running:
        config = uvicorn.Config(app, log_level=self._log_level, lifespan="on", access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()  # raises the start-up error
            await asyncio.sleep(0.01)
        return _Running(server, task, sock)

    async def _start_auth(self, auth: AuthorizationServer) -> None:
        sock = _listen()
        auth.bind(f"http://127.0.0.1:{sock.getsockname()[1]}")
        self._auth_running[id(auth)] = await self._serve(auth.app(), sock)

    async def _start_resource(self, rs: ResourceServer) -> None:
        sock = _listen(rs.port, rs.host)
        rs.port = int(sock.getsockname()[1])
        rs.running = await self._serve(rs.app(), sock)

    async def _stop(self, running: _Running) -> None:
        running.server.should_exit = True
        await running.task
        running.sock.close()

    async def _move(self, index: int, auth: AuthorizationServer) -> None:
        rs = self.resource_servers[index]
        if rs.running is not None:
            await self._stop(rs.running)
        rs.auth.resources.discard(rs.mcp_url)
        rs.auth = auth
        await self._start_resource(rs)

    async def _shutdown(self) -> None:
        for rs in self.resource_servers:
            if rs.running is not None:
                await self._stop(rs.running)
        for running in self._auth_running.values():
            await self._stop(running)


@contextmanager
def oauth_test_server(options: AuthServerOptions | None = None, *,
                      resource_servers: int = 1) -> Iterator[OAuthTestServer]:
    """``with oauth_test_server(...) as srv:`` - the same as ``with OAuthTestServer(...)``."""
    with OAuthTestServer(options, resource_servers=resource_servers) as srv:
        yield srv


def _main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--access-token-ttl", type=int, default=3600)
    p.add_argument("--refresh-token-ttl", type=int, default=None)
    p.add_argument("--resource-servers", type=int, default=1)
    p.add_argument("--no-registration", action="store_true", help="no dynamic client registration")
    p.add_argument("--no-revocation", action="store_true")
    p.add_argument("--no-refresh-tokens", action="store_true")
    p.add_argument("--pre-registered", metavar="ID:SECRET:METHOD", action="append", default=[],
                   help="a pre-registered client (METHOD: none, client_secret_post, client_secret_basic)")
    ns = p.parse_args(argv)
    pre = []
    for spec in ns.pre_registered:
        cid, secret, method = spec.split(":", 2)
        if method not in ALL_AUTH_METHODS:
            p.error(f"--pre-registered: METHOD must be one of {', '.join(ALL_AUTH_METHODS)}")
        pre.append(PreRegisteredClient(cid, secret or None, method))
    options = AuthServerOptions(access_token_ttl=ns.access_token_ttl, refresh_token_ttl=ns.refresh_token_ttl,
                                dynamic_registration=not ns.no_registration, revocation=not ns.no_revocation,
                                issue_refresh_tokens=not ns.no_refresh_tokens, pre_registered=tuple(pre))
    srv = OAuthTestServer(options, resource_servers=ns.resource_servers)
    srv.start()
    print(json.dumps({"issuer": srv.issuer, "mcp_urls": [rs.mcp_url for rs in srv.resource_servers],
                      "admin": f"{srv.issuer}/_test"}), flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()


if __name__ == "__main__":
    _main()
