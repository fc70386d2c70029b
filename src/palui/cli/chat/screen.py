"""Where ``palui chat`` reads and writes (docs/decisions/0111-a-live-terminal.md): input is read while a turn runs.

- :class:`TerminalScreen` (standard input and output are a terminal): prompt_toolkit keeps the
  input line live under the output, with a line above it for the answer being streamed and a
  status line (a spinner and what the turn is doing: thinking, calling TOOL, waiting for
  approval, retrying the provider in N s).
- :class:`PipedScreen` (scripts and tests): lines are read from standard input in a thread as they
  arrive; streamed text is written piece by piece; approval questions are printed as lines.

Both hand each entered line to the session as a :class:`Typed`, which records the approval the
prompt was asking about when the line was entered: a ``y`` typed ahead, before the question was
shown, never answers it.

While :attr:`Screen.hidden` is set (the session reads a secret field of a server's question, spec
§7.8), the terminal shows what is typed as ``*`` and keeps the line out of its history.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PROMPT = "you> "


@dataclass(frozen=True)
class Typed:
    """One entered line (``text`` None: the input ended), the approval the prompt asked about when it
    was entered (``asking``), or Ctrl-C (``interrupt``)."""

    text: str | None
    asking: str | None = None
    interrupt: bool = False


Put = Callable[[Typed], None]


class Screen(ABC):
    """What the session writes to. ``asking`` is the approval id the prompt asks about (set by the session).
    A screen implements the abstract methods; the others have a default."""

    def __init__(self) -> None:
        self.asking: str | None = None
        self.hidden = False  # the line being typed is a secret: not shown, not kept in the input history
        self.prompt = PROMPT
        self.status: str | None = None
        self.status_since = 0.0
        self.countdown_to: float | None = None

    @abstractmethod
    def line(self, text: str) -> None:
        """Show one line of output (ending a streamed line first)."""

    @abstractmethod
    def stream(self, text: str) -> None:
        """Display text (already escaped) of the answer being streamed; no line end implied."""

    @abstractmethod
    def end_stream(self, mark: str = "") -> None:
        """The streamed text ended (``mark`` appended, e.g. `` [discarded (retrying)]``): end its line."""

    def echo(self, text: str) -> None:  # noqa: B027 - optional: only a screen that erases entered lines
        """Show an entered line again where the screen erased it."""

    def set_prompt(self, text: str) -> None:
        self.prompt = text

    def set_status(self, text: str | None, countdown_to: float | None = None) -> None:
        """What the turn is doing (None: nothing runs); ``countdown_to`` (epoch s) adds "N s" left."""
        if text != self.status:
            self.status_since = time.time()
        self.status, self.countdown_to = text, countdown_to

    def status_text(self) -> str:
        if not self.status:
            return ""
        now = time.time()
        frame = SPINNER[int(now * 8) % len(SPINNER)]
        text = self.status
        if self.countdown_to is not None:
            text = text.replace("{left}", str(max(0, round(self.countdown_to - now))))
        return f"{frame} {text} · {int(now - self.status_since)} s"

    @abstractmethod
    async def run_input(self, put: Put) -> None:
        """Read entered lines until the input ends, handing each to ``put`` as a :class:`Typed`
        (the end as ``Typed(None)``, Ctrl-C as ``Typed("", interrupt=True)``)."""

    async def stop_input(self, reader: asyncio.Task[None]) -> None:
        """Stop reading input (``reader`` is the task of :meth:`run_input`) once everything shown is out."""
        reader.cancel()

    def __enter__(self) -> Screen:
        return self

    def __exit__(self, *exc: object) -> None:  # noqa: B027 - a screen with nothing to restore
        """Restore the terminal (a screen that changed it)."""


class PipedScreen(Screen):
    """Standard input and output that are not a terminal."""

    def __init__(self) -> None:
        super().__init__()
        self._streaming = False
        self._held: list[str] = []  # notes printed while a streamed line was open: shown after it

    def _write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def line(self, text: str) -> None:
        # A note printed while the answer streams (``/quit``, ``/status``) waits for the streamed line's end,
        # as the terminal screen keeps it under the line: it never cuts the answer in two. The view ends the
        # stream itself before the turn's own lines (calls, approvals).
        if self._streaming:
            self._held.append(text)
            return
        self._write(text + "\n")

    def stream(self, text: str) -> None:
        if text:
            self._streaming = not text.endswith("\n")
            self._write(text)
            if not self._streaming:
                self._release()

    def end_stream(self, mark: str = "") -> None:
        if self._streaming or mark:
            self._write(mark + "\n")
        self._streaming = False
        self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        for text in held:
            self._write(text + "\n")

    def set_prompt(self, text: str) -> None:
        if text != self.prompt and text != PROMPT:
            self.line(text.rstrip())  # a script waiting for the question sees it
        super().set_prompt(text)

    async def run_input(self, put: Put) -> None:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, lambda: put(Typed("", interrupt=True)))
        except (NotImplementedError, RuntimeError):
            pass
        done = asyncio.Event()

        def read() -> None:
            try:
                for raw in sys.stdin:
                    typed = Typed(raw.rstrip("\r\n"), self.asking)  # what was asked when it arrived
                    loop.call_soon_threadsafe(put, typed)
            except (OSError, ValueError):
                pass
            except RuntimeError:  # the chat ended (its loop closed) while this line was on its way
                return
            try:
                loop.call_soon_threadsafe(put, Typed(None))
                loop.call_soon_threadsafe(done.set)
            except RuntimeError:  # the chat ended before its input did: nobody waits for the end any more
                pass

        threading.Thread(target=read, name="palui-chat-input", daemon=True).start()
        await done.wait()


class TerminalScreen(Screen):
    """A terminal, through prompt_toolkit (imported only here: it takes a noticeable time)."""

    def __init__(self) -> None:
        super().__init__()
        from prompt_toolkit import PromptSession
        from prompt_toolkit.filters import Condition
        from prompt_toolkit.history import InMemoryHistory

        screen = self

        class History(InMemoryHistory):
            """The input history, which never keeps a secret typed at a hidden prompt."""

            def append_string(self, string: str) -> None:
                if not screen.hidden:
                    super().append_string(string)

        self.session: PromptSession[str] = PromptSession(erase_when_done=True, refresh_interval=0.25,
                                                         is_password=Condition(lambda: screen.hidden),
                                                         history=History(), key_bindings=_typed_bindings())
        self.partial = ""  # the streamed line not yet finished
        self._patch: AbstractContextManager[None] | None = None

    def __enter__(self) -> TerminalScreen:
        from prompt_toolkit.patch_stdout import patch_stdout

        self._patch = patch_stdout()
        self._patch.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.partial:
            print(self.partial)
            self.partial = ""
        if self._patch is not None:
            self._patch.__exit__(*exc)

    def _redraw(self) -> None:
        app = self.session.app
        if app.is_running:
            app.invalidate()

    def _message(self) -> str:
        top = [s for s in (self.partial, self.status_text()) if s]
        return "\n".join([*top, self.prompt])

    def line(self, text: str) -> None:
        # The streamed line being written stays in the live area under this line and goes on there: a
        # note printed meanwhile (``/quit``, ``/status``, an echoed line) never cuts the answer in two.
        # The view ends the stream itself before the turn's own lines (calls, approvals).
        print(text)
        self._redraw()

    def stream(self, text: str) -> None:
        self.partial += text
        *done, self.partial = self.partial.split("\n")
        for finished in done:
            print(finished)
        self._redraw()

    def end_stream(self, mark: str = "") -> None:
        if self.partial or mark:
            print(self.partial + mark)
        self.partial = ""
        self._redraw()

    def echo(self, text: str) -> None:
        from palui.text.display import shown

        self.line(f"{PROMPT}{shown(text, one_line=True)}")  # what was typed may hold hidden characters

    def set_prompt(self, text: str) -> None:
        super().set_prompt(text)
        self._redraw()

    def set_status(self, text: str | None, countdown_to: float | None = None) -> None:
        super().set_status(text, countdown_to)
        self._redraw()

    async def stop_input(self, reader: asyncio.Task[None]) -> None:
        """End the prompt as a finished prompt ends, not by cancelling it. What was printed goes out through
        prompt_toolkit's stdout proxy, which hands it to this event loop to write above the prompt; a
        cancelled prompt drops a write still in flight and erases its area over one just made, so a
        ``/quit`` typed while an answer streamed could lose the answer's last line. An application that
        exits waits for those writes; then a few turns of the loop run any handed over meanwhile (they
        write directly: no prompt runs any more)."""
        app = self.session.app
        if app.is_running and not reader.done():
            app.exit(exception=EOFError())
            try:
                await asyncio.wait_for(asyncio.shield(reader), 5.0)
            except (TimeoutError, asyncio.CancelledError, Exception):
                reader.cancel()
        else:
            reader.cancel()
        for _ in range(5):
            await asyncio.sleep(0)

    async def run_input(self, put: Put) -> None:
        while True:
            try:
                text = await self.session.prompt_async(self._message)
            except KeyboardInterrupt:
                put(Typed("", interrupt=True))
                continue
            except EOFError:
                put(Typed(None))
                return
            put(Typed(text, self.asking))


def _typed_bindings() -> Any:
    """Key bindings that keep whatever is typed (spec §8.2: any byte sequence is accepted).

    prompt_toolkit's input parser reads ``ESC [ digits ; … m`` (a colour code typed or pasted without
    bracketed paste, e.g. ``\x1b[31m``) as a mouse report, and its mouse handler then fails on it and
    the rest of the line is lost. The chat never turns mouse reporting on, so such a "report" is always
    typed text: it is inserted as it came (the ESC with it; what the chat later shows of it is escaped).
    Other unknown sequences are left to prompt_toolkit, which drops the ESC and keeps the rest as text.
    These bindings come after the defaults, so they win.
    """
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.key_binding.key_processor import KeyPressEvent
    from prompt_toolkit.keys import Keys

    bindings = KeyBindings()

    @bindings.add(Keys.Vt100MouseEvent, eager=True)
    def _typed_not_a_mouse(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text(event.data)

    return bindings


def make_screen() -> Screen:
    """A :class:`TerminalScreen` when standard input and output are a terminal, else a :class:`PipedScreen`."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return TerminalScreen()
    return PipedScreen()
