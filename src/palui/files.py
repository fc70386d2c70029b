"""A file the person names (a ``script:`` model, a token file, an ``mcpServers`` file, a policy file), read
whole only when it is a regular file under a size limit.

``palui run hi --model script:/dev/zero`` once grew to 12 GB before anything was checked, and a FIFO
blocks a plain ``open`` for ever: the file is opened without blocking, checked by its descriptor (so a
name swapped for something else between a check and the read is still refused), and read no further
than its limit (spec §9.2: the ``script:`` model; spec §10.4).
"""

from __future__ import annotations

import os
import stat
from typing import IO

#: The largest file a person names that Palui reads whole (1 MB): a ``script:`` model, an ``mcpServers`` file,
#: ``palui.toml``.
MAX_BYTES = 1_000_000
#: The largest secret file read (a bot token, a password, a client secret): a secret is short.
SECRET_MAX_BYTES = 65_536
#: The largest policy file read (``palui policy snapshot``: six rows of about 60 bytes per tool).
POLICY_MAX_BYTES = 16_000_000


class Unreadable(ValueError):
    """Why a named file was not read, as a phrase to follow its name: ``file not found``, ``not a
    regular file (a device)``, ``larger than 1,000,000 bytes``, ``cannot be read (Permission denied)``."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"))


def read_bytes(path: str | os.PathLike[str], limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them. Raises :class:`Unreadable`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise Unreadable("file not found") from None
    except OSError as e:
        raise Unreadable(f"cannot be read ({e.strerror})") from None
    chunks: list[bytes] = []
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((word for test, word in _KINDS if test(mode)), "not a file")
            raise Unreadable(f"not a regular file ({kind})")
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise Unreadable(f"cannot be read ({e.strerror})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise Unreadable(f"larger than {limit:,} bytes")
    return data


def read_text(path: str | os.PathLike[str], limit: int = MAX_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8. Raises :class:`Unreadable` (also for bytes that are not UTF-8)."""
    try:
        return read_bytes(path, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None


def read_stream_text(stream: IO[str], limit: int = MAX_BYTES) -> str:
    """At most ``limit`` characters of a text stream (standard input given as ``-``). Raises
    :class:`Unreadable` when it holds more, or bytes that are not text."""
    try:
        text = stream.read(limit + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise Unreadable(f"cannot be read ({type(e).__name__})") from None
    if len(text) > limit:
        raise Unreadable(f"larger than {limit:,} characters")
    return text
