"""Ids of turns, conversations, approvals and questions: never colliding, typed short (spec §1).

An id is its kind's prefix (``t-`` turn, ``c-`` conversation, ``a-`` approval, ``e-`` a server's
question, ``s-`` a request for a wider scope, ``r-`` a standing approval, ``j-`` job, ``g-`` a gateway session), a
dash and **128 random bits** as 32 lowercase hex digits
(``t-3f9a1c2b7d…``). Random, not time-ordered: the leading digits of time-ordered ids are the
same for ids made close together, so a short form would not tell them apart. With 40 random bits (the
ids before this scheme, 10 hex digits) a million stored turns collided with a chance of about one in
three (the birthday bound n²/2^41); with 128 bits the chance stays below 10^-26 for a billion ids.

The person may give any **unique prefix** of at least :data:`MIN_TYPED` hex digits (the ``t-``
included): :func:`resolve` turns it into the stored id, and refuses an ambiguous prefix naming the
candidates. :func:`short` is the form a listing may show: the first :data:`SHORT` hex digits, as long as
the ids before this scheme, which are their own short form and keep working unchanged. Resolving goes
through each table's primary-key index (a range scan of the ids starting with the prefix).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from palui.errors import UsageError

if TYPE_CHECKING:
    from palui.store.db import Database

#: The table of each kind whose ids a person may type short.
TABLES = {"t": "turns", "c": "conversations", "a": "approvals", "e": "elicitations", "s": "scope_requests",
          "r": "standing_approvals", "g": "gateway_sessions"}
RANDOM_BYTES = 16  # 128 bits
SHORT = 10  # hex digits of the short form (the length of the ids before this scheme)
MIN_TYPED = 6  # hex digits a typed prefix must have: fewer would match too many to be useful
CANDIDATES = 5  # ids an ambiguous prefix names
_TYPED = re.compile(rf"\A([{''.join(TABLES)}])-([0-9a-fA-F]{{{MIN_TYPED},{RANDOM_BYTES * 2}}})\Z")


def new_id(prefix: str) -> str:
    """A new id such as ``t-3f9a1c2b7d04e6a8b9c0d1e2f3a4b5c6`` (128 random bits)."""
    return f"{prefix}-{os.urandom(RANDOM_BYTES).hex()}"


def short(ident: str) -> str:
    """The short form shown to the person: the prefix and the first :data:`SHORT` hex digits."""
    head, _, digits = ident.partition("-")
    return f"{head}-{digits[:SHORT]}" if digits else ident


def resolve(db: Database, given: str) -> str:
    """The stored id that ``given`` names: itself when stored (or not id-shaped: the caller's lookup
    then says it is unknown), else the one stored id it is a prefix of.

    Raises:
        UsageError: the prefix starts more than one stored id (up to :data:`CANDIDATES` are named).
    """
    if not isinstance(given, str):
        return given
    m = _TYPED.match(given.strip())
    if m is None:
        return given
    table = TABLES[m.group(1)]
    typed = f"{m.group(1)}-{m.group(2).lower()}"
    if len(m.group(2)) == RANDOM_BYTES * 2:
        return typed  # a whole id (what the front ends pass back): nothing to look up
    if db.one(f"SELECT 1 FROM {table} WHERE id = ?", (typed,)) is not None:
        return typed
    # "~" sorts after every hex digit: the range is exactly the ids that start with the prefix.
    rows = db.all(f"SELECT id FROM {table} WHERE id > ? AND id < ? ORDER BY id LIMIT ?",
                  (typed, typed + "~", CANDIDATES + 1))
    if len(rows) == 1:
        return str(rows[0][0])
    if len(rows) > 1:
        more = ", …" if len(rows) > CANDIDATES else ""
        names = ", ".join(str(r[0]) for r in rows[:CANDIDATES])
        raise UsageError(f"{given} is ambiguous: it starts {names}{more}; give more of the id")
    return given
