"""Status, audit and memories pages (spec §6, §7, §8 ``/status``, §10 audit).

- ``/status``: model, tokens used today against the daily cap, runs in the last hour
  against the hourly cap, paused or not (which cap, until when), connector states,
  pending approvals, and the newest messages of the person's channel (the inbox).
- ``/audit``: the tool-call log, newest first, filtered by tool, decision (verdict),
  origin, tainted and date (a day in the caps time zone).
- ``/memories``: memories and tasks with their provenance; forget and mark trusted.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import date, tzinfo
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from palui.errors import NotFound, UsageError
from palui.server.raw_path import RawPathRoute
from palui.text.status import status_lines
from palui.web.base import _zone, action, page, parse_time, redirect, render, svc_of
from palui.web.forms import MemoryPath, form_as

if TYPE_CHECKING:
    from palui.results import AuditRow

VERDICTS = ("run", "ask", "unavailable", "off")
ORIGINS = ("chat", "job", "webhook", "gateway")
AUDIT_SCAN = 20_000  # rows read for filtering; the log keeps more, the page shows the newest matches
AUDIT_SHOWN = 500


def status_text(s: Mapping[str, Any], zone: tzinfo | None = None) -> str:
    """The ``/status`` answer as plain text (the chat command prints it), times in ``zone``."""
    return "\n".join(status_lines(s, more="/governance", questions="/approvals", zone=zone, now=time.time()))


def meter_step(n: int, cap: int) -> int:
    """How full a cap is, in steps of 5 % (rounded up, so any use shows): 0, 5, …, 100."""
    if cap <= 0:
        return 100
    percent = -(-100 * max(n, 0) // cap)  # ceiling division
    return min(100, -(-percent // 5) * 5)


@page
async def status_page(request: Request) -> Response:
    """``GET /status``: :meth:`StatusPart.get` (the same dict as ``palui status --json``) and the inbox."""
    svc = svc_of(request)
    s = svc.status.get()
    bars = {"tokens": meter_step(s["tokens_today"], int(s["caps"]["daily_tokens"])),
            "runs": meter_step(s["runs_last_hour"], int(s["caps"]["runs_per_hour"]))}
    inbox = list(reversed(svc.notifier.inbox(15)))
    return render(request, "status.html", s=s, bars=bars, inbox=inbox)


def audit_filters(q: Mapping[str, str]) -> dict[str, str]:
    """The audit page's filters from the query string (unknown values refused with UsageError)."""
    f = {k: (q.get(k) or "").strip() for k in ("tool", "verdict", "origin", "tainted", "day", "turn")}
    if f["verdict"] and f["verdict"] not in VERDICTS:
        raise UsageError(f"decision must be one of {', '.join(VERDICTS)}")
    if f["origin"] and f["origin"] not in ORIGINS:
        raise UsageError(f"origin must be one of {', '.join(ORIGINS)}")
    if f["tainted"] and f["tainted"] not in ("yes", "no"):
        raise UsageError("tainted must be yes or no")
    if f["day"]:
        try:
            date.fromisoformat(f["day"])
        except ValueError:
            raise UsageError("date must be YYYY-MM-DD") from None
    return f


def filter_audit(rows: list[AuditRow], f: dict[str, str], tz: tzinfo | None) -> list[AuditRow]:
    """Rows matching every filter: ``tool`` is a substring of the tool name, ``day`` a date in ``tz``."""
    out: list[AuditRow] = []
    for r in rows:
        if f["tool"] and f["tool"].lower() not in (r["tool"] or "").lower():
            continue
        if f["verdict"] and r["verdict"] != f["verdict"]:
            continue
        if f["origin"] and r["origin"] != f["origin"]:
            continue
        if f["tainted"] and r["tainted"] != (f["tainted"] == "yes"):
            continue
        if f["turn"] and r["turn"] != f["turn"]:
            continue
        if f["day"]:
            d = parse_time(r["time"])
            if d is None or d.astimezone(tz).date().isoformat() != f["day"]:
                continue
        out.append(r)
    return out


@page
async def audit_page(request: Request) -> Response:
    """``GET /audit?tool=&verdict=&origin=&tainted=yes|no&day=YYYY-MM-DD&turn=``: newest first."""
    svc = svc_of(request)
    f = audit_filters(request.query_params)
    rows = svc.audit.rows(f["turn"] or None, AUDIT_SCAN)
    matched = filter_audit(rows, f, _zone(request))
    shown = list(reversed(matched))[:AUDIT_SHOWN]
    tools = sorted({r["tool"] for r in rows})
    return render(request, "audit.html", rows=shown, total=len(matched), f=f, tools=tools, verdicts=VERDICTS,
                  origins=ORIGINS, limit=AUDIT_SHOWN)


@page
async def memories_page(request: Request) -> Response:
    """``GET /memories``: the person's memories and tasks with provenance (spec §4, §7)."""
    svc = svc_of(request)
    return render(request, "memories.html", memories=svc.memories.list(200), tasks=svc.memories.tasks("all"))


@action
async def memory_action(request: Request, form: dict[str, str]) -> Response:
    """``POST /memories/{kind}/{id}/forget|trust`` (kind ``memory`` or ``task``)."""
    svc = svc_of(request)
    try:
        ref = form_as(MemoryPath, request.path_params)
    except UsageError:  # a path that names no memory or task, or no action of theirs
        raise NotFound(f"no {request.path_params['kind']} {request.path_params['id']!r}, or no such action") from None
    kind, item, verb = ref.kind, ref.id, ref.action
    fns = {("memory", "forget"): svc.memories.forget, ("memory", "trust"): svc.memories.trust,
           ("task", "forget"): svc.memories.forget_task, ("task", "trust"): svc.memories.trust_task}
    fn = fns.get((kind, verb))
    if fn is None:
        raise NotFound(f"unknown action {kind} {verb}")
    fn(item)
    word = "forgotten" if verb == "forget" else "marked trusted: reading it no longer taints a turn"
    return redirect("/memories", ("ok", f"{kind.capitalize()} {item} {word}."))


def routes() -> list[Route]:
    return [
        Route("/status", status_page),
        Route("/audit", audit_page),
        Route("/memories", memories_page),
        RawPathRoute("/memories/{kind}/{id}/{action}", memory_action, methods=["POST"]),
    ]
