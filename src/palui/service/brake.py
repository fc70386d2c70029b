"""Service part: the emergency brake (spec §5.7).

``palui stop --all`` and ``/stop all`` (every front end, parsed by :mod:`palui.text.commands`) stop every
running, waiting or queued turn, of every conversation, pause the scheduled jobs until ``palui jobs resume``
and pause the gateway until ``palui gateway resume``. Each pause is a row of the ``kv`` table, so every process
sees it: while the jobs' holds, the scheduler skips due runs (they move to their next fire; the person is told
once per pause) and ``palui jobs run`` is refused (:meth:`palui.service.jobs.JobsPart.start_now`
asks this part); while the gateway's holds, every gateway call and new session is refused, a call waiting for
its approval ends with the approval cancelled and a call in flight is cancelled within a second
(:mod:`palui.runner.gateway_pause`). A gateway session is not stopped: its calls are refused until the
gateway resumes. Chat messages sent after the brake start turns as usual: the brake stops what runs, it does
not lock the person out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palui.errors import PaluiError
from palui.runner import approvals, gateway_pause
from palui.service.clock import Clock
from palui.service.notifier import Notifier
from palui.service.turns import TurnsPart
from palui.store.db import Database
from palui.triggers import jobs as jobs_mod
from palui.types import Origin

if TYPE_CHECKING:
    from palui.results import JobsPause, StopAll


class JobsPaused(PaluiError):
    """A job run refused because the jobs are paused by the emergency brake."""


class BrakePart:
    """Stop everything; pause and resume the jobs.

    Args:
        db, notifier, clock: the service's shared collaborators.
        turns_part: stops each turn.
    """

    def __init__(self, db: Database, notifier: Notifier, clock: Clock, turns_part: TurnsPart) -> None:
        self.db = db
        self.notifier = notifier
        self.clock = clock
        self.turns_part = turns_part

    def stop_all(self, via: str = "cli") -> StopAll:
        """Pause the jobs and the gateway, then stop every running, awaiting-approval or queued turn (their
        pending approvals are cancelled; a running turn in another process stops at its next boundary) and
        cancel the pending approvals of the gateway's sessions. Returns ``{"stopped": [turn ids],
        "jobs_paused": {"since","by"}, "gateway_paused": {"since","by"}}``."""
        paused = self._pause_jobs(via)
        gateway = gateway_pause.pause(self.db, via, self.clock.now())
        stopped: list[str] = []
        for r in self.db.all("SELECT id, origin FROM turns WHERE status IN ('running','awaiting_approval','queued')"
                             " ORDER BY rowid"):
            if r["origin"] == Origin.GATEWAY.value:  # a session: its calls are refused while the gateway is paused
                approvals.cancel_for_turn(self.db, r["id"], reason=gateway_pause.PAUSED)
                continue
            stopped += self.turns_part.stop(turn=r["id"])
        self.notifier("notice", f"Emergency brake ({via}): stopped {len(stopped)} turn(s)"
                              f"{': ' + ', '.join(stopped) if stopped else ''}; scheduled jobs are paused until "
                              "palui jobs resume; the gateway is paused until palui gateway resume.")
        return {"stopped": stopped, "jobs_paused": paused, "gateway_paused": gateway}

    def _pause_jobs(self, via: str = "cli") -> JobsPause:
        """Pause every scheduled job (kept if already paused). Returns ``{"since","by"}`` (epoch s, who)."""
        return jobs_mod.pause(self.db, via, self.clock.now())

    def jobs_paused(self) -> JobsPause | None:
        """``{"since","by","noted"}`` while the jobs are paused, else None."""
        return jobs_mod.paused(self.db)

    def resume_jobs(self) -> bool:
        """``palui jobs resume``: the jobs run on their schedule again (from their next fire). True if they
        were paused."""
        was = jobs_mod.resume(self.db)
        if was:
            self.notifier("notice", "Scheduled jobs resumed: each runs again from its next scheduled time.")
        return was

    def note_jobs_paused(self) -> bool:
        """Tell the person, once per pause, that due runs are skipped. True if this call told them."""
        if not jobs_mod.claim_pause_note(self.db):
            return False
        self.notifier("job", "A scheduled job was due, but the jobs are paused by the emergency brake: due runs are "
                           "skipped until palui jobs resume.")
        return True
