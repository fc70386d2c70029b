"""The platform half of a chat channel (spec §8.3): the words a channel hands over, and what it implements.

A channel module subclasses :class:`palui.channels.base.Channel` (which builds on
:class:`ChannelPlatform` and :class:`palui.channels.outbox.Outbox`) and implements the abstract
methods here (a channel that misses one cannot be made); docs/channels.md lists them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from palui.channels.redaction import Redactor

if TYPE_CHECKING:
    from palui.results import OutboxPart
    from palui.service.api import Service

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
    ``reaction`` ("approve" / "deny"); an edit ``edit_of``, the ref of the message edited (edits are
    not read: the person is told once per message).
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
    edit_of: str | None = None


class Retry(Exception):
    """A delivery that may succeed later: ``delay`` seconds to wait (None: the outbox's backoff);
    ``maybe_delivered`` when the platform may have taken it anyway (a timeout after the request left)."""

    def __init__(self, message: str, delay: float | None = None, maybe_delivered: bool = False) -> None:
        super().__init__(message)
        self.delay = delay
        self.maybe_delivered = maybe_delivered


@dataclass
class Backoff:
    """Exponential backoff with jitter: ``base`` seconds, twice that, … up to ``cap`` seconds."""

    base: float = 0.5
    cap: float = 30.0
    attempt: int = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.base * 2.0**self.attempt)
        self.attempt += 1
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.attempt = 0


class ChannelPlatform(ABC):
    """A running chat channel of one stored channel row: its platform half and shared state.

    Args:
        svc: the service (:class:`palui.service.api.Service`): its parts.
        name: the channel's name (``telegram``, or ``--name``).
        redact: the process-wide redactor, which knows this channel's secrets.
    """

    kind: ClassVar[str] = ""
    title: ClassVar[str] = ""
    text_limit: ClassVar[int] = 4096
    how_to_answer: ClassVar[str] = ""
    #: The options of ``palui channels add KIND`` that give a new credential (in the state of a refused one).
    renew_options: ClassVar[str] = "--token-file FILE"

    def __init__(self, svc: Service, name: str, redact: Redactor) -> None:
        self.svc = svc
        self.name = name
        self.redact = redact
        self.tasks: set[asyncio.Task[Any]] = set()
        #: Set when the outbox has new items (the worker looks at once); and when the platform answers again
        #: after an error (a delivery waiting in backoff is tried at once).
        self.woken = asyncio.Event()
        self.reachable = asyncio.Event()
        self._last_state = ""
        self._refused = False
        self._secret_at = svc.channels.get(name)["config"].get("secret_at")

    @staticmethod
    def measure(text: str) -> int:
        return len(text)

    # -- the platform half (subclasses implement the abstract methods) ------------------------------

    @abstractmethod
    async def run(self) -> None:
        """Receive until cancelled, reconnecting by itself; call :meth:`receive` per update."""

    @abstractmethod
    async def send_message(self, chat: str, part: OutboxPart) -> str:
        """Send one message of the outbox (``part["text"]``: plain, escaped for display, within the limit),
        with the buttons of ``part["approval_id"]`` when it has one, under the stable ``part["key"]`` where the
        platform deduplicates (Matrix's transaction id); return the message's ref. A part of kind
        ``approval-plain`` (an approval whose message with buttons the platform refused) goes with no markup
        and no buttons at all."""

    @abstractmethod
    async def edit(self, chat: str, ref: str, part: OutboxPart) -> str:
        """Replace the text of the sent message ``ref`` by ``part["text"]`` (and drop its buttons); return the
        ref of the edit (the message's own where the platform has no edit events)."""

    async def typing(self, chat: str) -> None:  # noqa: B027 - optional: a platform without the indicator shows nothing
        """Show "typing…" once (Telegram's lasts 5 s)."""

    async def answer_press(self, press_id: str, text: str) -> None:  # noqa: B027 - optional: only platforms with buttons
        """Acknowledge a button press with a short text (Telegram's answerCallbackQuery)."""

    async def tick(self) -> None:  # noqa: B027 - optional: a platform with nothing to do each second
        """Called every second by the manager (Matrix joins the invites that waited for a pairing code)."""

    def retry_delay(self, exc: BaseException) -> float | None:
        """Seconds before retrying a failed delivery (0: the outbox's backoff), None to give it up (a bad
        request)."""
        if isinstance(exc, Retry):
            return exc.delay if exc.delay is not None else 0.0
        return None

    def maybe_delivered(self, exc: BaseException) -> bool:
        """Whether a send that raised ``exc`` may have reached the platform anyway (a timeout after the
        request went out): the outbox then sends that part again as it was, never rendered anew."""
        return isinstance(exc, Retry) and exc.maybe_delivered

    # -- shared helpers -------------------------------------------------------------------------------

    def set_state(self, state: str) -> None:
        """Record the channel's state (``connected``, ``unpaired``, ``error: …``); reaching the platform again
        after an error wakes a delivery waiting in backoff, and clears a refusal of the credentials."""
        if not state.startswith("error") and self._last_state.startswith("error"):
            self.reachable.set()
        if not state.startswith("error") and self._refused:
            self._refused = False
            self.svc.channels.set_refused(self.name, False)
        self._last_state = state
        self.svc.channels.set_state(self.name, self.redact(state))

    def credentials_refused(self, what: str) -> None:
        """The platform rejects the channel's token (401, ``invalid_auth``, ``M_UNKNOWN_TOKEN``): the state says
        so and what to do (a new one with ``palui channels add``, which keeps the pairing), and the person is
        told once (:meth:`ChannelsPart.set_refused`). Deliveries wait; receiving is retried with backoff."""
        if self.svc.channels.get(self.name)["config"].get("secret_at") != self._secret_at:
            return  # a new secret was given since this channel started: the manager starts it again with it
        self._refused = True
        self.svc.channels.set_refused(self.name, True)
        self.set_state(f"error: {what} was rejected by {self.title} (retrying; check it with palui channels test "
                       f"{self.name}, or give a new one with palui channels add {self.kind} --name {self.name} "
                       f"{self.renew_options}, which keeps the pairing)")

    def wake(self) -> None:
        """New items in the outbox: the worker looks now (thread-safe callers use the loop's call_soon)."""
        self.woken.set()

    def spawn(self, job: Job) -> None:
        task = asyncio.ensure_future(job())
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: %s", self.name, self.redact(f"{type(task.exception()).__name__}: {task.exception()}"))
