"""A request's body and query string as every route reads them: within a size limit, each name once (spec §8.1).

Starlette's ``request.body()`` reads whatever arrives: an authenticated ``/api`` route once parsed a 60 MB body
before refusing it (a 104 MB one peaked at 525 MB of memory). :func:`read_body` refuses a body over its
route's limit from its ``Content-Length`` before reading, and otherwise stops reading as soon as the bytes
pass the limit. Python's JSON parser, pydantic's and ``parse_qsl`` keep the last of two equal names, so
``{"message": "a", "message": "b"}`` or ``?limit=1&limit=1000`` would mean something the sender's other
parser may read otherwise: :func:`json_duplicate` and :func:`pairs_duplicate` find the name that appears
twice, and the routes refuse it naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request

from palui.errors import PaluiError
from palui.text.escape import escape

#: The longest name a refusal repeats, in characters (a name is the sender's text).
_NAME_CHARS = 100


class BodyTooLarge(PaluiError):
    """The request's body is over its route's limit (``limit`` bytes): answered 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is over {limit:,} bytes")
        self.limit = limit


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, at most ``limit`` bytes. Raises :class:`BodyTooLarge` when ``Content-Length`` says more,
    or as soon as more arrived (a chunked body, or one that says less than it sends)."""
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > limit:
            raise BodyTooLarge(limit)
    return bytes(buf)


def shown_name(name: str) -> str:
    """A name the sender chose, as a refusal repeats it: hidden characters escaped, cut at 100 characters."""
    cut = name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS] + "…"
    return escape(cut, one_line=True)


class _Twice(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Twice(key)
        seen.add(key)
    return dict(pairs)


def json_duplicate(raw: bytes | str) -> str | None:
    """The first object key that appears twice in one object of the JSON text ``raw`` (at any depth), or
    None: none does, or ``raw`` is not JSON (the route's model then says so)."""
    try:
        json.loads(raw, object_pairs_hook=_pairs)
    except _Twice as twice:
        return twice.name
    except (ValueError, RecursionError):
        return None
    return None


def pairs_duplicate(pairs: Iterable[tuple[str, Any]]) -> str | None:
    """The first name that appears twice among ``pairs`` (a query string's or a form's fields), or None."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None
