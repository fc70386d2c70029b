"""Where ``palui chat``'s turns run, as the chat session sees it: :class:`ChatDoor` (spec §8).

Two backends satisfy it (:mod:`palui.cli.chat.backends`): :class:`~palui.cli.chat.backends.LocalBackend`
over the in-process service and :class:`~palui.cli.chat.backends.RemoteBackend` over the JSON API
of a running ``palui serve``. The session holds a ``ChatDoor`` and swaps the remote one for a local
one when the service goes away, so the two must be interchangeable: mypy checks both against this
Protocol (the typed assignments at the end). Why a Protocol: ``docs/decisions/0149-typed-doors-for-the-front-ends.md``.

Every call raises the service's :class:`~palui.errors.PaluiError` subclasses, and a remote call
:class:`~palui.cli.client.ServiceGone` when the service cannot be reached or goes away mid-call.
Results are the service's shapes (:mod:`palui.results`: ``TurnResult``, ``Approval``, ``Elicitation``,
``Status``), the same whichever backend answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from palui.cli.client import StreamSink
    from palui.results import Approval, Elicitation, ScopeRequest, Status, TurnResult

T = TypeVar("T")


class ChatDoor(Protocol):
    """What the chat session calls to run and answer turns (see the module docstring).

    Attributes:
        where: where turns run, in words (``this process``, ``the service at http://…``).
        model: the model string new turns use; None lets a live service use its own.
        runs_here: True when turns run in this process (a chat then takes up turns nobody runs).
    """

    where: str
    model: str | None
    runs_here: bool

    async def send(self, text: str, conversation: str, on_event: StreamSink) -> TurnResult:
        """Start a turn with ``text`` and follow it until it settles; its result."""
        ...

    async def submit(self, text: str, conversation: str) -> TurnResult:
        """Store ``text`` as the conversation's next turn without waiting for it; its result so far."""
        ...

    async def follow(self, turn_id: str, after: int, on_event: StreamSink) -> TurnResult:
        """Follow a turn from event index ``after`` on until it settles; its result."""
        ...

    async def answer(self, approval_id: str, approve: bool, reason: str | None = None, *,
                     always: dict[str, str] | None = None, confirm: bool = False,
                     stop: bool = False) -> Approval | Elicitation | ScopeRequest:
        """Answer an approval through the service's one door (``answered_via`` ``cli``); the approval. ``always``:
        approve, and from now on the same (spec §5.9); ``stop``: deny and stop (spec §5.10)."""
        ...

    async def wait_approval(self, approval_id: str, timeout: float) -> Approval:
        """The approval once it is not pending, or after ``timeout`` seconds."""
        ...

    async def approval(self, approval_id: str) -> Approval: ...

    async def elicitation(self, elicitation_id: str) -> Elicitation: ...

    async def answer_elicitation(self, elicitation_id: str, action: str, content: dict[str, Any] | None
                                 ) -> Elicitation:
        """Answer a server's question through its door; the question (the session follows the turn)."""
        ...

    async def stop(self, conversation: str) -> list[str]:
        """Stop the conversation's turns; the stopped turn ids."""
        ...

    async def stop_all(self) -> list[str]:
        """The emergency brake: every turn stopped, the jobs paused; the stopped turn ids."""
        ...

    async def status(self) -> Status: ...

    async def new_conversation(self) -> str:
        """A new conversation of the terminal chat; its id."""
        ...

    async def approvals(self) -> list[Approval]:
        """The pending approvals."""
        ...

    def alive(self) -> bool:
        """Whether turns can still run there (a live service's process still runs)."""
        ...

    async def close(self) -> None: ...


class OnBackend(Protocol):
    """``call(op)``: ``op(backend)`` on the chat's current backend, done again in this process when the live
    service went away mid-call (:meth:`palui.cli.chat.session.ChatSession.call`); what the session's
    collaborators (:class:`~palui.cli.chat.asking.Asking`, :class:`~palui.cli.chat.questions.Questions`)
    are handed to reach the backend."""

    def __call__(self, op: Callable[[ChatDoor], Awaitable[T]], /) -> Awaitable[T]: ...


if TYPE_CHECKING:
    # mypy checks here that both backends are chat doors (a missing call or a changed signature fails).
    from palui.cli.chat.backends import LocalBackend, RemoteBackend

    def _local_is_a_chat_door(b: LocalBackend) -> ChatDoor:
        return b

    def _remote_is_a_chat_door(b: RemoteBackend) -> ChatDoor:
        return b
