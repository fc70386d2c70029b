"""Jobs and webhooks pages (spec §8): list, add, remove, run a job now; a webhook's URL and
secret shown once, on the page that answers its creation (never again: the list shows
neither the secret nor a way to get it back).

Everything goes through the service's jobs and webhooks parts (``svc.jobs``: ``list``, ``add``, ``remove``,
``start_now``; ``svc.webhooks``: ``list``, ``add``, ``remove``), as ``palui jobs`` and ``palui webhooks`` do.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from palui.errors import UsageError
from palui.server.raw_path import RawPathRoute
from palui.web.base import action, page, redirect, render, svc_of
from palui.web.forms import JobForm, form_as


@page
async def jobs_page(request: Request) -> Response:
    """``GET /jobs``: every job with its schedule, next and last run, tokens today against its cap."""
    svc = svc_of(request)
    jobs = [{**j, "conversation": svc.conversations.of_turn(j["last_turn"])} for j in svc.jobs.list()]
    return render(request, "jobs.html", jobs=jobs, default_cap=svc.settings.caps.job_daily_tokens,
                  paused=svc.brake.jobs_paused())


@action
async def add_job(request: Request, form: dict[str, str]) -> Response:
    """``POST /jobs/add`` ``name, cron, prompt[, token_cap][, tz][, connectors]`` (comma-separated ids)."""
    svc = svc_of(request)
    f = form_as(JobForm, form)
    scope = [c.strip() for c in f.connectors.split(",") if c.strip()]
    j = svc.jobs.add(f.name.strip(), f.cron.strip(), f.prompt, f.token_cap, f.tz.strip() if f.tz else None,
                     scope or None)
    return redirect("/jobs", ("ok", f"Job {j['name']} added ({j['cron']}, {j['tz']}); next run {j['next_run']}."))


@action
async def job_action(request: Request, form: dict[str, str]) -> Response:
    """``POST /jobs/{name}/remove|run``: delete the job, or start one run now (outside the schedule)."""
    svc = svc_of(request)
    name, verb = request.path_params["name"], request.path_params["action"]
    if verb == "remove":
        j = svc.jobs.remove(name)
        return redirect("/jobs", ("ok", f"Job {j['name']} removed (its past results stay)."))
    if verb == "run":
        def launch(turn_id: str) -> str | None:
            return svc.turns.launch(turn_id).cap

        tid = svc.jobs.start_now(name, launch)  # JobRefused (a PaluiError) when a cap refuses
        conv = svc.conversations.of_turn(tid)
        return redirect(f"/chat/{conv}#{tid}" if conv else "/jobs", ("ok", f"Job {name} started: turn {tid}."))
    raise UsageError(f"unknown action {verb!r}")


@page
async def webhooks_page(request: Request) -> Response:
    """``GET /webhooks``: every webhook with its URL and recent deliveries (never its secret)."""
    svc = svc_of(request)
    return render(request, "webhooks.html", hooks=await run_in_threadpool(svc.webhooks.list), created=None)


@action
async def add_webhook(request: Request, form: dict[str, str]) -> Response:
    """``POST /webhooks/add`` ``name``: answered with the page itself, showing the URL and the
    secret this once (no redirect: the secret must not travel in a cookie or a URL)."""
    svc = svc_of(request)
    # In a worker thread: the webhook URL comes from looking up the live service, i.e. an HTTP
    # request to this very process, which must not wait on its own event loop.
    created = await run_in_threadpool(svc.webhooks.add, form.get("name", "").strip())
    return render(request, "webhooks.html", hooks=await run_in_threadpool(svc.webhooks.list), created=created)


@action
async def remove_webhook(request: Request, form: dict[str, str]) -> Response:
    """``POST /webhooks/{name}/remove``: delete the webhook and its secret."""
    h = svc_of(request).webhooks.remove(request.path_params["name"])
    return redirect("/webhooks", ("ok", f"Webhook {h['name']} removed; deliveries to it now get 404."))


def routes() -> list[Route]:
    return [
        Route("/jobs", jobs_page),
        Route("/jobs/add", add_job, methods=["POST"]),
        RawPathRoute("/jobs/{name}/{action}", job_action, methods=["POST"]),
        Route("/webhooks", webhooks_page),
        Route("/webhooks/add", add_webhook, methods=["POST"]),
        RawPathRoute("/webhooks/{name}/remove", remove_webhook, methods=["POST"]),
    ]
