"""The channel rig interface: what the channel conformance suite (tests/test_channel_conformance.py) needs
of a chat channel under test, so that the same tests run, unchanged, for every channel.

A rig is one channel kind with everything around it: the platform (a real server such as Synapse or
dovecot, or a small fake of its wire API on 127.0.0.1 for a platform out of reach), a real ``palui
serve`` on a fresh ``PALUI_HOME`` (:class:`support.served_channel.ServedChannel`: in the test process, or a
child with ``process=True`` where a test kills it) whose channel was added through the real CLI (``palui
channels add …``), the **person** (who pairs) and a **stranger** (anyone else), each able to write to Palui
in a private chat (a DM, a direct room, a mail). The model is ``script:`` from a file the test rewrites
between turns (:meth:`ChannelRig.set_script`).

To add a channel to the suite, subclass :class:`ChannelRig`, implement every abstract method (each
docstring says what it must do for the suite's promises to be checked, and how Telegram, Matrix, Slack and
Discord do it), and register a factory in :data:`RIGS`::

    RIGS["email"] = lambda home, request, process: EmailRig(home, request.getfixturevalue("mail_servers"),
                                                            process=process)

in ``tests/support/conformance_rigs.py``, whose ``__all__`` names the session fixtures the rigs ask for
(``"mail_servers"`` beside ``"synapse"``). A factory gets the test's fresh home, the pytest request
(for session fixtures: one homeserver or mail server per run, never one per test: CPU is scarce) and
whether the service must be a child process (the one test that kills it). A rig's ``close`` must call
``super().close()``: it stops the service and checks that the channel's secrets reached no log.
Nothing in the suite may name a channel kind;
where a platform cannot do something (an email has no edits), the rig says so with a class attribute
(:attr:`ChannelRig.edits`), and the suite checks the promise that remains.

Handles: what :meth:`say` & co. return is the rig's own handle of the message or event it sent (a
Telegram ``QueuedUpdate``, a Matrix event id, a Slack envelope…); the suite only passes handles back to
the rig. What Palui showed the person is a :class:`Shown`.
"""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from support.live_service import wait_for
from support.served_channel import ServedChannel

__all__ = ["RIGS", "ChannelRig", "Shown"]


#: An answer a rig gives: True (approve), False (deny), or a kind: ``always`` (approve, and from now on the same,
#: spec §5.9) or ``denystop`` (deny and stop, spec §5.10).
Answer = bool | str


def button(answer: Answer) -> int:
    """The index of an answer's button on an approval message: Approve, Deny, Always, Deny and stop."""
    return {True: 0, False: 1, "always": 2, "denystop": 3}[answer]


@dataclass
class Shown:
    """One message Palui showed in a chat, as the person's app would show it.

    ``text`` is the visible text (markup rendered away: Telegram's HTML entities unescaped, Slack's
    ``&lt;`` decoded, Discord's backslash escapes removed); ``ref`` the platform's id of the message (what a
    reply or a button refers to); ``buttons`` the payloads of its buttons in order, approve first (empty
    where the platform has none: Matrix answers by reaction, email by reply); ``edited`` whether this is an
    edit of an earlier message (then ``ref`` is the edited message's); ``raw`` the platform's record, for
    rig-specific checks."""

    text: str
    ref: str
    buttons: list[str] = field(default_factory=list)
    edited: bool = False
    raw: Any = None


