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
from palui.errors import ApprovalError
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
        self._answer: asyncio.Future[bool] | None = None
        self._reason: str | None = None  # /deny ID REASON typed while its prompt showed

    def answer_typed(self, approval_id: str | None, approve: bool, reason: str | None = None) -> bool:
        """An answer typed to the prompt of ``approval_id`` (``y``/``n``, or ``/approve``/``/deny`` of its id):
        True when that prompt shows (it takes the first answer), False when it does not."""
        if self.current is None or approval_id != self.current["id"]:
            return False
        if self._answer is not None and not self._answer.done():
            self._reason = reason
            self._answer.set_result(approve)
        return True

    async def ask(self, r: TurnResult) -> TurnResult:
        """Ask the person about the turn's pending approval until it is answered here or anywhere else."""
        a = r["pending_approvals"][0]
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bool] = loop.create_future()
        self.current, self._answer, self._reason = a, answer, None
        self.screen.asking = a["id"]
        self.screen.set_prompt(f"approve {a['id']}? [y/n] ")
        self.view.waiting(a)
        elsewhere = asyncio.create_task(self.wait_elsewhere(a["id"]))
        try:
            either: list[asyncio.Future[Any]] = [answer, elsewhere]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.current = self._answer = None
            self.screen.asking = None
            self.screen.set_prompt(PROMPT)
        if answer.done():
            elsewhere.cancel()
            approve, reason = answer.result(), self._reason
            self._reason = None
            try:
                await self.call(lambda b: b.answer(a["id"], approve, reason))
                self.screen.line(f"[{a['id']} {'approved' if approve else 'denied'}: the turn goes on]")
            except ApprovalError as e:  # answered, cancelled or expired meanwhile: the turn shows what happened
                self.say_error(e)
        else:
            self.screen.line(self._answered_elsewhere(elsewhere.result()))
        self.screen.set_status("the turn goes on")
        return await self.follow(r["turn"])

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
