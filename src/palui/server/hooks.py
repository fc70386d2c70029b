"""The service's trigger routes and the job scheduler (SPEC §8).

Routes:

- ``POST /hooks/{id}`` — an inbound webhook delivery. Public in the Guard (no access
  token): the delivery authenticates itself (:mod:`palui.triggers.webhooks`). Answers
  202 ``{"status":"accepted","turn","turn_status"}``, 200 ``{"status":"duplicate","turn"}``,
  or ``{"error"}`` with 404 (unknown id), 413 (body over 262,144 bytes), 401 (bad or
  missing authentication), 429 (over the webhook's rate, with ``Retry-After``).
- ``GET /api/jobs``, ``GET /api/webhooks`` — as ``palui jobs list --json`` / ``webhooks list --json``.
- ``POST /api/jobs/{name}/run`` ``{"stream"}`` — run a job now (``palui jobs run``): the turn
  result, or with ``stream`` NDJSON events ending with ``{"type":"result",…}``; 400 with
  ``{"error"}`` when a cap refuses the run.

:func:`setup` registers the scheduler's tick in the runtime.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from palui.server.api import _stream_or_wait, body, endpoint
from palui.triggers import clock
from palui.triggers import webhooks as wh
from palui.triggers.scheduler import Scheduler
from palui.types import TurnStatus


async def read_limited(request: Request, limit: int) -> bytes:
    """The raw body, reading at most ``limit`` + 1 bytes whatever ``Content-Length`` says.

    Raises WebhookRefused(413) as soon as the body is known to be over ``limit`` bytes.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise wh.WebhookRefused(413, f"the body is over {limit} bytes")
    buf = bytearray()
    async for chunk in request.stream():
        buf.extend(chunk)
        if len(buf) > limit:
            raise wh.WebhookRefused(413, f"the body is over {limit} bytes")
    return bytes(buf)


async def receive(request: Request) -> Response:
    rt = request.app.state.runtime
    hook_id = request.path_params["hook"]
    try:
        if wh.by_id(rt.svc.db, hook_id) is None:  # before reading the body
            raise wh.WebhookRefused(404, "unknown webhook")
        raw = await read_limited(request, wh.MAX_BODY_BYTES)
        result = rt.svc.receive_webhook(hook_id, raw, request.headers)
    except wh.WebhookRefused as e:
        headers = {"Retry-After": str(e.retry_after)} if e.retry_after else None
        return JSONResponse({"error": str(e)}, status_code=e.status, headers=headers)
    if result["status"] == "duplicate":
        return JSONResponse(result, status_code=200)
    task, cap = rt.start_turn(result["turn"], (TurnStatus.QUEUED,))
    out: dict[str, Any] = {**result, "turn_status": "running" if task else "queued"}
    if cap:
        out["queued_reason"] = cap
    return JSONResponse(out, status_code=202)


@endpoint
async def list_jobs(request, rt):
    return JSONResponse(rt.svc.jobs())


@endpoint
async def list_webhooks(request, rt):
    return JSONResponse(rt.svc.webhooks())


@endpoint
async def run_job(request, rt):
    data = await body(request)
    stream = bool(data.get("stream"))
    held: dict[str, Any] = {"task": None, "q": None}

    def launch(turn_id: str) -> str | None:
        if stream:
            held["q"] = rt.subscribe(turn_id)
        task, cap = rt.start_turn(turn_id, (TurnStatus.QUEUED,))
        held["task"], held["turn"] = task, turn_id
        return cap

    try:
        tid = rt.svc.start_job_now(request.path_params["name"], launch)
    except BaseException:
        if held["q"] is not None:
            rt.unsubscribe(held["turn"], held["q"])
        raise
    return await _stream_or_wait(rt, tid, held["task"], stream, None, held["q"])


def routes() -> list[Route]:
    return [
        Route("/hooks/{hook}", receive, methods=["POST"]),
        Route("/api/jobs", list_jobs),
        Route("/api/jobs/{name}/run", run_job, methods=["POST"]),
        Route("/api/webhooks", list_webhooks),
    ]


def setup(runtime) -> None:
    """Register the job scheduler's tick. A bad ``PALUI_TEST_CLOCK`` refuses to start (ConfigError)."""
    clock.now()
    runtime.tickers.append(Scheduler(runtime).tick)
