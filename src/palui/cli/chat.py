"""``palui chat``: the terminal chat (SPEC §8), with inline approvals.

One event loop for the whole session, so MCP servers started by one turn are reused
by the next. Ctrl-C during a turn stops it (like ``/stop``); Ctrl-D or ``/quit`` leaves.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import typer

from palui.cli import render
from palui.cli.common import app, service
from palui.cli.turns import check_model, live_service, print_status, questions_for
from palui.errors import NO_MODEL_HELP, PaluiError
from palui.text.commands import CommandError, answer_args, help_text, parse
from palui.text.elicitation import parse_pairs


class LocalBackend:
    """Turns run in this process."""

    def __init__(self, svc) -> None:
        self.svc = svc
        self.questions = questions_for(svc, None)

    def on_event(self, e):
        render.event(e)
        self.questions.on_event(e)

    async def send(self, text, conversation, model):
        return await self.svc.send(text, conversation=conversation, model=model, on_event=self.on_event)

    async def answer(self, aid, approve):
        return await self.svc.answer_and_resume(aid, approve, "cli", on_event=self.on_event)

    def elicitation(self, eid):
        return self.svc.elicitation(eid)

    async def answer_elicitation(self, eid, action, content):
        return await self.svc.answer_elicitation_and_resume(eid, action, content, "cli", on_event=self.on_event)

    async def resume_ready(self):
        return await self.svc.resume_ready(on_event=render.event)

    def stop(self, conversation):
        return self.svc.stop(conversation=conversation)

    def status(self):
        return self.svc.status()

    def new_conversation(self):
        return self.svc.new_conversation()

    async def close(self):
        await self.svc.close()


class RemoteBackend:
    """Turns run in the live service on this PALUI_HOME (SPEC §8); events stream back."""

    def __init__(self, client) -> None:
        self.client = client
        self.questions = questions_for(None, client)

    def on_event(self, e):
        render.event(e)
        self.questions.on_event(e)  # in the stream's thread: a blocking prompt is fine there

    async def send(self, text, conversation, model):
        return await asyncio.to_thread(self.client.run, text, conversation=conversation, model=model,
                                       on_event=self.on_event)

    async def answer(self, aid, approve):
        return await asyncio.to_thread(self.client.answer, aid, approve, self.on_event)

    def elicitation(self, eid):
        return self.client.get(f"/api/elicitations/{eid}")

    async def answer_elicitation(self, eid, action, content):
        return await asyncio.to_thread(self.client.answer_elicitation, eid, action, content, self.on_event)

    async def resume_ready(self):
        return []  # the service resumes answered turns itself

    def stop(self, conversation):
        return self.client.post("/api/stop", {"conversation": conversation})["stopped"]

    def status(self):
        return self.client.get("/api/status")

    def new_conversation(self):
        return self.client.post("/api/conversations")["conversation"]

    async def close(self):
        self.client.close()


class ChatSession:
    def __init__(self, backend, model: str, conversation: str | None) -> None:
        self.backend = backend
        self.model = model
        self.conversation = conversation or backend.new_conversation()
        self.task: asyncio.Task | None = None

    async def ask(self, prompt: str) -> str | None:
        try:
            return await asyncio.to_thread(input, prompt)
        except EOFError:
            return None

    def on_sigint(self) -> None:
        if self.task and not self.task.done():
            self.task.cancel()
        else:
            typer.echo("\n(/quit or Ctrl-D to leave)")

    async def turn(self, coro) -> dict:
        self.task = asyncio.ensure_future(coro)
        try:
            return await self.task
        except asyncio.CancelledError:
            # In-process the runner marked the turn stopped; a remote turn is stopped through the service.
            try:
                self.backend.stop(self.conversation)
            except PaluiError:
                pass
            return {"status": "stopped", "answer": None, "pending_approvals": []}
        finally:
            self.task = None

    async def show(self, r: dict) -> None:
        render.outcome(r, in_chat=True)
        if r.get("pending_elicitations"):  # a 2026-07-28 server's questions: asked here (SPEC §7)
            r = await self.backend.questions.settle(r, self.backend.answer_elicitation)
            render.outcome(r, in_chat=True)
        pending = r.get("pending_approvals") or []
        while r.get("status") == "awaiting_approval" and pending:
            a = pending[0]
            line = await self.ask(f"approve {a['id']}? [y/n] ")
            if line is None:
                return
            word = line.strip().lower()
            if word in ("y", "yes", "n", "no"):
                r = await self.answer(a["id"], word.startswith("y"))
                pending = r.get("pending_approvals") or []
                continue
            if word.startswith("/"):
                await self.command(line)
                return
            typer.echo("answer y or n (or /stop, /deny ID, /approve ID)")

    async def answer(self, aid: str, approve: bool) -> dict:
        try:
            r = await self.turn(self.backend.answer(aid, approve))
        except PaluiError as e:
            typer.echo(f"palui: {e}")
            return {"status": "error"}
        render.outcome(r, in_chat=True)
        return r

    async def command(self, line: str) -> bool:
        """Handle a chat command. Returns False when the session ends."""
        try:
            cmd = parse(line)
        except CommandError as e:
            typer.echo(f"palui: {e}")
            return True
        assert cmd is not None
        if cmd.name == "/quit":
            return False
        if cmd.name == "/help":
            typer.echo(help_text())
        elif cmd.name == "/status":
            s = self.backend.status()
            s["model"] = self.model  # the model this chat uses, which --model may have set
            print_status(s)
        elif cmd.name == "/new":
            self.conversation = self.backend.new_conversation()
            typer.echo(f"new conversation {self.conversation}")
        elif cmd.name == "/stop":
            ids = self.backend.stop(self.conversation)
            typer.echo(f"stopped {', '.join(ids)}" if ids else "nothing to stop")
        elif cmd.name in ("/approve", "/deny"):
            r = await self.answer(cmd.arg, cmd.name == "/approve")
            if r.get("status") == "awaiting_approval":
                await self.show(r)
        elif cmd.name == "/answer":
            try:
                eid, pairs = answer_args(cmd.arg)
                q = self.backend.elicitation(eid)
                content = parse_pairs(q["schema"], pairs) if q["mode"] == "form" else None
                r = await self.turn(self.backend.answer_elicitation(eid, "accept", content))
            except (PaluiError, CommandError, ValueError) as err:
                typer.echo(f"palui: {err}")
                return True
            render.outcome(r, in_chat=True)
            if r.get("status") == "awaiting_approval":
                await self.show(r)
        return True

    async def loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self.on_sigint)
        except (NotImplementedError, RuntimeError):
            pass
        typer.echo(f"Palui chat — model {self.model}, conversation {self.conversation}. /help for commands.")
        for r in await self.backend.resume_ready():
            render.outcome(r, in_chat=True)
        try:
            while True:
                line = await self.ask("you> ")
                if line is None:
                    typer.echo("")
                    break
                if not line.strip():
                    continue
                if line.strip().startswith("/"):
                    if not await self.command(line):
                        break
                    continue
                try:
                    r = await self.turn(self.backend.send(line, self.conversation, self.model))
                except PaluiError as e:
                    typer.echo(f"palui: {e}")
                    continue
                await self.show(r)
        finally:
            await self.backend.close()


@app.command("chat")
def chat_cmd(
    model: str | None = typer.Option(None, "--model", help="Model string, e.g. script:demo.json."),
    conversation: str | None = typer.Option(None, "--conversation", help="Continue this conversation."),
) -> None:
    """Talk to Palui in the terminal. Commands: /stop /status /approve ID /deny ID /answer ID … /new /help /quit."""
    svc = service()
    client = live_service(svc)
    spec = check_model(model, svc, remote=client is not None)
    backend = RemoteBackend(client) if client else LocalBackend(svc)
    if spec is None:  # the live service's own model
        spec = backend.status().get("model")
        if not spec:
            raise PaluiError("the running service has no model configured. " + NO_MODEL_HELP)
    asyncio.run(ChatSession(backend, spec, conversation).loop())
    sys.exit(0)
