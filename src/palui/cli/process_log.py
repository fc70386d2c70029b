"""``<data dir>/logs/palui.log``: the process's log, capped and rotated like a stdio server's stderr log (spec §10.1).

Library records (uvicorn's complaints, the MCP SDK's, an unexpected error's traceback with its id) go here,
never to the terminal. The file was a plain ``FileHandler``: no cap, no rotation, and one call to a server
printing junk on stdout grew it from 0 to 18.6 MB. Now, as :mod:`palui.connectors.mcp.stderr` does for a
server's stderr, when the file would pass half of :data:`CAP_BYTES` it becomes ``palui.log.1`` (replacing the
previous one) and a fresh file starts, so the two together stay under the cap and the newest records are kept.
One record is cut at :data:`RECORD_CHARS` characters. Several processes write the file (``palui serve`` and
each command): each checks the file's size on disk, not what it wrote itself, and one whose file was rotated
by another opens the new one, so the bound holds whoever rotates.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

#: What ``palui.log`` and ``palui.log.1`` hold together at most, in bytes.
CAP_BYTES = 4 * 1024 * 1024
#: The longest record written, in characters (a traceback of a huge message is cut, with its length said).
RECORD_CHARS = 64 * 1024


class _CutFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if len(text) <= RECORD_CHARS:
            return text
        return f"{text[:RECORD_CHARS]} … [cut by Palui: the record has {len(text):,} characters]"


class CappedLog(logging.handlers.RotatingFileHandler):
    """A :class:`~logging.handlers.RotatingFileHandler` at half the cap with one predecessor, that measures
    the file on disk and follows a rotation made by another process."""

    def __init__(self, path: Path, cap_bytes: int = CAP_BYTES) -> None:
        super().__init__(path, maxBytes=max(cap_bytes // 2, 1), backupCount=1, encoding="utf-8", delay=True)
        self.setFormatter(_CutFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def shouldRollover(self, record: logging.LogRecord) -> bool:  # noqa: N802 (logging's name)
        try:
            on_disk = os.stat(self.baseFilename)
        except OSError:
            on_disk = None
        if self.stream is not None and (on_disk is None or os.fstat(self.stream.fileno()).st_ino != on_disk.st_ino):
            self.stream.close()  # another process rotated it: write to the file now at the path
            self.stream = self._open()
        size = on_disk.st_size if on_disk is not None else 0
        return size + len(self.format(record)) + 1 > self.maxBytes


def handler(data_dir: Path) -> logging.Handler:
    """The handler of ``<data_dir>/logs/palui.log`` (the directory made, mode 0700)."""
    logs = data_dir / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    return CappedLog(logs / "palui.log")
