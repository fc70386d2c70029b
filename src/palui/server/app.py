"""The service's ASGI app: the JSON API, webhooks and the web page, behind the access token.

Every route needs the token (spec §8), loopback included: ``Authorization: Bearer
<token>``, or the session cookie the web page sets after login. Webhook deliveries
(``/hooks/…``) carry their own signature instead. ``/mcp`` (the gateway, spec §8.6) takes a
gateway client's token only, never the service's. A ``Host`` header that is not this
service's (DNS rebinding) gets 400.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from palui.gateway import CLIENT_KEY
from palui.gateway.lazy import LazyGateway
from palui.server import hooks, routes
from palui.server.session import SESSION_COOKIE, csrf_value, session_value
from palui.server.unexpected import CatchUnexpected, no_route
from palui.text.secret_compare import same_secret

if TYPE_CHECKING:
    from palui.service.api import Service

log = logging.getLogger(__name__)

#: A start-up hook of ``palui serve``: called with the service, entered while the service runs.
ServeHook = Callable[["Service"], AbstractAsyncContextManager[object]]

PUBLIC_PREFIXES = ("/hooks/", "/login", "/static/")
PUBLIC_PATHS = ("/api/health",)  # says only "a Palui service, this pid": lets the CLI check before sending the token


def allowed_hosts(host: str, port: int, public_url: str | None) -> set[str]:
    """Host header values this service answers to: loopback names, the bound host, the public URL."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    if host not in ("0.0.0.0", "::", ""):
        names.add(f"[{host}]" if ":" in host else host)
    out = {f"{n}:{port}" for n in names}
    if public_url:
        u = urlsplit(public_url)
        if u.hostname:
            default = {"https": 443, "http": 80}.get(u.scheme)
            hostname = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
            out.add(f"{hostname}:{u.port or default}")
            if u.port is None or u.port == default:
                out.add(hostname)  # proxies send the default port or none
    return {h.lower() for h in out}


class Guard:
    """ASGI middleware: Host check (DNS rebinding) then the access token."""

    def __init__(self, app: Starlette, token: str, hosts: set[str]) -> None:
        self.app = app
        self.state = app.state
        self.token = token
        self.hosts = hosts

    def _authorized(self, headers: dict[str, str], cookies: str) -> str | None:
        """``"bearer"``, ``"cookie"`` or None."""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and same_secret(auth[7:].strip(), self.token):
            return "bearer"
        for part in cookies.split(";"):
            k, _, v = part.strip().partition("=")
            if k == SESSION_COOKIE and v and same_secret(v, session_value(self.token)):
                return "cookie"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if headers.get("host", "").lower() not in self.hosts:
            return await JSONResponse({"error": "unknown Host header"}, status_code=400)(scope, receive, send)
        path = scope["path"]
        if path == "/mcp" or path.startswith("/mcp/"):
            return await self._gateway(scope, receive, send, headers)
        unsafe = scope["method"] not in ("GET", "HEAD", "OPTIONS")
        origin = headers.get("origin")
        if unsafe and origin and origin != "null" and urlsplit(origin).netloc not in self.hosts:
            return await JSONResponse({"error": "cross-origin request refused"}, status_code=403)(scope, receive, send)
        how = self._authorized(headers, headers.get("cookie", ""))
        if how == "cookie" and unsafe and path.startswith("/api/"):
            # A cookie alone is not enough for a state change over the API (CSRF): the page's
            # script sends the CSRF token in a header, which a cross-site form cannot set.
            if not same_secret(headers.get("x-palui-csrf", ""), csrf_value(self.token)):
                return await JSONResponse({"error": "missing or wrong CSRF token"}, status_code=403)(
                    scope, receive, send
                )
        if path.startswith(PUBLIC_PREFIXES) or path in PUBLIC_PATHS or how:
            return await self.app(scope, receive, send)
        if path.startswith("/api/"):
            resp: Response = JSONResponse({"error": "the access token is required"}, status_code=401)
        else:
            resp = RedirectResponse("/login", status_code=303)
        return await resp(scope, receive, send)

    async def _gateway(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        """``/mcp``: an ``Origin`` of another site gets 403 (DNS rebinding, whatever the method); only a gateway
        client's token opens it (401 otherwise, logged: not an audit row)."""
        origin = headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc.lower() not in self.hosts:
            return await JSONResponse({"error": "cross-origin request refused"}, status_code=403)(scope, receive, send)
        auth = headers.get("authorization", "")
        svc: Service = self.state.svc
        client = svc.gateway.client_for_token(auth[7:].strip()) if auth.lower().startswith("bearer ") else None
        if client is None:
            log.warning("gateway: refused a request to /mcp without a known client token")
            # A JSON-RPC error body: MCP clients show its message to the person.
            said = "a gateway client's token is required (palui gateway clients add)"
            return await JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": said}},
                                      status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        scope.setdefault("state", {})[CLIENT_KEY] = client
        return await self.app(scope, receive, send)


def create_app(
    svc: Service, token: str, host: str = "127.0.0.1", port: int = 8765, tick_seconds: float | None = None,
    serve_hooks: Sequence[ServeHook] = (),
) -> Guard:
    """The ASGI app for one service: the JSON routes, the webhook route and the web pages behind
    the :class:`Guard`; an unexpected exception is a logged 500 with an id (:class:`CatchUnexpected`).
    Its lifespan starts and drains the service's runtime (the tick, the job scheduler).

    Args:
        serve_hooks: each is called with the service after its background starts and entered as
            an async context manager, then left (in reverse order) before the service drains. The
            ``palui serve`` command passes the chat channels' manager here, so the server imports
            no channel.
    """
    from palui import web

    gateway = LazyGateway(svc)  # the MCP SDK's server side is imported by the first request to /mcp
    all_routes = [*routes.routes(), *hooks.routes(), *web.routes(), Route("/mcp", endpoint=gateway)]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await svc.runtime.start(tick_seconds)
        try:
            async with AsyncExitStack() as entered:
                await entered.enter_async_context(gateway.run())
                for hook in serve_hooks:
                    await entered.enter_async_context(hook(svc))
                yield
        finally:
            await svc.runtime.shutdown()

    # An exception no route expected is logged and answered with its id (palui.server.unexpected).
    app = Starlette(routes=all_routes, lifespan=lifespan, middleware=[Middleware(CatchUnexpected)],
                    exception_handlers={HTTPException: no_route})
    app.state.svc = svc
    app.state.token = token
    hosts = allowed_hosts(host, port, svc.settings.serve.public_url)
    return Guard(app, token, hosts)
