"""JSON as RFC 8259 defines it, and what Python's ``json`` lets through besides (spec §10.1).

Python's ``json`` reads and writes ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON: SQLite's JSON
functions refuse a row holding one (``malformed JSON``), a browser's ``JSON.parse`` and Starlette's
responses too. Every writer of stored or printed JSON goes through :func:`dumps` (``allow_nan=False``, a
non-finite number raises ``ValueError``); a reader of rows an earlier Palui wrote with such numbers (the
hashed ones are never rewritten: decisions 0132, 0133) shows them with :func:`finite`, as the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"``.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: What a non-finite number reads as once :func:`finite` made it a string (Python's own spelling of it).
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def dumps(value: Any, **kw: Any) -> str:
    """``json.dumps(value, **kw)`` that refuses ``NaN`` and ``±Infinity`` (raises ``ValueError``)."""
    return json.dumps(value, allow_nan=False, **kw)


def non_finite(value: Any) -> bool:
    """Whether ``value`` (JSON-like: dicts, lists, scalars) holds ``NaN`` or ``±Infinity`` anywhere."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(non_finite(v) for v in value)
    return False


def finite(value: Any) -> Any:
    """``value`` with every non-finite number made the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``
    (the rest as it is, the same object when nothing changes): what a reader shows of a row an earlier
    Palui stored with such a number, so its output stays JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE[repr(value)]
    if isinstance(value, dict):
        if not non_finite(value):
            return value
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if not non_finite(value):
            return value
        return [finite(v) for v in value]
    return value
