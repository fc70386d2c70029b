"""Where ``palui chat``'s turns run: in this process (:class:`LocalBackend`) or in the live service on
this PALUI_HOME (:class:`RemoteBackend`, spec §8). Both offer the same awaitable calls, so the session
does not care which; when the service goes away the session switches to a :class:`LocalBackend`
(the chat survives the service: docs/decisions/0120-a-chat-that-survives-the-service.md). Both
satisfy :class:`~palui.cli.chat.door.ChatDoor`.

Every call raises the service's PaluiError subclasses; a remote call raises
:class:`~palui.cli.client.ServiceGone` when the service cannot be reached or goes away mid-call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from palui.cli.client import AsyncServiceClient, StreamSink, segment
from palui.server.discovery import ServiceInfo

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.results import Approval, Elicitation, ScopeRequest, Status, TurnResult, TurnStoredLine
    from palui.service.api import Service
# answers from the terminal chat are the command line's (docs/decisions/0114-terminal-answers-are-cli.md, one door)
VIA = "cli"
CHANNEL = "terminal"  # conversations the terminal chat starts (palui chat --resume finds them)


class LocalBackend:
    """Turns run in this process: a turn nobody else runs is taken up here (``take_up``)."""

    where = "this process"
    runs_here = True

    def __init__(self, svc: Service, model: str | None) -> None:
        self.svc = svc
        self.model = model

    async def send(self, text: str, conversation: str, on_event: StreamSink) -> TurnResult:
        tid = self.svc.turns.start(text, conversation=conversation, model=self.model, channel=CHANNEL)
        stored: TurnStoredLine = {"type": "turn", "turn": tid, "conversation": conversation}
        on_event(stored)  # as the service's stream says it first
        return await self.follow(tid, 0, on_event)

    async def submit(self, text: str, conversation: str) -> TurnResult:
        """Store a message as the conversation's next turn without waiting for it (spec §8)."""
        tid = self.svc.turns.start(text, conversation=conversation, model=self.model, channel=CHANNEL)
        return self.svc.turns.result(tid, [])

    async def follow(self, turn_id: str, after: int, on_event: StreamSink) -> TurnResult:
        return await self.svc.live.follow(turn_id, after, on_event, take_up=True)

    async def answer(self, approval_id: str, approve: bool, reason: str | None = None, *,
                     always: dict[str, str] | None = None, confirm: bool = False,
                     stop: bool = False) -> Approval | Elicitation | ScopeRequest:
        return self.svc.approvals.answer(approval_id, approve, VIA, reason=reason, always=always, confirm=confirm,
                                         stop=stop)

    async def wait_approval(self, approval_id: str, timeout: float) -> Approval:
        return await self.svc.live.wait_approval(approval_id, timeout)

    async def approval(self, approval_id: str) -> Approval:
        return self.svc.approvals.get(approval_id)

    async def elicitation(self, elicitation_id: str) -> Elicitation:
        return self.svc.elicitations.get(elicitation_id)

    async def answer_elicitation(self, elicitation_id: str, action: str, content: dict[str, Any] | None
                                 ) -> Elicitation:
        """A server's question answered through its door; the session follows (takes up) the turn."""
        return self.svc.elicitations.answer(elicitation_id, action, content, VIA)

    async def stop(self, conversation: str) -> list[str]:
        return self.svc.turns.stop(conversation=conversation)

    async def stop_all(self) -> list[str]:
        """The emergency brake (spec §5.7): every turn stopped, the jobs paused."""
        return self.svc.brake.stop_all("cli")["stopped"]

    async def status(self) -> Status:
        return self.svc.status.get()

    async def new_conversation(self) -> str:
        return self.svc.turns.new_conversation(channel=CHANNEL)

    async def approvals(self) -> list[Approval]:
        return self.svc.approvals.list("pending")

    def alive(self) -> bool:
        return True

    async def close(self) -> None:
        await self.svc.close()


class RemoteBackend:
    """Turns run in the live service; events stream back over its JSON API (its answers have the shapes of
    :mod:`palui.results`, which the API declares: tests/test_api_boundaries.py checks them)."""

    runs_here = False

    def __init__(self, info: ServiceInfo, model: str | None, settings: Settings) -> None:
        self.info = info
        self.client = AsyncServiceClient(info)
        self.model = model
        self.settings = settings
        self.where = f"the service at {info.url}"

    async def send(self, text: str, conversation: str, on_event: StreamSink) -> TurnResult:
        return await self.client.stream("POST", "/api/turns", {
            "message": text, "conversation": conversation, "model": self.model, "channel": CHANNEL,
            "stream": True}, on_event)

    async def submit(self, text: str, conversation: str) -> TurnResult:
        return cast("TurnResult", await self.client.post("/api/turns", {
            "message": text, "conversation": conversation, "model": self.model, "channel": CHANNEL, "start": False}))

    async def follow(self, turn_id: str, after: int, on_event: StreamSink) -> TurnResult:
        tid = segment(turn_id, "a turn id")
        return await self.client.stream("GET", f"/api/turns/{tid}/events?after={int(after)}", None, on_event)

    async def answer(self, approval_id: str, approve: bool, reason: str | None = None, *,
                     always: dict[str, str] | None = None, confirm: bool = False,
                     stop: bool = False) -> Approval | Elicitation | ScopeRequest:
        body: dict[str, Any] = {"via": VIA, "wait": False}
        if reason:
            body["reason"] = reason
        if always is not None:
            body["always"] = {"widen": always, "confirm": confirm}
        if stop:
            body["stop"] = True
        aid = segment(approval_id, "an approval id")
        return cast("Approval | Elicitation",
                    await self.client.post(f"/api/approvals/{aid}/{'approve' if approve else 'deny'}", body))

    async def wait_approval(self, approval_id: str, timeout: float) -> Approval:
        return cast("Approval", await self.client.get(f"/api/approvals/{segment(approval_id, 'an approval id')}/wait",
                                                      timeout=timeout))

    async def approval(self, approval_id: str) -> Approval:
        return cast("Approval", await self.client.get(f"/api/approvals/{segment(approval_id, 'an approval id')}"))

    async def elicitation(self, elicitation_id: str) -> Elicitation:
        qid = segment(elicitation_id, "a question id")
        return cast("Elicitation", await self.client.get(f"/api/elicitations/{qid}"))

    async def answer_elicitation(self, elicitation_id: str, action: str, content: dict[str, Any] | None
                                 ) -> Elicitation:
        return cast("Elicitation", await self.client.post(
            f"/api/elicitations/{segment(elicitation_id, 'a question id')}/answer",
            {"action": action, "content": content, "via": VIA, "wait": False}))

    async def stop(self, conversation: str) -> list[str]:
        return cast("list[str]", (await self.client.post("/api/stop", {"conversation": conversation}))["stopped"])

    async def stop_all(self) -> list[str]:
        """The emergency brake (spec §5.7), in the live service."""
        return cast("list[str]", (await self.client.post("/api/stop", {"all": True}))["stopped"])

    async def status(self) -> Status:
        return cast("Status", await self.client.get("/api/status"))

    async def new_conversation(self) -> str:
        return str((await self.client.post("/api/conversations", {"channel": CHANNEL}))["conversation"])

    async def approvals(self) -> list[Approval]:
        return await self.client.get_list("/api/approvals")

    def alive(self) -> bool:
        """Whether the service's process still runs (a signal-0 check: cheap, no request)."""
        try:
            os.kill(self.info.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    async def close(self) -> None:
        await self.client.close()
