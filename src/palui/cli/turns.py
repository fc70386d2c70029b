"""``palui run``, ``palui approvals …``, ``palui status``, ``palui inbox`` (spec §5, §8, §11).

``palui audit`` is in :mod:`palui.cli.audit`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from palui.cli import render
from palui.cli.common import CLEAN, LIMIT, app, emit_json, fail, group, read_service, service, widenings
from palui.cli.live import live_service, run_async
from palui.errors import ModelConfigError
from palui.text.display import shown, shown_json
from palui.text.prompts import mark_line
from palui.text.status import status_lines
from palui.text.when import expiry, local
from palui.types import shows_text

if TYPE_CHECKING:
    from datetime import tzinfo

    from palui.cli.client import ServiceClient
    from palui.cli.elicitations import TerminalQuestions
    from palui.results import Status, TurnEvent, TurnResult
    from palui.service.api import Service

approvals_app = group("approvals", "Pending approvals: list, show, approve, deny.")

EXIT = {"done": 0, "awaiting_approval": 0, "queued": 0}


def exit_code(status: str) -> int:
    """spec §11: 0 for done, awaiting_approval and queued; 1 otherwise."""
    return EXIT.get(status, 1)


def finish_turn(r: TurnResult, as_json: bool, printer: render.Printer | None = None) -> None:
    """Print a turn's result (JSON, or how it ended after ``printer`` showed its events; without one,
    the answer too) and exit with its status code."""
    if as_json:
        emit_json(r)
    elif printer is not None:
        printer.outcome(r)
    else:
        render.outcome(r)
    raise click.exceptions.Exit(exit_code(r["status"]))


def check_model(model: str | None, svc: Service, as_json: bool = False, remote: bool = False) -> str | None:
    """The model string to use, checked now (a clear error before anything is stored).

    A ``script:`` path is made absolute here, so a live service (another working
    directory) reads the same file. With a live service (``remote``) and no ``--model``,
    the service's own configured model applies: returns None.
    """
    if remote and not model:
        return None
    try:
        spec = svc.turns.check_model(model)
    except ModelConfigError as e:
        if as_json:
            emit_json({"status": "error", "answer": None, "error": str(e), "events": [], "usage": None})
            raise click.exceptions.Exit(1) from None
        fail(str(e))
    return spec


@app.command("run")
@click.argument("message", help="The message for the agent.")
@click.option("--model", type=CLEAN, help="Model string, e.g. script:demo.json.")
@click.option("--conversation", help="Continue this conversation.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run_cmd(message: str, model: str | None, conversation: str | None, as_json: bool) -> None:
    """Run one turn non-interactively and print the answer."""
    svc = service()
    client = live_service(svc)
    spec = check_model(model, svc, as_json, remote=client is not None)
    printer = None if as_json else render.Printer(tz=svc.status.timezone())
    questions = questions_for(svc, client)

    def on_event(e: TurnEvent) -> None:
        if printer:
            printer(e)
        questions.on_event(e)  # a server's question inside an open call: asked on this terminal

    shows_text(on_event, printer is not None)  # --json prints the result at the end: the plain request

    if client:
        import asyncio

        r = client.run(message, conversation=conversation, model=spec, on_event=on_event, channel="cli")
        r = asyncio.run(questions.settle(r, lambda i, a, c: asyncio.to_thread(client.answer_elicitation, i, a, c,
                                                                                on_event)))
    else:
        async def go() -> TurnResult:
            r = await svc.turns.send(message, conversation=conversation, model=spec, on_event=on_event, channel="cli")
            return await questions.settle(
                r, lambda i, a, c: svc.elicitations.answer_and_resume(i, a, c, "cli", on_event))

        r = run_async(svc, go())
    finish_turn(r, as_json, printer)


def questions_for(svc: Service, client: ServiceClient | None) -> TerminalQuestions:
    """The :class:`~palui.cli.elicitations.TerminalQuestions` of this CLI: through the live service, or here."""
    from palui.cli.elicitations import TerminalQuestions

    if client:
        from palui.cli.client import segment

        def path(i: str) -> str:
            return f"/api/elicitations/{segment(i, 'a question id')}"

        return TerminalQuestions(
            lambda i, a, c: client.post(f"{path(i)}/answer", {"action": a, "content": c, "via": "cli"}),
            lambda i: client.get(path(i)), in_loop=False)
    return TerminalQuestions(lambda i, a, c: svc.elicitations.answer(i, a, c, "cli"), svc.elicitations.get,
                             in_loop=True)


@approvals_app.command("list")
@click.option("--all", "all_", is_flag=True, help="Every approval, newest first, a page at a time.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="With --all: approvals per page.")
@click.option("--before", metavar="ID", help="With --all: the page after approval ID (the last one listed).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def approvals_list(all_: bool, limit: int, before: str | None, as_json: bool) -> None:
    """List pending approvals (with --all, every approval: newest first, --limit at a time)."""
    svc = read_service()
    rows = svc.approvals.list("pending") if not all_ else svc.approvals.list(None, limit=limit, before=before)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("no pending approvals" if not all_ else "no approvals")
        return
    tz, now = svc.status.timezone(), time.time()
    for a in rows:
        tool = shown(a["tool"], one_line=True)
        click.echo(f"{a['id']}  {a['status']:<9} {tool} ({a['class']}) {render.exact(a['args'], 200)}")
        when = expiry(a["expires_at"], now, tz) if a["status"] == "pending" else f"answered via {a['answered_via']}" \
            if a["answered_via"] else f"expiry was {local(a['expires_at'], tz)}"
        click.echo(f"    {shown(a['reason'], one_line=True)}; {when}")
        for m in a["untrusted_args"]:
            click.echo(f"    {mark_line(m)}")
    if all_ and len(rows) == limit:
        click.echo(f"older: palui approvals list --all --before {rows[-1]['id']}")


@approvals_app.command("show")
@click.argument("approval_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def approvals_show(approval_id: str, as_json: bool) -> None:
    """One approval with its exact arguments, in full."""
    a = service().approvals.get(approval_id)
    if as_json:
        return emit_json(a)
    click.echo(f"approval {a['id']} ({a['status']}), turn {a['turn']}, origin {a['origin']}")
    click.echo(f"tool: {shown(a['tool'], one_line=True)} ({a['class']}, class from {a['class_source']})")
    click.echo(f"why: {shown(a['reason'], one_line=True)}")
    click.echo(f"created {a['created_at']}, expires {a['expires_at']}")
    click.echo("arguments (exact):")
    click.echo(shown_json(a["args"], indent=2))
    for m in a["untrusted_args"]:
        click.echo(mark_line(m))


def _answer(approval_id: str, approve: bool, as_json: bool, reason: str | None = None, *,
            always: dict[str, str] | None = None, confirm: bool = False, stop: bool = False) -> None:
    svc = service()
    printer = None if as_json else render.Printer(tz=svc.status.timezone())
    client = live_service(svc)
    if client:  # the service answers first: a refusal is an error before any event
        if printer is not None:
            printer.header = f"{approval_id}: {'approved' if approve else 'denied'}"
        r = client.answer(approval_id, approve, printer, reason, always=always, confirm=confirm, stop=stop)
    else:
        def answered(what: str) -> None:  # what the answer became, printed before the turn goes on
            if printer is not None:
                printer.header = f"{approval_id}: {shown(what, one_line=True)}"

        r = run_async(svc, svc.approvals.answer_and_resume(approval_id, approve, "cli", on_event=printer,
                                                           reason=reason, on_answered=answered, always=always,
                                                           confirm=confirm, stop=stop))
    if as_json:
        emit_json(r)
    elif printer is not None:
        printer.outcome(r)


@approvals_app.command("approve")
@click.argument("approval_id")
@click.option("--always", is_flag=True,
              help="Approve, and from now on the same: a standing approval for this call in this context.")
@click.option("--widen", multiple=True, metavar="ARG=HOW",
              help="With --always: widen an argument you saw unmarked: ARG=any, ARG=prefix:TEXT, ARG=one-of:A,B.")
@click.option("--confirm-destructive", is_flag=True,
              help="With --always: confirm it for a destructive or unknown tool (chat only).")
@click.option("--json", "as_json", is_flag=True)
def approvals_approve(approval_id: str, always: bool, widen: tuple[str, ...], confirm_destructive: bool,
                      as_json: bool) -> None:
    """Approve one pending call; the turn resumes here. Refused (exit 1) if expired, answered or unknown."""
    if (widen or confirm_destructive) and not always:
        raise click.UsageError("--widen and --confirm-destructive go with --always")
    _answer(approval_id, True, as_json, always=widenings(widen) if always else None, confirm=confirm_destructive)


@approvals_app.command("deny")
@click.argument("approval_id")
@click.option("--reason", help="Why (told to the model, ≤1,000 chars).")
@click.option("--stop", is_flag=True, help="Deny and stop: the turn's tool use ends; the model answers without tools.")
@click.option("--json", "as_json", is_flag=True)
def approvals_deny(approval_id: str, reason: str | None, stop: bool, as_json: bool) -> None:
    """Deny one pending call; the turn resumes and the model is told (with --reason, why)."""
    _answer(approval_id, False, as_json, (reason or "").strip() or None, stop=stop)


@app.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(as_json: bool) -> None:
    """Model, tokens today against the caps, runs in the last hour, pause, connectors, approvals."""
    svc = read_service()
    client = live_service(svc)
    s: Status = client.get("/api/status") if client else svc.status.get()  # the service's view when one runs
    if as_json:
        return emit_json({**s, "service_running": client is not None})
    print_status(s, svc.status.timezone(), running=client is not None)


def print_status(s: Status, zone: tzinfo | None, running: bool) -> None:
    """``/status`` in the person's zone, saying whether ``palui serve`` runs (without it the chat channels,
    jobs and webhooks wait: ``palui channels list`` says so too)."""
    from palui.text.status import SERVICE_DOWN

    for line in status_lines(s, zone=zone, now=time.time(), service=None if running else SERVICE_DOWN):
        click.echo(line)


@app.command("inbox")
@click.option("--limit", type=LIMIT, default=50)
@click.option("--json", "as_json", is_flag=True)
def inbox_cmd(limit: int, as_json: bool) -> None:
    """The person's channel: answers, job results, webhook summaries, approval requests, notices."""
    rows = service().notifier.inbox(limit)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("inbox is empty")
    tz = service().status.timezone()
    for r in rows:  # in the person's zone, to the second (the stored time is UTC with microseconds)
        click.echo(f"{local(r['time'], tz, '%Y-%m-%d %H:%M:%S')}  [{r['kind']}] {shown(r['text'])}")


@app.command("stop")
@click.option("--conversation", help="Stop this conversation's turn.")
@click.option("--turn", help="Stop this turn.")
@click.option("--all", "every", is_flag=True, help="The emergency brake: stop every running, waiting or queued turn, "
                                                   "pause the jobs until palui jobs resume and the gateway until "
                                                   "palui gateway resume.")
def stop_cmd(conversation: str | None, turn: str | None, every: bool) -> None:
    """Stop a running, waiting or queued turn from another terminal, and cancel its approvals."""
    if every:
        if conversation or turn:
            fail("--all stops everything: give it alone", 2)
        r = service().brake.stop_all("cli")
        click.echo((f"stopped {', '.join(r['stopped'])}" if r["stopped"] else "no turn was running, waiting or queued")
                   + "; jobs paused until palui jobs resume, the gateway until palui gateway resume")
        return
    if not conversation and not turn:
        fail("give --conversation ID, --turn ID or --all", 2)
    ids = service().turns.stop(conversation=conversation, turn=turn)
    click.echo(f"stopped {', '.join(ids)}" if ids else "nothing to stop")
