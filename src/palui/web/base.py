"""Shared pieces of the web page: templates, the CSRF check on forms, flash messages, headers.

Every page is rendered server-side from ``web/templates`` (Jinja2, autoescaped).
Every state change from the page is a POST that carries the session's CSRF token,
either as the hidden form field ``csrf`` or as the ``X-Palui-CSRF`` header (the
page's scripts); a POST without it gets 403 and changes nothing. The token is
:func:`palui.server.session.csrf_value` of the access token, so it is the same for every
page of a session and never reveals the access token itself.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import jinja2
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from palui.errors import NotFound, PaluiError
from palui.server.body import BodyTooLarge, json_duplicate, pairs_duplicate, read_body, shown_name
from palui.server.endpoint import service_of
from palui.server.session import csrf_value
from palui.text.display import hidden_in
from palui.text.elicitation import fields as question_fields
from palui.text.prompts import marked_arguments
from palui.text.secret_compare import same_secret
from palui.text.secret_fields import secret_fields
from palui.web.marks import by_path, is_whole, marked_value
from palui.web.shown import NOTE_HTML, finalize, json_html, quoted, shown_html, shown_one_line

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from palui.service.api import Service

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
FLASH_COOKIE = "palui_flash"
MAX_FORM_BYTES = 1024 * 1024  # forms carry short fields; anything larger is refused

# The page loads only its own scripts and styles (no inline script: the CSRF token for
# scripts is in a <meta> tag), and cannot be framed, so an Approve button cannot be
# clickjacked. No Referer leaves the origin (a /login?token=… URL never leaks).
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class CSRFRefused(PaluiError):
    """A POST from the page without the session's CSRF token (answered with 403)."""


# -- time and value formatting ------------------------------------------------------------


def _zone(request: Request) -> ZoneInfo | None:
    return svc_of(request).status.timezone()


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 string or epoch seconds as an aware datetime (None when empty or unreadable)."""
    if value in (None, ""):
        return None
    try:
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(float(value), UTC)
        d = datetime.fromisoformat(str(value))
        return d if d.tzinfo else d.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None


def seconds_left(value: Any, now: float | None = None) -> float | None:
    """Seconds from now until the ISO time ``value`` (negative once past)."""
    d = parse_time(value)
    if d is None:
        return None
    return d.timestamp() - (time.time() if now is None else now)


def duration_words(seconds: float | None) -> str:
    """``"12 min 5 s"`` / ``"3 h 4 min"``; ``"expired"`` for a negative time."""
    if seconds is None:
        return ""
    if seconds <= 0:
        return "expired"
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, allow_nan=False)


def compact_json(value: Any) -> str:
    """One-line JSON for display (autoescaped by the template, unlike Jinja's ``tojson``)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)


def marked_args(marks: list[dict[str, Any]] | None) -> set[str]:
    """The top-level arguments that carry a mark (spec §4.6): "approve, and from now on the same" keeps them
    pinned (spec §5.9), so the card offers no widening for them."""
    return marked_arguments(marks or [])


def args_html(args: Any, marks: list[dict[str, Any]] | None) -> Markup:
    """A call's exact arguments as indented JSON, escaped, with what came from untrusted content (spec §4.6:
    ``untrusted_args`` marks ``{"path","value","spans","source"}``) wrapped in ``<mark class="untrusted">``
    naming its source: a value found whole (a number too), or only the spans of a longer string
    (:func:`palui.web.marks.marked_value`)."""
    flagged = by_path(marks)

    def walk(v: Any, path: str, indent: int) -> str:
        pad = "  " * indent
        if isinstance(v, dict):
            if not v:
                return "{}"
            items = [f'{pad}  {quoted(str(k))}: '
                     f'{walk(x, f"{path}.{k}" if path else str(k), indent + 1)}' for k, x in sorted(v.items())]
            return "{\n" + ",\n".join(items) + f"\n{pad}}}"
        if isinstance(v, list):
            if not v:
                return "[]"
            items = [f"{pad}  {walk(x, f'{path}[{i}]', indent + 1)}" for i, x in enumerate(v)]
            return "[\n" + ",\n".join(items) + f"\n{pad}]"
        text = quoted(v) if isinstance(v, str) else str(escape(json.dumps(v, ensure_ascii=False, allow_nan=False)))
        here = flagged.get(path or "$")
        return marked_value(v, text, here) if here else text

    out = Markup(walk(args, "", 0))
    return out + NOTE_HTML if hidden_in(args) else out


def local_time(request: Request, value: Any, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """An ISO/epoch time shown in the caps time zone (the person's day), with the zone name."""
    return time_in(_zone(request), value, fmt)


def time_in(zone: ZoneInfo | None, value: Any, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """:func:`local_time` with the zone already looked up (a page of rows looks it up once)."""
    d = parse_time(value)
    if d is None:
        return ""
    d = d.astimezone(zone)
    return f"{d.strftime(fmt)} {d.tzname() or ''}".strip()


# -- templates ------------------------------------------------------------------------------

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    autoescape=True,
    undefined=jinja2.StrictUndefined,  # a missing value is a bug the tests should see
    trim_blocks=True,
    lstrip_blocks=True,
    finalize=finalize,  # no hidden character reaches the page raw, whatever the template forgets
)
_env.filters["shown"] = shown_html
_env.filters["shown1"] = shown_one_line
_env.filters["json_shown"] = json_html
_env.filters["pretty_json"] = pretty_json
_env.filters["compact"] = compact_json
_env.filters["duration"] = duration_words
_env.globals["args_html"] = args_html
_env.globals["mark_is_whole"] = is_whole  # a mark of the whole value, or of its spans (spec §4.6)
_env.globals["seconds_left"] = seconds_left
_env.globals["marked_args"] = marked_args  # the arguments a standing approval keeps pinned (spec §5.9)
_env.globals["question_form"] = question_fields  # a server's question: its form fields (palui.text.elicitation)
_env.globals["question_secret"] = secret_fields  # …and which of them ask for a secret (a password box)


def csrf_token(request: Request) -> str:
    return csrf_value(request.app.state.token)


def pending_count(request: Request) -> int:
    """What waits for the person: pending approvals and servers' questions (the nav's Approvals count)."""
    return svc_of(request).approvals.waiting()  # counted through indexes; reads only (every page shows it)


def render(request: Request, template: str, status_code: int = 200, **ctx: Any) -> HTMLResponse:
    """Render a page (``template`` under ``web/templates``) with the shared context:
    ``csrf``, ``flash``, ``pending`` (approvals waiting), ``path``, ``when`` (a time formatter)."""
    flash = read_flash(request)
    zone = _zone(request)  # once per page, not per time shown
    base = {
        "csrf": csrf_token(request),
        "flash": flash,
        "pending": pending_count(request) if ctx.pop("with_nav", True) else 0,
        "path": request.url.path,
        "when": lambda v, fmt="%Y-%m-%d %H:%M:%S": time_in(zone, v, fmt),
    }
    base.update(ctx)
    html = _env.get_template(template).render(**base)
    resp = HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)
    if flash:
        resp.delete_cookie(FLASH_COOKIE, path="/")
    return resp


def render_fragment(request: Request, template: str, **ctx: Any) -> HTMLResponse:
    """A piece of a page (a turn, an approval card) for the page's scripts to swap in."""
    ctx.setdefault("with_nav", False)
    return render(request, template, **ctx)


def error_page(request: Request, status_code: int, message: str) -> HTMLResponse:
    return render(request, "error.html", status_code=status_code, message=message, code=status_code)


# -- flash messages -------------------------------------------------------------------------


def read_flash(request: Request) -> dict[str, str] | None:
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(raw.encode()).decode())
        return {"kind": str(data["kind"]), "text": str(data["text"])}
    except (ValueError, KeyError, TypeError):
        return None


