"""Pending approvals decided again after a change (spec §5): the lowest part, so every part that changes
tools, classes, switches or connectors — and the connector hub's ``on_change`` — can call it.

The decision itself is :mod:`palui.runner.redecide`; an approval whose call may no longer run is
cancelled and the person told, so ``approvals list`` stays true.
"""

from __future__ import annotations

from palui.runner import redecide
from palui.service.notifier import Notifier
from palui.store.db import Database


class Redecision:
    """Re-deciding pending approvals.

    Args:
        db: the database (approvals, tools, turns).
        notifier: the person's channel, told of each cancellation.
    """

    def __init__(self, db: Database, notifier: Notifier) -> None:
        self.db = db
        self.notifier = notifier

    def redecide_approvals(self) -> list[str]:
        """Decide every pending approval again (spec §5) and cancel, telling the person, each whose
        call may no longer run: called after every change to tools, classes, switches or connectors,
        so ``approvals list`` stays true. Returns the cancelled ids."""
        return redecide.cancel_refused(self.db, self.notifier)
