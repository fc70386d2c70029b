"""Shared value types: tool classes, origins, verdicts, the Decision record, channel notices (spec §1-§3),
and ``JSON``, the HTTP API's bodies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

#: A JSON object as the HTTP API reads and answers it: a request or response body of ``palui serve``'s
#: routes and of the CLI's client for them (string keys, any JSON values; spec §8).
JSON = dict[str, Any]

#: Why a tool whose server says ``execution.taskSupport: "required"`` is never offered (spec §7.7).
NEEDS_TASKS = "needs MCP tasks, not supported yet"
SIGN_IN_AGAIN = "error: sign in again"  # a connector's stored state while it waits for a sign-in (spec §7.9)


def sign_in_again(connector: str) -> str:
    """What a connector waiting for a sign-in tells a turn and the person, with the fix (spec §7.9)."""
    return (f"{connector}: sign in again: palui connectors login {connector} (or “Sign in” on its sheet); its "
            "tools are not offered meanwhile")


class ToolClass(str, Enum):
    """A tool's class (spec §1). Ordered by strictness: read < write < destructive."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @staticmethod
    def stricter(a: ToolClass, b: ToolClass) -> ToolClass:
        """Return the stricter of two classes."""
        return a if a.rank >= b.rank else b


_RANK = {ToolClass.READ: 0, ToolClass.WRITE: 1, ToolClass.DESTRUCTIVE: 2}


class ClassSource(str, Enum):
    """Where a tool's class came from (spec §2), strongest first."""

    USER = "user"
    BUILTIN = "builtin"
    HINTS = "hints"
    UNKNOWN = "unknown"


class Origin(str, Enum):
    """What started a turn (spec §1): ``gateway`` is a call another MCP client made through Palui (spec §8.6)."""

    CHAT = "chat"
    JOB = "job"
    WEBHOOK = "webhook"
    GATEWAY = "gateway"


class Verdict(str, Enum):
    """The whole verdict enum of spec §1."""

    RUN = "run"
    ASK = "ask"
    UNAVAILABLE = "unavailable"
    OFF = "off"


@dataclass(frozen=True)
class Decision:
    """The policy's answer for one tool in one turn (spec §3).

    ``verdict`` is the outcome, ``reason`` a sentence naming the rule (and, in a
    tainted turn, what tainted it), ``source`` the rule that decided:
    ``"webhook"`` (precedence 1), ``"switch"`` (precedence 2) or ``"matrix"`` (3).
    """

    verdict: Verdict
    reason: str
    source: str

    @property
    def offered(self) -> bool:
        """True when the tool may be offered to the model (run or ask)."""
        return self.verdict in (Verdict.RUN, Verdict.ASK)


class TurnStatus(str, Enum):
    """Turn status words of spec §11 (plus ``running`` while in flight). ``partial`` and ``failed`` end only a
    job's turn: some, or every, connector it needed was down (spec §8.4)."""

    RUNNING = "running"
    DONE = "done"
    AWAITING_APPROVAL = "awaiting_approval"
    QUEUED = "queued"
    STOPPED = "stopped"
    BUDGET = "budget"
    ERROR = "error"
    PARTIAL = "partial"
    FAILED = "failed"


class ApprovalStatus(str, Enum):
    """Approval status words of spec §11."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class CallState(str, Enum):
    """Where a held tool call of a turn is (spec §4-§5), as stored in ``turns.pending_json``: the values
    are the words every Palui stored, so a turn paused by an earlier version resumes. Its shape and
    transitions: :mod:`palui.runner.pending`."""

    TODO = "todo"  # not decided yet
    ASKED = "asked"  # an approval was asked: ``approval`` and ``reason`` are set
    SENT = "sent"  # on its way to the connector: durable before sending, so a crash never sends it twice
    ELICITING = "eliciting"  # the server's questions wait for the person: ``elicit`` is set
    DONE = "done"  # answered: ``result`` and ``is_error`` are set


@dataclass(frozen=True)
class Notice:
    """One message on the person's channel (spec §1), as the notifier hands it to subscribers.

    ``kind`` is one of answer, approval, job, webhook, cap, notice, message; ``inbox_id`` the
    inbox row written first; ``time`` epoch seconds. ``approval_id`` is set for approval
    requests (a channel shows buttons for it). ``elicitation_id`` is set for a question an MCP
    server asks the person (kind ``elicitation``, spec §7): a channel shows its enum and boolean
    fields as buttons (``ElicitationsPart.get(id)`` has them); ``text`` alone says how to answer.
    """

    inbox_id: int
    kind: str
    text: str
    time: float
    turn_id: str | None = None
    conversation_id: str | None = None
    approval_id: str | None = None
    elicitation_id: str | None = None


class Notify(Protocol):
    """Puts a message on the person's channel: what the runner and the connectors are given
    instead of the service (docs/architecture.md). Never raises for a delivery failure."""

    def __call__(self, kind: str, text: str, *, turn_id: str | None = None,
                 conversation_id: str | None = None, approval_id: str | None = None,
                 elicitation_id: str | None = None) -> None: ...


@dataclass(frozen=True)
class SignIn:
    """How the person signs in to a remote MCP server (OAuth 2.1, spec §7): the front end's part.

    ``show(url)`` shows or opens the authorization URL (a browser, or the URL printed); ``paste()``,
    when given, returns the address the browser ended on, pasted by the person (a machine without a
    browser). Palui listens on 127.0.0.1 for the redirect meanwhile; whichever comes first is used,
    within ``timeout`` seconds.
    """

    show: Callable[[str], Awaitable[None]]
    paste: Callable[[], Awaitable[str]] | None = None
    timeout: float = 300.0


@dataclass(frozen=True)
class OAuthClient:
    """A client the person registered at the authorization server themselves (``--client-id``), for a
    server without dynamic registration. ``client_secret`` comes from a prompt or a file, never the
    command line; ``auth_method`` is ``client_secret_basic`` or ``client_secret_post`` (``none``
    without a secret)."""

    client_id: str
    client_secret: str | None = None
    auth_method: str = "client_secret_basic"
    redirect_uri: str | None = None  # a loopback redirect URI the client fixes (None: any port will do)


#: The attribute a turn's event sink carries when it shows text as it arrives (a bool, or a callable giving one).
SHOWS_TEXT = "shows_text"


def shows_text(sink: Callable[..., Any], when: bool | Callable[[], bool] = True) -> Callable[..., Any]:
    """Mark a turn's event sink as showing text as it arrives (``when``: a bool, or asked at each model request):
    only then are the turn's model requests streamed (spec §9.3); a job, a webhook, ``run --json`` or a channel
    that sends the answer at the end gets the plain request. Returns ``sink``."""
    setattr(sink, SHOWS_TEXT, when)
    return sink


def wants_text(sink: Callable[..., Any] | None) -> bool:
    """Whether ``sink`` (a turn's event sink, or None) shows text as it arrives now (:func:`shows_text`)."""
    when = getattr(sink, SHOWS_TEXT, False)
    return bool(when() if callable(when) else when)
