"""The connector sheet (spec §2, §3, §7): connectors with their state and tools; per tool its
class with the class's source, the on/off switch, the "changed — review" flag with the
definition diff; "Enable all read tools"; adding an MCP server; trusted sources.

Every change goes through the service's parts the CLI uses (``svc.tools``: ``set_class``, ``reset_class``,
``set_enabled``, ``review``, ``enable_read``, ``set_trusted``; ``svc.connectors``: ``add_async``,
``refresh_async``, ``set_enabled``, ``remove``; ``svc.signin``: ``start_web``, ``logout_async``).
MCP env and header values are secrets: the page only ever shows their keys; an MCP URL is shown as
``svc.connectors.config`` gives it, password and query values as ``***``; OAuth tokens never reach the page
("Sign in" sends the browser to the server's sign-in page, ``/oauth/callback`` brings it back).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from palui.errors import NotFound, UsageError
from palui.server.raw_path import RawPathRoute
from palui.text.display import named
from palui.text.mcp_config import ServerConfig
from palui.text.review import review_view  # one rendering of a pending change, CLI and page
from palui.types import Origin
from palui.web.base import SECURITY_HEADERS, action, page, redirect, render, svc_of
from palui.web.forms import ServerForm, form_as

if TYPE_CHECKING:
    from palui.results import Connector
    from palui.service.api import Service
    from palui.service.tools import ToolRow

CLASSES = ("read", "write", "destructive")
SOURCE_WORDS = {"user": "set by you", "builtin": "built-in", "hints": "from the server's hints",
                "unknown": "unknown — treated as destructive"}
# The columns of the decision matrix (spec §3) shown per tool, as `palui policy explain` gives them.
COLUMNS = (("chat", Origin.CHAT, False), ("chat, tainted", Origin.CHAT, True), ("job", Origin.JOB, False),
           ("webhook", Origin.WEBHOOK, False))


def tool_view(svc: Service, row: ToolRow) -> dict[str, Any]:
    """A tool as the sheet shows it: the ``tools list --json`` fields, the matrix columns, the review."""
    d: dict[str, Any] = {**row.as_dict()}
    d["verdicts"] = [(label, svc.tools.explain(row.name, origin, tainted)) for label, origin, tainted in COLUMNS]
    d["review"] = review_view(row.review)
    if row.changed:
        # The form sends back which pending change it showed: a newer one is never accepted unseen.
        pending = svc.tools.details(row.name)["pending"]
        d["review_fingerprint"] = pending["fingerprint"] if pending else None
    d["source_words"] = SOURCE_WORDS.get(d["class_source"], d["class_source"])
    d["schema"] = row.input_schema
    d["definition_hash"] = row.definition_hash  # a hidden-characters tool's switch names what the sheet showed
    return d


def connector_view(svc: Service, cid: str) -> Connector:
    """One connector from :meth:`connectors` (with its live state). Raises NotFound."""
    for c in svc.connectors.list():
        if c["id"] == cid:
            return c
    raise NotFound(f"unknown connector {named(cid)}")


@page
async def connectors_page(request: Request) -> Response:
    """``GET /connectors``: every connector with its state and tool counts; the add-a-server form."""
    svc = svc_of(request)
    conns = [connector_view(svc, c["id"]) for c in svc.connectors.list()]
    return render(request, "connectors.html", connectors=conns)


@page
async def sheet(request: Request) -> Response:
    """``GET /connectors/{id}``: the connector sheet."""
    svc = svc_of(request)
    cid = request.path_params["id"]
    conn = connector_view(svc, cid)
    tools = [tool_view(svc, r) for r in svc.tools.list(cid)]
    reads_off = sum(1 for t in tools if t["class"] == "read" and not t["enabled"] and not t["changed"]
                    and not t["hidden_characters"] and not t["look_alike_name"])
    # spec §2.4: a class suggested for each unknown tool; nothing changes until the person accepts.
    suggestions = {s["name"]: s for s in svc.suggestions.list(cid)}
    for t in tools:
        t["suggested"] = suggestions.get(t["name"])
    bulk = [s for s in suggestions.values() if s["suggestion"] in ("write", "destructive")]
    return render(request, "connector.html", conn=conn, tools=tools, classes=CLASSES, reads_off=reads_off,
                  bulk=bulk)


# -- tools ------------------------------------------------------------------------------------


def _sheet_of(svc: Service, name: str) -> str:
    return f"/connectors/{svc.tools.get(name).connector}#tool-{name}"


@action
async def tool_class(request: Request, form: dict[str, str]) -> Response:
    """``POST /tools/{name}/class`` ``class=read|write|destructive|reset``."""
    svc = svc_of(request)
    name = request.path_params["name"]
    word = form.get("class", "")
    row = svc.tools.reset_class(name) if word == "reset" else svc.tools.set_class(name, word)
    return redirect(_sheet_of(svc, name), ("ok", f"{name}: class {row.tool_class.value} ({row.class_source.value})."))


@action
async def tool_switch(request: Request, form: dict[str, str]) -> Response:
    """``POST /tools/{name}/switch`` ``on=1|0``."""
    svc = svc_of(request)
    name = request.path_params["name"]
    on = form.get("on") == "1"
    if on and form.get("seen"):
        # The sheet showed this definition with its hidden characters escaped (spec §4.7).
        svc.tools.acknowledge_hidden(name, form["seen"])
    svc.tools.set_enabled([name], on)
    return redirect(_sheet_of(svc, name), ("ok", f"{name} switched {'on' if on else 'off'}."))


@action
async def tool_suggestion(request: Request, form: dict[str, str]) -> Response:
    """``POST /tools/{name}/suggestion`` ``class=``: accept one tool's suggested class (the only way for
    ``read``), as the sheet showed it."""
    svc = svc_of(request)
    name = request.path_params["name"]
    s = svc.suggestions.accept(name, form.get("class", ""))
    return redirect(_sheet_of(svc, name), ("ok", f"{name}: class {s['suggestion']} (set by you)."))


@action
async def accept_suggestions(request: Request, form: dict[str, str]) -> Response:
    """``POST /connectors/{id}/suggestions``: accept the write and destructive suggestions the sheet showed
    (fields ``s:<tool name>`` = the class shown); a read suggestion is never taken in bulk."""
    svc = svc_of(request)
    cid = request.path_params["id"]
    shown = {k.removeprefix("s:"): v for k, v in form.items() if k.startswith("s:")}
    done = svc.suggestions.accept_all(cid, shown)
    text = (f"Accepted {len(done)} suggested class(es): " + ", ".join(f"{s['name']} {s['suggestion']}" for s in done)
            + "." if done else "No suggestion was accepted (none left as shown).")
    return redirect(f"/connectors/{cid}", ("ok", text))


@action
async def tool_review(request: Request, form: dict[str, str]) -> Response:
    """``POST /tools/{name}/review``: accept the changed definition (``palui tools review``)."""
    svc = svc_of(request)
    name = request.path_params["name"]
    row = svc.tools.review(name, expected=form.get("fingerprint") or "missing")
    return redirect(_sheet_of(svc, name), ("ok", f"{name}: new definition accepted; it is "
                                                 f"{'on' if row.enabled else 'off'}, class {row.tool_class.value}."))


# -- connectors -------------------------------------------------------------------------------


@action
async def connector_action(request: Request, form: dict[str, str]) -> Response:
    """``POST /connectors/{id}/enable-read|trust|untrust|private|unprivate|refresh|enable|disable|remove``."""
    svc = svc_of(request)
    cid, verb = request.path_params["id"], request.path_params["action"]
    here = f"/connectors/{cid}"
    if verb == "enable-read":
        names = [r.name for r in svc.tools.enable_read(cid)]
        text = (f"Switched on {len(names)} read tool(s): {', '.join(names)}." if names
                else "No read tool was off (tools flagged for review stay off).")
        warning = svc.tools.budget_warning()
        if warning:
            return redirect(here, ("error", f"{text} Warning: {warning}."))
        return redirect(here, ("ok", text))
    if verb in ("trust", "untrust"):
        svc.tools.set_trusted(cid, None, verb == "trust")
        return redirect(here, ("ok", f"{cid} is {'now' if verb == 'trust' else 'no longer'} a trusted source: its "
                                     f"results {'no longer' if verb == 'trust' else 'again'} taint a turn."))
    if verb in ("private", "unprivate"):
        svc.tools.set_private(cid, verb == "private")
        return redirect(here, ("ok", f"{cid}: its results are {'now' if verb == 'private' else 'no longer'} counted as "
                                     "your private data (Rule of Two)."))
    if verb == "refresh":
        r = await svc.connectors.refresh_async(cid)
        flagged = r["changed"] + r["tightened"] + r["loosening_held"]
        text = f"{cid}: {r['state']}; {len(r['added'])} new tool(s)"
        text += f", flagged for review: {', '.join(flagged)}." if flagged else "."
        for c in r.get("class_tightened", []):
            text += f" The server tightened {c['tool']} from {c['from']} to {c['to']}."
        return redirect(here, ("ok", text))
    if verb in ("enable", "disable"):
        svc.connectors.set_enabled(cid, verb == "enable")
        return redirect(here, ("ok", f"{cid} {verb}d."))
    if verb == "remove":
        svc.connectors.remove(cid)
        return redirect("/connectors", ("ok", f"{cid} removed, with its tools and secrets."))
    if verb == "sign-in":
        public = svc.settings.serve.public_url
        base = public.rstrip("/") if public else f"{request.url.scheme}://{request.url.netloc}"
        url = await svc.signin.start_web(cid, f"{base}/oauth/callback")
        if url is None:
            return redirect(here, ("ok", f"{cid}: connected; no sign-in was needed."))
        # The authorization server's page (another origin): the browser comes back to /oauth/callback.
        return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)
    if verb == "sign-out":
        out = await svc.signin.logout_async(cid)
        return redirect(here, ("ok", f"{cid}: signed out; its tokens are deleted (revocation: {out['revocation']})."))
    raise NotFound(f"unknown action {named(verb)}")


@page
async def oauth_callback(request: Request) -> Response:
    """``GET /oauth/callback``: the authorization server sent the browser back. The Guard let it in only
    with this service's session cookie; the ``state`` must be one of a sign-in this page started."""
    r = await svc_of(request).signin.complete_web(str(request.url))
    return redirect(f"/connectors/{r['id']}", ("ok", f"{r['id']}: signed in and connected."))


