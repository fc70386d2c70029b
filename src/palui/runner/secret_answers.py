"""Answers to secret questions, held in this process's memory only (spec §7.8).

A form field that asks for a secret (:mod:`palui.text.secret_fields`) is answered only where the person
allowed it, with hidden input; its value must never be stored, logged or put in a conversation. So the
service's door (:meth:`palui.service.elicitations.ElicitationsPart.answer`) records such an
answer as given (``accepted``, no content, ``owner`` this process) and keeps the content here, in the
process that answered; the call that sends it (:func:`palui.runner.elicitations.reply_of`) takes it from
here and drops it once sent (:func:`drop`). A process that ends takes its held answers with it: a call
resumed elsewhere sends ``cancel`` ("the secret answer was held by a process that ended").
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

_HELD: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()


def hold(elicitation_id: str, content: dict[str, Any]) -> None:
    """Keep the accepted ``content`` of a secret question until it is sent."""
    with _LOCK:
        _HELD[elicitation_id] = dict(content)


def held(elicitation_id: str) -> dict[str, Any] | None:
    """The content held for ``elicitation_id`` in this process (None: not here)."""
    with _LOCK:
        found = _HELD.get(elicitation_id)
    return dict(found) if found is not None else None


def held_ids() -> list[str]:
    """The questions whose answers this process holds now (few: each waits only until its call sends it)."""
    with _LOCK:
        return list(_HELD)


def drop(elicitation_ids: Iterable[str]) -> None:
    """The replies went (or their call ended): forget their content."""
    with _LOCK:
        for eid in elicitation_ids:
            _HELD.pop(eid, None)
