"""The web page of ``palui serve`` (spec §8): login, chat, approvals, connector sheet, jobs,
webhooks, status, audit, memories, governance (spec §5.8).

Server-rendered pages (Jinja2, ``web/templates``) with a little plain JavaScript
(``web/static``) for the live parts: the chat streams a turn's NDJSON events from
``POST /api/turns``, approval buttons stream the resumed turn. Every page reads the
same service as the CLI, through its parts (:class:`palui.service.api.Service`, from
``base.svc_of``): the web pages are a front end and import nothing of Palui but the service,
``palui.text``, ``palui.types`` and ``palui.errors``. The modules:

- :mod:`palui.web` (this one): the route table, login and logout;
- :mod:`.base`: templates, CSRF check on forms, flash messages, security headers;
- :mod:`.chat`, :mod:`.approvals`, :mod:`.connectors`, :mod:`.triggers`, :mod:`.status`,
  :mod:`.governance`: one area of the page each.

Access (the Guard in :mod:`palui.server.app` enforces it before any route here): the
access token as ``Authorization: Bearer`` or the session cookie set by ``/login``.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from palui.server.body import BodyTooLarge, pairs_duplicate, read_body
from palui.server.session import SESSION_COOKIE, session_value
from palui.text.secret_compare import same_secret
from palui.web.base import SECURITY_HEADERS, STATIC, action, redirect, render

LOGIN_COOKIE = "palui_login"  # the login form's own CSRF nonce (no session exists yet)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


def _logged_in(request: Request, to: str = "/") -> Response:
    resp = RedirectResponse(to, status_code=303, headers=SECURITY_HEADERS)
    # A session cookie (no expiry): an HMAC of the token, never the token itself. Lax so
    # the /login?token=… link printed by `palui serve` works when opened from another app;
    # state changes still need the CSRF token, which a cross-site page cannot read.
    resp.set_cookie(SESSION_COOKIE, session_value(request.app.state.token), path="/", httponly=True,
                    samesite="lax", secure=_secure(request))
    resp.delete_cookie(LOGIN_COOKIE, path="/login")
    return resp


def _login_page(request: Request, error: str | None = None, status_code: int = 200) -> Response:
    # Reuse the nonce the browser already holds: a second GET (another tab, a favicon request
    # redirected here) must not invalidate a form that is already open.
    held = request.cookies.get(LOGIN_COOKIE, "")
    nonce = held if len(held) >= 32 else secrets.token_urlsafe(24)
    resp = render(request, "login.html", status_code=status_code, login_nonce=nonce, error=error,
                  with_nav=False)
    resp.set_cookie(LOGIN_COOKIE, nonce, path="/login", httponly=True, samesite="strict", secure=_secure(request))
    return resp


def _token_ok(request: Request, token: str) -> bool:
    return bool(token) and same_secret(token.strip(), request.app.state.token)


async def login_get(request: Request) -> Response:
    """``GET /login``: the token form; ``/login?token=…`` (the link ``palui serve`` prints) logs in
    and redirects to ``/``, dropping the token from the address bar."""
    token = request.query_params.get("token")
    if token is not None:
        if _token_ok(request, token):
            return _logged_in(request)
        return _login_page(request, "That access token is not this service's.", 403)
    return _login_page(request)


async def login_post(request: Request) -> Response:
    """``POST /login`` with ``token`` and the form's ``csrf`` nonce (matched with its cookie)."""
    from urllib.parse import parse_qsl

    try:
        raw = await read_body(request, 65_536)  # a token and a nonce
    except BodyTooLarge:
        return _login_page(request, "The login form is too large.", 413)
    pairs = parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)
    if pairs_duplicate(pairs) is not None:  # two tokens or nonces: which one would be checked?
        return _login_page(request, "The login form gives a field twice; try again.", 400)
    form = dict(pairs)
    nonce = request.cookies.get(LOGIN_COOKIE, "")
    if not nonce or not same_secret(form.get("csrf", ""), nonce):
        return _login_page(request, "The login form expired or was not sent by this page; try again.", 403)
    if not _token_ok(request, form.get("token", "")):
        return _login_page(request, "That access token is not this service's.", 403)
    return _logged_in(request)


@action
async def logout(request: Request, form: dict[str, str]) -> Response:
    """``POST /logout``: forget the session cookie."""
    resp = redirect("/login")
    resp.delete_cookie(SESSION_COOKIE, path="/")
    return resp


async def index(request: Request) -> Response:
    return RedirectResponse("/chat", status_code=303, headers=SECURITY_HEADERS)


def routes() -> list[BaseRoute]:
    """Every route of the web page (the JSON API and webhooks are elsewhere)."""
    from palui.web import approvals, channels, chat, connectors, elicitations, governance, status, triggers

    out: list[BaseRoute] = [
        Route("/", index),
        Route("/login", login_get, methods=["GET"]),
        Route("/login", login_post, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"),
    ]
    for mod in (chat, approvals, elicitations, connectors, triggers, channels, status, governance):
        out.extend(mod.routes())
    return out