def redirect(url: str, flash: tuple[str, str] | None = None) -> RedirectResponse:
    """303 to ``url`` (a local path), carrying a one-time message (``("ok"|"error", text)``)."""
    resp = RedirectResponse(safe_local(url), status_code=303, headers=SECURITY_HEADERS)
    if flash:
        kind, text = flash
        flashed = json.dumps({"kind": kind, "text": text[:1500]}, allow_nan=False)
        value = base64.urlsafe_b64encode(flashed.encode()).decode()
        resp.set_cookie(FLASH_COOKIE, value, max_age=60, path="/", httponly=True, samesite="strict")
    return resp


def safe_local(url: str | None, default: str = "/") -> str:
    """``url`` if it is a path on this site (never ``//host`` or a scheme): no open redirect."""
    if not url or not url.startswith("/") or url.startswith("//") or "\\" in url or any(ord(c) < 32 for c in url):
        return default
    return url


# -- forms and the CSRF check ---------------------------------------------------------------


async def read_form(request: Request) -> dict[str, str]:
    """The POSTed fields (URL-encoded form or JSON object), after the CSRF check.

    Raises CSRFRefused when neither the ``csrf`` field nor the ``X-Palui-CSRF`` header
    carries this session's token; BodyTooLarge for a body over :data:`MAX_FORM_BYTES` (read no further);
    PaluiError for a field given twice (named: the page and the server must not read two different forms).
    """
    raw = await read_body(request, MAX_FORM_BYTES)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    data: dict[str, str] = {}
    twice: str | None = None
    try:
        if ctype == "application/json" and raw:
            twice = json_duplicate(raw)
            obj = json.loads(raw)
            if isinstance(obj, dict):
                data = {str(k): v if isinstance(v, str) else json.dumps(v, allow_nan=False) for k, v in obj.items()}
        elif raw:
            pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True)
            twice = pairs_duplicate(pairs)
            data = dict(pairs)
    except (ValueError, UnicodeDecodeError):
        data = {}
    sent = data.get("csrf") or request.headers.get("x-palui-csrf", "")
    if not sent or not same_secret(str(sent), csrf_token(request)):
        raise CSRFRefused("this form was not sent by a page of this Palui session (missing or wrong CSRF token)")
    if twice is not None:
        raise PaluiError(f"the field '{shown_name(twice)}' is given twice in the form")
    return data


Action = Callable[[Request, dict[str, str]], Awaitable[Response]]


def action(fn: Action) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a form handler: CSRF check first (403 page), then PaluiError → back to the page
    named by the form's ``back`` field with the error as a flash message."""

    async def wrapped(request: Request) -> Response:
        try:
            form = await read_form(request)
        except CSRFRefused as e:
            return error_page(request, 403, str(e))
        except BodyTooLarge as e:
            return error_page(request, 413, str(e))
        except PaluiError as e:
            return error_page(request, 400, str(e))
        try:
            return await fn(request, form)
        except PaluiError as e:  # NotFound, UsageError, ApprovalError, ConnectorError…: said on the page
            return redirect(form.get("back") or "/", ("error", str(e)))

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def page(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a GET page: NotFound → 404 page, another PaluiError → 400 page."""

    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except NotFound as e:
            return error_page(request, 404, str(e))
        except PaluiError as e:
            return error_page(request, 400, str(e))

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def svc_of(request: Request) -> Service:
    """The service behind this app (:func:`palui.server.endpoint.service_of`)."""
    return service_of(request)
