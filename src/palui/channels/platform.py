"""The platform half of a chat channel (spec §8.3): the words a channel hands over, and what it implements.

A channel module subclasses :class:`palui.channels.base.Channel` (which builds on
:class:`ChannelPlatform` and :class:`palui.channels.outbox.Outbox`) and implements the abstract
methods here (a channel that misses one cannot be made); docs/channels.md lists them.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from palui.channels import views
from palui.channels.redaction import Redactor

if TYPE_CHECKING:
    from palui.results import Approval
    from palui.service.door import ServiceDoor

log = logging.getLogger("palui.channels")

Job = Callable[[], Awaitable[Any]]


@dataclass
class Quoted:
    """Text in a message that is not the person's own words: ``how`` is "forwarded", "replied to",
    "quoted" or "written in the room by"; ``trusted`` only for the person's own words."""

    text: str
    author: str
    how: str
    trusted: bool = False


@dataclass
class Inbound:
    """One platform update, as a channel hands it to :meth:`Channel.receive`.

    ``key`` is the platform's id (Telegram ``update_id``, Matrix event id), ``seq`` its number
    where it has one. ``text`` holds only what the person typed; ``target`` the message replied
    or reacted to. A button press has ``press`` (its data) and ``press_id``; a reaction
    ``reaction`` ("approve" / "deny").
    """

    key: str
    chat: str
    sender: str
    sender_name: str
    private: bool
    seq: int | None = None
    text: str = ""
    quoted: list[Quoted] = field(default_factory=list)
    target: str | None = None
    press: str | None = None
    press_id: str | None = None
    reaction: str | None = None


class Retry(Exception):
    """A delivery that may succeed later: ``delay`` seconds to wait (None: the outbox's backoff)."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class ChannelPlatform(ABC):
    """A running chat channel of one stored channel row: its platform half and shared state.

    Args:
        svc: the service, through its door (:class:`palui.service.door.ServiceDoor`).
        name: the channel's name (``telegram``, or ``--name``).
        redact: the process-wide redactor, which knows this channel's secrets.
    """

    kind: ClassVar[str] = ""
    title: ClassVar[str] = ""
    text_limit: ClassVar[int] = 4096
    how_to_answer: ClassVar[str] = ""

    def __init__(self, svc: ServiceDoor, name: str, redact: Redactor) -> None:
        self.svc = svc
        self.name = name
        self.redact = redact
        self.outbox: asyncio.Queue[tuple[str, Job]] = asyncio.Queue()
        self.tasks: set[asyncio.Task[Any]] = set()

    @staticmethod
    def measure(text: str) -> int:
        return len(text)

    # -- the platform half (subclasses implement the abstract methods) ------------------------------

    @abstractmethod
    async def run(self) -> None:
        """Receive until cancelled, reconnecting by itself; call :meth:`receive` per update."""

    @abstractmethod
    async def send(self, chat: str, text: str, *, reply_to: str | None = None) -> list[str]:
        """Send ``text`` (already escaped for display, plain), split at the limit; return message refs."""

    @abstractmethod
    async def send_approval(self, chat: str, view: views.ApprovalView, a: Approval) -> str:
        """Send the approval message with its buttons (or reaction hint); return its ref."""

    @abstractmethod
    async def edit(self, chat: str, ref: str, text: str) -> None:
        """Replace a sent message's text (and drop its buttons)."""

    async def typing(self, chat: str) -> None:  # noqa: B027 - optional: a platform without the indicator shows nothing
        """Show "typing…" once (Telegram's lasts 5 s)."""

    async def answer_press(self, press_id: str, text: str) -> None:  # noqa: B027 - optional: only platforms with buttons
        """Acknowledge a button press with a short text (Telegram's answerCallbackQuery)."""

    def retry_delay(self, exc: BaseException) -> float | None:
        """Seconds before retrying a failed delivery, None to give it up (a bad request)."""
        if isinstance(exc, Retry):
            return exc.delay if exc.delay is not None else 0.0  # 0: the outbox's backoff
        return None

    # -- shared helpers -------------------------------------------------------------------------------

    def set_state(self, state: str) -> None:
        self.svc.set_channel_state(self.name, self.redact(state))

    def spawn(self, job: Job) -> None:
        task = asyncio.ensure_future(job())
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: %s", self.name, self.redact(f"{type(task.exception()).__name__}: {task.exception()}"))
