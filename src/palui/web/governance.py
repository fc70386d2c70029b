"""The Governance page (spec §5.8): how much asking costs the person, and what to do about it.

``GET /governance?days=N`` renders :meth:`ReportPart.build` (the same dict as ``palui report --json``):
asks per day, answers and the median time to answer, what caused the asks, the tools asked most, job
turns that waited, calls refused as not offered, conversations tainted per connector, and the
suggestions, each with the one command that acts on it (the page runs none of them); and the standing approvals
(spec §5.9, ``palui rules list``), each with a Remove button (``POST /governance/rules/{id}/remove``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from palui.server.raw_path import RawPathRoute
from palui.web.base import action, page, redirect, render, svc_of
from palui.web.forms import GovernanceQuery, form_as

DAY_CHOICES = (7, 30, 90)


@page
async def governance_page(request: Request) -> Response:
    """``GET /governance?days=7|30|90`` (any 1–366 is accepted)."""
    days = form_as(GovernanceQuery, request.query_params).days
    svc = svc_of(request)
    r = svc.report.build(days)
    peak = max([d["asks"] for d in r["asks"]["per_day"]] + [1])
    bars = [{**d, "step": -(-20 * d["asks"] // peak) * 5} for d in r["asks"]["per_day"]]  # 0–100 in steps of 5
    return render(request, "governance.html", r=r, bars=bars, choices=DAY_CHOICES, rules=svc.approvals.rules.list())


@action
async def remove_rule(request: Request, form: dict[str, str]) -> Response:
    """``POST /governance/rules/{id}/remove`` (CSRF field): the person removes a standing approval (spec §5.9)."""
    r = svc_of(request).approvals.rules.remove(request.path_params["id"], "web")
    return redirect("/governance#standing", ("ok", f"Removed {r['id']}: {r['tool']} asks again in {r['context']}."))


def routes() -> list[Route]:
    return [Route("/governance", governance_page),
            RawPathRoute("/governance/rules/{id}/remove", remove_rule, methods=["POST"])]