class ChannelRig(ServedChannel, ABC):
    """One channel under test (see the module docstring): the served home with its channel
    (:class:`ServedChannel`: ``toml`` adds ``palui.toml`` lines, ``process`` makes the service a child) and
    what the suite asks of the platform."""

    #: How the platform shows the channel in texts Palui writes ("Telegram paired with …").
    title: ClassVar[str] = ""
    #: Exactly once (the platform deduplicates a resent part: Matrix's transaction id, Discord's nonce) or at
    #: most the one part in flight at a crash repeated (Telegram, Slack, email).
    exactly_once: ClassVar[bool] = False
    #: Whether the person can edit a message Palui received (Telegram, Matrix, Slack, Discord; not email).
    edits: ClassVar[bool] = True
    #: Whether the person can forward or quote someone else's text in a way the platform marks (Matrix:
    #: only as a reply to the other's message).
    marks_forwards: ClassVar[bool] = True
    #: The stranger's id as Palui names them (a taint source of their words holds it).
    stranger_id: str = ""
    #: What the taint source of a forwarded text holds: the stranger's id, or where the platform does not
    #: say who wrote a forward (Discord), the words naming it as a forward.
    forward_source: str = ""
    #: Whether the stranger can press the person's buttons (Matrix: nobody else is in a private room).
    stranger_can_answer: ClassVar[bool] = True

    # -- shared: the service, the CLI, the model (ServedChannel) and what the suite reads ------------------

    def kill(self) -> None:
        """``kill -9`` of ``palui serve`` by its pid (the rig was made with ``process=True``)."""
        assert self.svc.process, "a kill -9 needs the service in its own process: the rig's process=True"
        assert self.svc.stop(signal.SIGKILL) == -signal.SIGKILL
        self.running = False

    def inbox(self) -> list[str]:
        return [m["text"] for m in self.svc.get("/api/inbox")]

    def pairing_code(self) -> str:
        r = self.cli("channels", "pair", self.kind)
        assert r.returncode == 0, r.stderr
        return r.stdout.split("pairing code: ")[1].split()[0]

    def pair(self) -> None:
        """Make a code and send ``/pair CODE`` as the person; wait for Palui's "paired with"."""
        mark = self.mark()
        self.pair_with(self.pairing_code(), "person")
        self.wait_shown(lambda s: "paired with" in s.text, mark)

    def approval(self, aid: str) -> dict[str, Any]:
        from support.telegram_rig import approval_row

        return approval_row(self.svc, aid)

    def wait_shown(self, pred: Callable[[Shown], bool], after: int, timeout: float = 30,
                   who: str = "person") -> Shown:
        """The first message Palui showed ``who`` since ``after`` (a :meth:`mark`) that ``pred`` accepts."""
        def found() -> Shown | None:
            return next((s for s in self.seen(after, who) if pred(s)), None)
        return wait_for(found, timeout, interval=0.1, what=f"a {self.kind} message to the {who}")

    # -- the platform half: each rig implements these --------------------------------------------------------

    @abstractmethod
    def add_channel(self) -> None:
        """``palui channels add KIND …`` through the real CLI, with the platform's credentials from a file or
        a variable (never the command line), pointed at the fake by its hidden loopback option."""

    @abstractmethod
    def pair_with(self, code: str, who: str) -> Any:
        """``/pair CODE`` written by ``who`` ("person" or "stranger") in a private chat with Palui. Returns
        the handle."""

    @abstractmethod
    def say(self, text: str, who: str = "person") -> Any:
        """``text`` written by ``who`` in their private chat with Palui. Returns the handle."""

    @abstractmethod
    def forward(self, text: str) -> Any:
        """The person passes on a text the stranger wrote, the way the platform marks it as someone else's
        (Telegram: a forward; Matrix: a reply to the stranger's message in a room both are in; Slack: a
        shared message; Discord: a forward; email: a forwarded or quoted mail), with no words of their own
        or a few. Returns the handle."""

    @abstractmethod
    def edit(self, handle: Any, text: str) -> Any:
        """The person edits the message ``handle`` to ``text`` (only when :attr:`edits`). Returns the handle
        of the edit."""

    @abstractmethod
    def processed(self, handle: Any) -> str:
        """Wait until the service recorded the update ``handle`` (``channel_updates``); return its outcome."""

    @abstractmethod
    def mark(self) -> int:
        """A position in what Palui showed (for :meth:`seen`)."""

    @abstractmethod
    def seen(self, after: int, who: str = "person") -> list[Shown]:
        """Every message Palui showed ``who`` since ``after``, in order, edits included (``edited``)."""

    @abstractmethod
    def answer(self, shown: Shown, approve: Answer, who: str = "person") -> Any:
        """Answer the approval message ``shown`` the platform's way: press its Approve/Deny/Always/Deny and stop
        button (Telegram, Slack, Discord), react ✅/❌/🔁/🛑 (Matrix), reply (email). Returns the handle."""

    @abstractmethod
    def forge(self, shown: Shown, approve: bool) -> Any:
        """The person sends an answer that names the approval of ``shown`` but is not bound to it as it was
        shown: a button payload with another fingerprint (Telegram, Slack, Discord), ``/approve`` of an id
        that does not exist (Matrix), a reply whose secret is wrong (email). Palui must refuse it."""

    @abstractmethod
    def replay(self, handle: Any) -> Any:
        """The answer ``handle`` delivered again as a new event (a press pressed again, a reply resent).
        Returns the new handle."""

    @abstractmethod
    def told(self, handle: Any) -> str:
        """Wait for, and return, what Palui told the person about the answer ``handle`` (Telegram's toast,
        Slack's and Discord's ephemeral reply, a message on Matrix or email)."""

    @abstractmethod
    def pings(self, shown: Shown) -> list[str]:
        """Who or what the message ``shown`` would notify beyond the chat it is in (``@channel``, ``@here``,
        ``@everyone``, ``@room``, a user): the suite requires none, whatever the text held."""

    @abstractmethod
    def down(self) -> None:
        """Make the platform unreachable to Palui (the fake stopped, the homeserver behind a proxy that
        refuses connections), without losing what it holds."""

    @abstractmethod
    def up(self) -> None:
        """The platform answers again (the same address)."""

    @abstractmethod
    def revoke_token(self) -> None:
        """The platform refuses Palui's credential from now on (a bot token revoked, an access token logged
        out)."""

    @abstractmethod
    def renew_token(self) -> None:
        """Give Palui a new, working credential with ``palui channels add KIND`` (same name, same account):
        the pairing is kept."""


#: kind -> factory(home, pytest request, process) -> rig. The suite runs for every entry; see the module
#: docstring.
RIGS: dict[str, Callable[[Path, Any, bool], ChannelRig]] = {}


def register_rigs() -> dict[str, Callable[[Path, Any, bool], ChannelRig]]:
    """Fill :data:`RIGS` with the rigs of this tree (imported here, not at import time: each needs its
    platform's library)."""
    from support import conformance_rigs  # noqa: F401 - registers its rigs

    return RIGS
