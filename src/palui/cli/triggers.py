"""``palui jobs …`` and ``palui webhooks …`` (spec §8; docs/triggers.md)."""

from __future__ import annotations

import click

from palui.cli import render
from palui.cli.common import Setting, emit_json, group, read_service, service, table
from palui.cli.live import live_service, run_async
from palui.cli.turns import finish_turn
from palui.text.display import named

jobs_app = group("jobs", "Scheduled jobs: prompts run on a cron schedule by the service.")
webhooks_app = group("webhooks", "Inbound webhooks: signed deliveries summarised with no tools.")
#: What ``webhooks show`` says about replay (spec §8.5).
REPLAY_NOTE = ("A delivery signed over the body alone (X-Palui-Signature, X-Hub-Signature-256) or sent with the "
               "bearer secret can be replayed by anyone who captured it once its record is gone: Palui keeps "
               "those records for retention.days. Only a signed timestamp (Standard Webhooks) bounds replay.")


def _short(text: str, n: int = 50) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@jobs_app.command("add")
@click.argument("name", help="A name for the job.")
@click.option("--cron", required=True, help='Five-field cron expression, e.g. "0 8 * * *", or @daily.')
@click.option("--prompt", required=True, help="The message the job sends to the agent.")
@click.option("--token-cap", type=Setting("caps.job_daily_tokens"), metavar="N",
              help="This job's daily token cap (default and range: caps.job_daily_tokens).")
@click.option("--tz", type=Setting("caps.timezone"), metavar="ZONE",
              help="Time zone of the cron expression (default caps.timezone, else the system zone).")
@click.option("--connector", multiple=True, metavar="ID",
              help="Offer the job only this connector's tools (repeat for more).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def jobs_add(name: str, cron: str, prompt: str, token_cap: int | None, tz: str | None, connector: tuple[str, ...],
             as_json: bool) -> None:
    """Add a scheduled job. It runs while `palui serve` runs; runs missed meanwhile are coalesced into one."""
    j = service().jobs.add(name, cron, prompt, token_cap, tz, list(connector) or None)
    if as_json:
        return emit_json(j)
    scope = f"; only {', '.join(j['connectors'])}" if j["connectors"] else ""
    click.echo(f"job {j['name']} added ({j['cron']}, {j['tz']}{scope}); next run {j['next_run']}")


@jobs_app.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def jobs_list(as_json: bool) -> None:
    """List jobs: schedule, next run, last run and its status, tokens today against the job's cap."""
    rows = read_service().jobs.list()
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("no jobs")
        return
    table(
        [
            [
                j["name"],
                j["cron"],
                j["tz"],
                (j["next_run"] or "")[:16].replace("T", " ")
                + (f" (postponed: {j['postponed_by']})" if j["postponed_by"] else ""),
                (j["last_run"] or "-")[:16].replace("T", " "),
                j["last_status"] or "-",
                f"{j['tokens_today']}/{j['token_cap']}",
                ",".join(j["connectors"]) if j["connectors"] else "all",
                _short(j["prompt"]),
            ]
            for j in rows
        ],
        ["NAME", "CRON", "ZONE", "NEXT RUN", "LAST RUN", "LAST", "TOKENS", "CONNECTORS", "PROMPT"],
    )
    if service().brake.jobs_paused():
        click.echo("jobs are paused by the emergency brake (palui stop --all); palui jobs resume")


@jobs_app.command("resume")
def jobs_resume() -> None:
    """Let the jobs run again after palui stop --all (each from its next scheduled time)."""
    was = service().brake.resume_jobs()
    click.echo("jobs resumed" if was else "jobs were not paused")


@jobs_app.command("remove")
@click.argument("name", help="The job's name.")
def jobs_remove(name: str) -> None:
    """Delete a job (its past turns and results stay)."""
    j = service().jobs.remove(name)
    click.echo(f"job {j['name']} removed")


@jobs_app.command("run")
@click.argument("name", help="The job's name.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn result as JSON.")
def jobs_run(name: str, as_json: bool) -> None:
    """Run a job now (through the live service when one runs on this PALUI_HOME, else here)."""
    svc = service()
    printer = None if as_json else render.Printer(tz=svc.status.timezone())
    client = live_service(svc)
    if client:
        from palui.cli.client import segment

        r = client.stream(f"/api/jobs/{segment(name, 'a job name (see: palui jobs list)')}/run", {}, printer)
    else:
        r = run_async(svc, svc.jobs.run(name, printer))
    finish_turn(r, as_json, printer)


@webhooks_app.command("add")
@click.argument("name", help="A name for the webhook.")
def webhooks_add(name: str) -> None:
    """Create a webhook; prints its URL and its secret, also as a Standard Webhooks `whsec_` secret
    (shown this once only)."""
    h = service().webhooks.add(name)
    click.echo(f"url: {h['url']}")
    click.echo(f"secret: {h['secret']}")
    click.echo(f"standard webhooks secret: {h['whsec']}")
    click.echo(
        "Sign each delivery with HMAC-SHA256 of the body (header X-Palui-Signature: sha256=<hex>, or "
        "GitHub's X-Hub-Signature-256), or as Standard Webhooks (webhook-id, webhook-timestamp, "
        "webhook-signature; give the sender the whsec_ secret), or send the secret as "
        "'Authorization: Bearer <secret>'. Identical bodies signed over the body alone are processed "
        "once while their record is kept (retention.days): a sender that repeats bodies should use Standard "
        "Webhooks, whose signed timestamp also bounds replay (Standard Webhooks delivery ids are kept 24 h). "
        "The secret is not shown again.",
        err=True,
    )


@webhooks_app.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def webhooks_list(as_json: bool) -> None:
    """List webhooks: name, URL, deliveries in the last 24 h (never the secret)."""
    rows = service().webhooks.list()
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("no webhooks")
        return
    table(
        [
            [h["name"], h["url"], str(h["deliveries_24h"]), (h["last_delivery"] or "-")[:19].replace("T", " ")]
            for h in rows
        ],
        ["NAME", "URL", "DELIVERIES 24H", "LAST (UTC)"],
    )


@webhooks_app.command("show")
@click.argument("name", help="The webhook's name (or id).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def webhooks_show(name: str, as_json: bool) -> None:
    """Show one webhook: its URL, deliveries, and how long a replayed delivery is refused (never the secret)."""
    from palui.errors import NotFound

    svc = service()
    found = [h for h in svc.webhooks.list() if name in (h["name"], h["id"])]
    if not found:
        raise NotFound(f"unknown webhook {named(name)} (see: palui webhooks list)")
    h = found[0]
    if as_json:
        return emit_json(h)
    click.echo(f"name: {h['name']}\nurl: {h['url']}\ncreated: {(h['created_at'] or '-')[:19].replace('T', ' ')} UTC")
    click.echo(f"deliveries in the last 24 h: {h['deliveries_24h']}")
    click.echo(f"last delivery: {(h['last_delivery'] or '-')[:19].replace('T', ' ')}")
    click.echo(f"replay: {REPLAY_NOTE} (retention.days = {svc.settings.retention.days})")


@webhooks_app.command("remove")
@click.argument("name", help="The webhook's name.")
def webhooks_remove(name: str) -> None:
    """Delete a webhook and its secret: its URL answers 404 from now on."""
    h = service().webhooks.remove(name)
    click.echo(f"webhook {h['name']} removed")
