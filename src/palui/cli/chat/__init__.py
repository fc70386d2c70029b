"""``palui chat``: the terminal chat (spec §8.2).

Input stays live while a turn runs (``/stop``, ``/status`` act at once; other text waits as the
next turn), answers stream in, approvals follow the truth wherever they are answered, and the chat
survives the live service going away. The session is in :mod:`~palui.cli.chat.session`, the
screens (a terminal through prompt_toolkit, or piped standard input) in
:mod:`~palui.cli.chat.screen`, how a turn shows in :mod:`~palui.cli.chat.view`, and where turns run
in :mod:`~palui.cli.chat.backends`.

``--resume`` continues the newest conversation started in the terminal, ``--conversation ID`` any
one (``palui conversations list`` shows them), with the model its newest turn used unless ``--model``
names another.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from palui.cli.common import CLEAN, app, fail, service
from palui.cli.turns import check_model
from palui.errors import NO_MODEL_HELP, NotFound, PaluiError, UsageError
from palui.text.display import named

if TYPE_CHECKING:
    from palui.cli.chat.door import ChatDoor
    from palui.results import Conversation
    from palui.server.discovery import ServiceInfo
    from palui.service.api import Service


def _conversation(svc: Service, conversation: str | None, resume: bool) -> tuple[str | None, Conversation | None]:
    """(the conversation to continue, it as shown) or (None, None) for a new one."""
    if conversation and resume:
        raise UsageError("give --resume or --conversation ID, not both")
    if resume:
        newest = svc.conversations.list(1, channel="terminal")
        if not newest:
            click.echo("(no earlier conversation started in the terminal: a new one starts)")
            return None, None
        conversation = newest[0]["id"]
    if conversation:
        try:
            found = svc.conversations.get(conversation)  # a unique prefix of the id is enough
            return found["id"], found
        except NotFound:
            fail(f"unknown conversation {named(conversation)} (see: palui conversations list)")
    return None, None


async def _main(svc: Service, info: ServiceInfo | None, spec: str | None, conversation: str | None,
                resumed: Conversation | None) -> None:
    from palui.cli.chat.backends import LocalBackend, RemoteBackend
    from palui.cli.chat.screen import make_screen
    from palui.cli.chat.session import ChatSession

    backend: ChatDoor = RemoteBackend(info, spec, svc.settings) if info else \
        LocalBackend(svc, spec)
    if spec is None:  # the live service's own model
        spec = (await backend.status()).get("model")
        if not spec:
            await backend.close()
            raise PaluiError("the running service has no model configured. " + NO_MODEL_HELP)
        backend.model = None  # the service uses its own; this chat shows it
    cid = conversation or await backend.new_conversation()
    with make_screen() as screen:
        await ChatSession(svc, backend, screen, spec, cid, resumed).run()


@app.command("chat")
@click.option("--model", type=CLEAN, help="Model string, e.g. script:demo.json.")
@click.option("--conversation", metavar="ID", help="Continue this conversation (palui conversations list).")
@click.option("--resume", is_flag=True, help="Continue the newest conversation started in the terminal.")
def chat_cmd(model: str | None, conversation: str | None, resume: bool) -> None:
    """Talk to Palui in the terminal. Commands: /stop /status /why /approve /deny /answer ID /new /help /quit."""
    from palui.server.discovery import find_service

    svc = service()
    info = find_service(svc.settings)
    cid, resumed = _conversation(svc, conversation, resume)
    # A conversation taken up goes on with the model it was run with (its newest turn's), unless --model says
    # another: without a configured model, resuming said "No model is configured".
    spec = check_model(model or (resumed["model"] if resumed else None), svc, remote=info is not None)
    # here: `palui --help` loads this module and does not pay for asyncio (docs/decisions/0085-a-light-cli-start.md)
    import asyncio

    asyncio.run(_main(svc, info, spec, cid, resumed))
    sys.exit(0)
