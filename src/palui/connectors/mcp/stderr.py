"""A stdio MCP server's stderr, captured to a capped log file (spec §7).

The server writes into a pipe; a daemon thread drains it as fast as it can, so a
server flooding stderr never blocks on a full pipe. The log is
``<data dir>/logs/<connector id>.stderr.log``; when it reaches half the cap it becomes
``….stderr.log.1`` (replacing the previous one) and a fresh file starts, so the two
files together stay under the cap (default 1 MiB) and the newest output is kept.

A server may print its environment: every secret value of the connector is replaced by
``***`` (:func:`~palui.connectors.mcp.config.redact`, spec §10) before anything reaches
the file. Output is redacted line by line, so a secret split across two pipe reads is
still caught; a line longer than 64 KiB is written in pieces that keep back enough of
their end (the longest secret's length) to catch a secret crossing the cut.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from palui.connectors.mcp.config import MIN_REDACT_LEN, redact

DEFAULT_CAP_BYTES = 1024 * 1024
_CHUNK = 64 * 1024
_MAX_LINE = 64 * 1024  # bytes held back waiting for a newline before a piece is written anyway


class Redactor:
    """Turns a byte stream into the same stream with every secret value replaced by ``***``.

    :meth:`feed` returns the bytes that are safe to write now; :meth:`finish` the rest at
    end-of-file. Bytes are decoded with ``surrogateescape``, so any output (not only UTF-8)
    passes through unchanged apart from the secrets.

    Args:
        secrets: the secret values (those shorter than 4 characters are left, as in ``redact``).
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = [s for s in dict.fromkeys(secrets) if s and len(s) >= MIN_REDACT_LEN]
        # A secret crossing a forced cut has at most len(secret) - 1 bytes before it.
        self._keep = max((len(s.encode("utf-8", "surrogateescape")) for s in self.secrets), default=1) - 1
        self._pending = b""

    def _redact(self, data: bytes) -> bytes:
        if not self.secrets:
            return data
        text = data.decode("utf-8", "surrogateescape")
        return redact(text, self.secrets).encode("utf-8", "surrogateescape")

    def feed(self, chunk: bytes) -> bytes:
        """Add ``chunk``; return the redacted bytes that can be written now."""
        if not self.secrets:
            return chunk
        data = self._pending + chunk
        cut = data.rfind(b"\n") + 1
        done, self._pending = data[:cut], data[cut:]
        out = self._redact(done)
        if len(self._pending) > _MAX_LINE:
            # A very long line: redact what is there, write all but the tail that may hold
            # the beginning of a secret whose end has not arrived yet.
            piece = self._redact(self._pending)
            split = len(piece) - self._keep
            out, self._pending = out + piece[:split], piece[split:]
        return out

    def finish(self) -> bytes:
        """The redacted rest (end-of-file)."""
        rest, self._pending = self._pending, b""
        return self._redact(rest)


def log_path(data_dir: Path, connector_id: str) -> Path:
    """``<data dir>/logs/<connector id>.stderr.log``."""
    return data_dir / "logs" / f"{connector_id}.stderr.log"


def _open_log(path: Path) -> IO[bytes]:
    # Mode 0600: a server may print its environment (secrets) on stderr.
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")


class StderrCapture:
    """One server process's stderr pipe and its capped log.

    Use :meth:`open` to get the write end to hand to the child (as its stderr), then
    :meth:`spawned` once the child exists, so that the pipe reports end-of-file when
    the child (and everything that inherited its stderr) has exited; ``exited`` is set
    then.

    Args:
        path: the log file; its directory is created.
        cap_bytes: the most the log and its one rotated predecessor hold together.
        secrets: the connector's secret values, replaced by ``***`` before writing (spec §10).
    """

    def __init__(self, path: Path, cap_bytes: int = DEFAULT_CAP_BYTES, secrets: Iterable[str] = ()) -> None:
        self.path = path
        self.cap_bytes = cap_bytes
        self.secrets = list(secrets)
        self.exited = threading.Event()
        self._write_end: IO[str] | None = None
        self._thread: threading.Thread | None = None

    def open(self) -> IO[str]:
        """Create the pipe and start draining it. Returns the write end for the child."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        self._write_end = os.fdopen(write_fd, "w")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._thread = threading.Thread(target=self._drain, args=(read_fd, stamp), daemon=True,
                                        name=f"stderr:{self.path.name}")
        self._thread.start()
        return self._write_end

    def spawned(self) -> None:
        """Close our copy of the write end: from now on only the child holds it."""
        if self._write_end is not None:
            try:
                self._write_end.close()
            except OSError:
                pass
            self._write_end = None

    def _drain(self, read_fd: int, stamp: str) -> None:
        half = max(self.cap_bytes // 2, 1)
        out = None
        redactor = Redactor(self.secrets)
        try:
            out = _open_log(self.path)
            out.write(f"--- server started {stamp} ---\n".encode())
            size = out.tell()
            at_end = False
            while not at_end:
                raw = os.read(read_fd, _CHUNK)
                at_end = not raw
                chunk = redactor.finish() if at_end else redactor.feed(raw)
                if not chunk:
                    continue
                if size + len(chunk) > half:
                    out.close()
                    os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                    out = _open_log(self.path)
                    size = 0
                    chunk = chunk[-half:]
                out.write(chunk)
                out.flush()
                size += len(chunk)
        except OSError:
            # The log is a diagnostic aid: a full disk must not stop the pipe from
            # being drained, so keep reading and discard.
            try:
                while os.read(read_fd, _CHUNK):
                    pass
            except OSError:
                pass
        finally:
            if out is not None:
                try:
                    out.close()
                except OSError:
                    pass
            os.close(read_fd)
            self.exited.set()

    def tail(self, max_bytes: int = 1500) -> str:
        """The last lines of the log (at most ``max_bytes``), for error messages."""
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(f.tell() - max_bytes, 0))
                data = f.read()
        except OSError:
            return ""
        text = data.decode("utf-8", errors="replace")
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("--- server started")]
        if len(data) >= max_bytes and len(lines) > 1:
            lines = lines[1:]  # the first line is probably cut
        return "\n".join(ln if len(ln) <= 300 else "…" + ln[-300:] for ln in lines[-8:])

    def close(self) -> None:
        """Release our write end (the drain thread ends by itself at end-of-file)."""
        self.spawned()
