"""The service's trigger routes: inbound webhooks, jobs run now, job and webhook listings (SPEC §8).

A front end: it reaches Palui only through the service (``request.app.state.svc``).

Routes:

- ``POST /hooks/{id}`` — an inbound webhook delivery. Public in the Guard (no access
  token): the delivery authenticates itself (:mod:`palui.triggers.webhooks`: a body HMAC,
  Standard Webhooks or a bearer secret). Answers 202 ``{"status":"accepted","turn","turn_status"}``
  (``turn_status`` ``queued`` with ``queued_reason`` while a cap or the webhook share of the
  hourly runs holds it, issue 10 §3), 200 ``{"status":"duplicate","turn"}``,
  or ``{"error"}`` with 404 (unknown id), 413 (body over 262,144 bytes), 401 (bad or
  missing authentication), 429 (over the webhook's rate, with ``Retry-After``).
- ``GET /api/jobs``, ``GET /api/webhooks`` — as ``palui jobs list --json`` / ``webhooks list --json``.
- ``POST /api/jobs/{name}/run`` ``{"stream"}`` — run a job now (``palui jobs run``): the turn
  result, or with ``stream`` NDJSON events ending with ``{"type":"result",…}``; 400 with
  ``{"error"}`` when a cap refuses the run.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from palui.errors import WebhookRefused
from palui.server.routes import _stream_or_wait, body, endpoint


async def read_limited(request: Request, limit: int) -> bytes:
    """The raw body, reading at most ``limit`` + 1 bytes whatever ``Content-Length`` says.

    Raises WebhookRefused(413) as soon as the body is known to be over ``limit`` bytes.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise WebhookRefused(413, f"the body is over {limit} bytes")
    buf = bytearray()
    async for chunk in request.stream():
        buf.extend(chunk)
        if len(buf) > limit:
            raise WebhookRefused(413, f"the body is over {limit} bytes")
    return bytes(buf)


async def receive(request: Request) -> Response:
    svc = request.app.state.svc
    hook_id = request.path_params["hook"]
    try:
        if not svc.webhook_exists(hook_id):  # before reading the body
            raise WebhookRefused(404, "unknown webhook")
        raw = await read_limited(request, svc.WEBHOOK_MAX_BODY_BYTES)
        result = svc.receive_webhook(hook_id, raw, request.headers)
    except WebhookRefused as e:
        headers = {"Retry-After": str(e.retry_after)} if e.retry_after else None
        return JSONResponse({"error": str(e)}, status_code=e.status, headers=headers)
    if result["status"] == "duplicate":
        return JSONResponse(result, status_code=200)
    launched = svc.launch(result["turn"])
    running = launched.task is not None and not (launched.cap or launched.behind)
    out: dict[str, Any] = {**result, "turn_status": "running" if running else "queued"}
    if launched.cap:
        out["queued_reason"] = launched.cap
    return JSONResponse(out, status_code=202)


@endpoint
async def list_jobs(request, svc):
    return JSONResponse(svc.jobs())


@endpoint
async def list_webhooks(request, svc):
    return JSONResponse(svc.webhooks())


@endpoint
async def run_job(request, svc):
    data = await body(request)
    stream = bool(data.get("stream"))
    held: dict[str, Any] = {"launched": None, "q": None}

    def launch(turn_id: str) -> str | None:
        if stream:
            held["q"] = svc.subscribe(turn_id)
        held["launched"], held["turn"] = svc.launch(turn_id), turn_id
        return held["launched"].cap

    try:
        tid = svc.start_job_now(request.path_params["name"], launch)
    except BaseException:
        if held["q"] is not None:
            svc.unsubscribe(held["turn"], held["q"])
        raise
    return await _stream_or_wait(svc, tid, held["launched"], stream, held["q"])


def routes() -> list[Route]:
    return [
        Route("/hooks/{hook}", receive, methods=["POST"]),
        Route("/api/jobs", list_jobs),
        Route("/api/jobs/{name}/run", run_job, methods=["POST"]),
        Route("/api/webhooks", list_webhooks),
    ]

