"""The Governance page (spec §5.8): how much asking costs the person, and what to do about it.

``GET /governance?days=N`` renders :meth:`ReportPart.build` (the same dict as ``palui report --json``):
asks per day, answers and the median time to answer, what caused the asks, the tools asked most, job
turns that waited, calls refused as not offered, conversations tainted per connector, and the
suggestions, each with the one command that acts on it (the page runs none of them).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from palui.web.base import page, render, svc_of
from palui.web.forms import GovernanceQuery, form_as

DAY_CHOICES = (7, 30, 90)


@page
async def governance_page(request: Request) -> Response:
    """``GET /governance?days=7|30|90`` (any 1–366 is accepted)."""
    days = form_as(GovernanceQuery, request.query_params).days
    r = svc_of(request).report.build(days)
    peak = max([d["asks"] for d in r["asks"]["per_day"]] + [1])
    bars = [{**d, "step": -(-20 * d["asks"] // peak) * 5} for d in r["asks"]["per_day"]]  # 0–100 in steps of 5
    return render(request, "governance.html", r=r, bars=bars, choices=DAY_CHOICES)


def routes() -> list[Route]:
    return [Route("/governance", governance_page)]
