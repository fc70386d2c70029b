"""The service's trigger routes: inbound webhooks, jobs run now, job and webhook listings (spec §8).

A front end: it reaches Palui only through the service's door (:func:`palui.server.endpoint.service_of`).
The ``/api/…`` routes are operations of :data:`API` (:mod:`palui.server.api`), in the OpenAPI document;
``/hooks/…`` is not (a sender's own format, authenticated by its signature).

Routes:

- ``POST /hooks/{id}`` — an inbound webhook delivery. Public in the Guard (no access
  token): the delivery authenticates itself (:mod:`palui.triggers.webhooks`: a body HMAC,
  Standard Webhooks or a bearer secret). Answers 202 ``{"status":"accepted","turn","turn_status"}``
  (``turn_status`` ``queued`` with ``queued_reason`` while a cap or the webhook share of the
  hourly runs holds it, spec §6.6), 200 ``{"status":"duplicate","turn"}``,
  or ``{"error"}`` with 404 (unknown id), 413 (body over 262,144 bytes), 401 (bad or
  missing authentication), 429 (over the webhook's rate, with ``Retry-After``).
- ``GET /api/jobs``, ``GET /api/webhooks`` — as ``palui jobs list --json`` / ``webhooks list --json``.
- ``POST /api/jobs/{name}/run`` ``{"stream"}`` — run a job now (``palui jobs run``): the turn
  result, or with ``stream`` NDJSON events ending with ``{"type":"result",…}``; 400 with
  ``{"error"}`` when a cap refuses the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from palui.errors import WebhookRefused
from palui.results import Job, StreamLine, TurnResult, Webhook
from palui.server.api import Operations
from palui.server.endpoint import service_of
from palui.server.inputs import RunJobBody
from palui.server.raw_path import RawPathRoute
from palui.server.turn_stream import Events, stream_or_wait

if TYPE_CHECKING:
    from palui.results import DeliveryReceipt
    from palui.service.api import Service
    from palui.service.turns import Launched

#: The triggers' operations of the JSON API.
API = Operations()


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
    svc = service_of(request)
    hook_id = request.path_params["hook"]
    try:
        if not svc.webhooks.exists(hook_id):  # before reading the body
            raise WebhookRefused(404, "unknown webhook")
        raw = await read_limited(request, svc.webhooks.MAX_BODY_BYTES)
        result = svc.webhooks.receive(hook_id, raw, request.headers)
    except WebhookRefused as e:
        headers = {"Retry-After": str(e.retry_after)} if e.retry_after else None
        return JSONResponse({"error": str(e)}, status_code=e.status, headers=headers)
    if result["status"] == "duplicate":
        return JSONResponse(result, status_code=200)
    launched = svc.turns.launch(result["turn"])
    running = launched.task is not None and not (launched.cap or launched.behind)
    # ``result`` is a Delivery, which has no ``queued_reason``: added below while a cap holds the turn.
    out = cast("DeliveryReceipt", {**result, "turn_status": "running" if running else "queued"})
    if launched.cap:
        out["queued_reason"] = launched.cap
    return JSONResponse(out, status_code=202)


@API.get("/api/jobs", answer=list[Job], summary="the scheduled jobs, as palui jobs list --json",
         links={"run_job": {"operationId": "run_job", "parameters": {"name": "$response.body#/0/name"}}})
async def list_jobs(svc: Service) -> list[Job]:
    return svc.jobs.list()


@API.get("/api/webhooks", answer=list[Webhook], summary="the inbound webhooks, as palui webhooks list --json")
async def list_webhooks(svc: Service) -> list[Webhook]:
    return svc.webhooks.list()


@API.post("/api/jobs/{name}/run", body=RunJobBody, answer=TurnResult, stream=StreamLine, refusals=(404,),
          summary="run a job now (outside its schedule): its turn's result")
async def run_job(svc: Service, name: str, body: RunJobBody) -> Response:
    stream = body.stream
    launched: Launched | None = None
    events: Events | None = None
    subscribed = ""

    def launch(turn_id: str) -> str | None:
        nonlocal launched, events, subscribed
        if stream:
            events, subscribed = svc.live.subscribe(turn_id), turn_id
        launched = svc.turns.launch(turn_id)
        return launched.cap

    try:
        tid = svc.jobs.start_now(name, launch)
    except BaseException:
        if events is not None:
            svc.live.unsubscribe(subscribed, events)
        raise
    return await stream_or_wait(svc, tid, launched, stream, events)


def routes() -> list[BaseRoute]:
    return [RawPathRoute("/hooks/{hook}", receive, methods=["POST"]), *API.routes()]