def _pairs(text: str, what: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (values taken literally: they are secrets, never expanded or echoed)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what}: each line must be KEY=VALUE (line starting {key.strip()[:20]!r})")
        out[key.strip()] = value.strip()
    return out


def server_config(form: dict[str, str]) -> ServerConfig:
    """The :class:`ServerConfig` of the add form (stdio command line or URL). Raises UsageError."""
    transport = form.get("transport", "stdio")
    timeout = form_as(ServerForm, form).timeout
    if transport == "http":
        return ServerConfig("http", url=form.get("url", "").strip(), headers=_pairs(form.get("headers", ""), "headers"),
                            timeout_seconds=timeout)
    try:
        argv = shlex.split(form.get("command", ""))
    except ValueError as e:
        raise UsageError(f"the command line cannot be read: {e}") from None
    if not argv:
        raise UsageError("a stdio MCP server needs a command line, e.g. npx -y @modelcontextprotocol/server-memory")
    return ServerConfig("stdio", command=argv[0], args=tuple(argv[1:]), cwd=form.get("cwd", "").strip() or None,
                        env=_pairs(form.get("env", ""), "environment"), timeout_seconds=timeout)


@action
async def add_server(request: Request, form: dict[str, str]) -> Response:
    """``POST /connectors/add``: connect an MCP server once, store its tools (off), open its sheet."""
    svc = svc_of(request)
    config = server_config(form)
    r = await svc.connectors.add_async(form.get("name", "").strip(), config, enable_read=form.get("enable_read") == "1")
    if r["state"] == "error: sign in again":
        return redirect(f"/connectors/{r['id']}", ("ok", f"{r['id']}: added; the server wants you to sign in: "
                                                         "press “Sign in”."))
    text = f"{r['id']}: connected, {len(r['tools'])} tool(s)"
    text += f", {len(r['enabled'])} read tool(s) switched on." if r["enabled"] else "; new tools start off."
    return redirect(f"/connectors/{r['id']}", ("ok", text))


def routes() -> list[Route]:
    return [
        Route("/connectors", connectors_page),
        Route("/connectors/add", add_server, methods=["POST"]),
        RawPathRoute("/connectors/{id}", sheet),
        RawPathRoute("/connectors/{id}/suggestions", accept_suggestions, methods=["POST"]),
        RawPathRoute("/connectors/{id}/{action}", connector_action, methods=["POST"]),
        RawPathRoute("/tools/{name}/class", tool_class, methods=["POST"]),
        RawPathRoute("/tools/{name}/switch", tool_switch, methods=["POST"]),
        RawPathRoute("/tools/{name}/review", tool_review, methods=["POST"]),
        Route("/oauth/callback", oauth_callback),
        RawPathRoute("/tools/{name}/suggestion", tool_suggestion, methods=["POST"]),
    ]

