"""Drive the real ``palui chat`` as a person would (spec §8.2): through piped standard input
(:class:`PipedChat`) or in a real terminal (:class:`TmuxChat`: tmux ``send-keys`` / ``capture-pane``).

Both start ``python -m palui chat`` with a fresh PALUI_HOME and give the same three calls:
``send(line)``, ``wait_for(text, timeout)`` (returns the seconds it took) and ``output()``
(everything shown so far). Timeouts are generous: the machine is shared.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from support.inprocess import Started
from support.waiting import guard


def chat_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    env.update(extra or {})
    return env


class ChatDriver:
    def send(self, line: str) -> None:
        raise NotImplementedError

    def output(self) -> str:
        raise NotImplementedError

    def wait_for(self, text: str, timeout: float = 30.0, after: str = "") -> float:
        timeout = guard(timeout)  # a guard against a hang (support/waiting.py)
        """Wait until ``text`` shows (once more than in the output ``after``, a :meth:`mark`); the seconds
        it took."""
        start = time.monotonic()
        before = after.count(text)
        while True:
            if self.output().count(text) > before:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise AssertionError(f"timed out after {timeout} s waiting for {text!r}; the chat shows:\n"
                                     + self.output()[-4000:])
            time.sleep(0.05)

    def mark(self) -> str:
        """The output now: ``wait_for(…, after=mark)`` waits for text shown after it. (A count, not a
        position: a terminal redraws its prompt lines, so positions move.)"""
        return self.output()


class PipedChat(ChatDriver):
    """``palui chat`` with standard input and output as pipes (scripts and tests drive it this way).

    In this process by default (:class:`support.inprocess.Started`: the chat reads a pipe and writes to the
    process's standard streams, so nothing else may run a command in this process until it ends); with
    ``process=True`` as ``python -m palui chat`` in a child, for a test that runs other commands meanwhile or
    reads :attr:`arrivals` (when each piece of output came)."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None, process: bool = False) -> None:
        self._out: list[str] = []
        self.arrivals: list[tuple[float, str]] = []  # (monotonic time, text) of each read from stdout (a child's)
        self._lock = threading.Lock()
        self._here: Started | None = None
        self.proc: subprocess.Popen | None = None
        if not process:
            self._here = Started(["chat", *args], env=chat_env(home, env))
            return
        self.proc = subprocess.Popen([sys.executable, "-m", "palui", "chat", *args], env=chat_env(home, env),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            chunk = self.proc.stdout.read(1)
            if not chunk:
                return
            with self._lock:
                self._out.append(chunk)
                self.arrivals.append((time.monotonic(), chunk))

    def send(self, line: str) -> None:
        if self._here is not None:
            self._here.write(line + "\n")
            return
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def output(self) -> str:
        if self._here is not None:
            return self._here.output(stderr=True)
        with self._lock:
            return "".join(self._out)

    def close(self, timeout: float = 30.0) -> int:
        """End the input (the chat leaves once its turn settles) and wait for the process."""
        if self._here is not None:
            return self._here.wait(guard(timeout)).returncode
        assert self.proc is not None
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError("palui chat did not end after its input did:\n" + self.output()[-3000:]) from None

    def __enter__(self) -> PipedChat:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._here is not None:
            if self._here.running():  # it cannot be killed here: its input ends, and it leaves
                self._here.wait(guard(30))
        elif self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            for pipe in (self.proc.stdin, self.proc.stdout):  # the reader thread ends at the closed pipe
                try:
                    if pipe is not None:
                        pipe.close()
                except OSError:
                    pass


def tmux_path() -> str:
    """tmux; skips the test (fails under CI, where .ci/run installs it) when it is missing."""
    path = shutil.which("tmux")
    if not path:
        message = "tmux is not installed: apt-get install -y tmux"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


class TmuxChat(ChatDriver):
    """``palui chat`` in a real terminal: a tmux session on its own server socket (120×40)."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.tmux = tmux_path()
        self.socket = f"palui-test-{uuid.uuid4().hex[:8]}"
        e = chat_env(home, env)
        e.pop("TMUX", None)
        command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "palui", "chat", *args])
        self.log = home / "chat-exit.txt"
        # Keep the pane after the chat ends, with its exit code, so a test can read both.
        script = f"{command}; echo \"[exit $?]\" > {shlex.quote(str(self.log))}; sleep 600"
        subprocess.run([self.tmux, "-L", self.socket, "new-session", "-d", "-s", "chat", "-x", "120", "-y", "40",
                        "sh", "-c", script], env=e, check=True)

    def _tmux(self, *args: str) -> str:
        r = subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True, text=True)
        return r.stdout

    def send(self, line: str) -> None:
        self._tmux("send-keys", "-t", "chat", "-l", line)
        self._tmux("send-keys", "-t", "chat", "Enter")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "chat", *keys)

    def screen(self) -> str:
        """What the terminal shows now (the visible pane)."""
        return self._tmux("capture-pane", "-t", "chat", "-p", "-J")

    def output(self) -> str:
        """Everything shown so far: the scrollback and the visible pane, wrapped lines joined."""
        return self._tmux("capture-pane", "-t", "chat", "-p", "-J", "-S", "-")

    def exit_code(self) -> int | None:
        try:
            return int(self.log.read_text().strip().removeprefix("[exit ").removesuffix("]"))
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True)

    def __enter__(self) -> TmuxChat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
