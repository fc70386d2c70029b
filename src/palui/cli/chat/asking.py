"""An approval asked in ``palui chat`` (spec §8.2): the prompt ``approve ID? [y/n]`` stays until
the approval is answered here or anywhere else (another terminal, the web page, a chat app, ``palui
stop``); the chat says where, then the turn's continuation streams in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from palui.cli.chat.screen import PROMPT, Screen
from palui.cli.chat.view import View, via_words
from palui.errors import ApprovalError, PaluiError
from palui.text.commands import Command
from palui.text.display import shown

if TYPE_CHECKING:
    from palui.cli.chat.door import OnBackend
    from palui.results import Approval, TurnApproval, TurnResult

WAIT_SLICE = 25.0  # seconds of one wait for an approval's answer (a long poll through a service)


class Asking:
    """The approval a chat session asks about: the prompt, the answer typed to it, the wait for one given
    anywhere else.

    Args:
        screen, view: where the prompt and the outcome are shown.
        call: runs an operation on the chat's backend (:class:`~palui.cli.chat.door.OnBackend`).
        follow: follows a turn on after its approval (the session's).
        say_error: shows a refusal.

    Attributes:
        current: the approval the prompt asks about, None while none does.
    """

    def __init__(self, screen: Screen, view: View, call: OnBackend, follow: Callable[[str], Awaitable[TurnResult]],
                 say_error: Callable[[Exception], None]) -> None:
        self.screen = screen
        self.view = view
        self.call = call
        self.follow = follow
        self.say_error = say_error
        self.current: TurnApproval | None = None
        self._answer: asyncio.Future[Command] | None = None  # y, n, a, s or a command typed to the prompt

    def answer_typed(self, approval_id: str | None, cmd: Command) -> bool:
        """An answer typed to the prompt of ``approval_id`` (``y``/``n``/``a``/``s``, or ``/approve``, ``/deny``,
        ``/always``, ``/denystop`` of its id, as the command it stands for): True when that prompt shows (it takes
        the first answer), False when it does not."""
        if self.current is None or approval_id != self.current["id"]:
            return False
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(cmd)
        return True

    async def ask(self, r: TurnResult) -> TurnResult:
        """Ask the person about the turn's pending approval until it is answered here or anywhere else. An answer
        the service refuses before recording anything (a standing approval it cannot make: a marked argument
        widened, a destructive tool not confirmed) is said, and the question is asked again."""
        a = r["pending_approvals"][0]
        while not await self._ask_once(a):
            pass
        self.screen.set_status("the turn goes on")
        return await self.follow(r["turn"])

    async def _ask_once(self, a: TurnApproval) -> bool:
        """One showing of the question. False when the answer was refused with nothing recorded (ask again)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Command] = loop.create_future()
        self.current, self._answer = a, answer
        self.screen.asking = a["id"]
        # y approve, n deny, a approve and from now on the same (spec §5.9), s deny and stop (spec §5.10)
        self.screen.set_prompt(f"approve {a['id']}? [y/n] (a: and from now on the same, s: deny and stop) ")
        self.view.waiting(a)
        elsewhere = asyncio.create_task(self.wait_elsewhere(a["id"]))
        try:
            either: list[asyncio.Future[Any]] = [answer, elsewhere]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.current = self._answer = None
            self.screen.asking = None
            self.screen.set_prompt(PROMPT)
        if not answer.done():
            self.screen.line(self._answered_elsewhere(elsewhere.result()))
            return True
        elsewhere.cancel()
        cmd = answer.result()
        try:
            done = await self.call(lambda b: b.answer(a["id"], cmd.approves, cmd.reason or None, always=cmd.always,
                                                      confirm=cmd.confirm, stop=cmd.stop))
            self.screen.line(f"[{a['id']} {answered_words(cmd, done)}]")
        except ApprovalError as e:  # answered, cancelled or expired meanwhile: the turn shows what happened
            self.say_error(e)
        except PaluiError as e:  # refused with nothing recorded: the question stays
            self.say_error(e)
            return False
        return True

    async def wait_elsewhere(self, approval_id: str) -> Approval:
        while True:
            a = await self.call(lambda b: b.wait_approval(approval_id, WAIT_SLICE))
            if a["status"] != "pending":
                return a

    @staticmethod
    def _answered_elsewhere(a: Approval) -> str:
        if a["status"] in ("approved", "denied"):
            return f"[approval {a['id']} was {a['status']} on {via_words(a.get('answered_via'))}: the turn goes on]"
        if a["status"] == "cancelled":
            why = shown(a.get("cancel_reason") or "no reason given", one_line=True)
            return f"[approval {a['id']} was cancelled: {why}]"
        return f"[approval {a['id']} expired, which counts as a denial: the turn goes on]"


def answered_words(cmd: Command, a: Any) -> str:
    """What the chat says after its answer: ``approved: the turn goes on``, ``approved, and from now on the same
    (standing approval r-…)``, ``denied and tool use stopped: the model answers without tools``."""
    if cmd.name == "/always":
        return f"approved, and from now on the same (standing approval {a.get('rule_made')}): the turn goes on"
    if cmd.stop:
        return "denied and tool use stopped: the model answers without tools"
    return f"{'approved' if cmd.approves else 'denied'}: the turn goes on"
