"""Service part: the emergency brake (issue 15 §7).

``palui stop --all`` and ``/stop all`` (every front end, parsed by :mod:`palui.text.commands`) stop every
running, waiting or queued turn, of every conversation and origin, and pause the scheduled jobs until
``palui jobs resume``. The pause is a row of the ``kv`` table, so every process sees it: while it holds,
the scheduler skips due runs (they move to their next fire; the person is told once per pause) and
``palui jobs run`` is refused. Chat messages sent after the brake start turns as usual: the brake stops
what runs, it does not lock the person out.
"""

from __future__ import annotations

import time
from typing import Any

from palui.errors import PaluiError
from palui.service.triggers import Launch, TriggersPart
from palui.triggers import jobs as jobs_mod


class JobsPaused(PaluiError):
    """A job run refused because the jobs are paused by the emergency brake."""


class BrakePart(TriggersPart):
    """Stop everything; pause and resume the jobs."""

    def stop_all(self, via: str = "cli") -> dict[str, Any]:
        """Pause the jobs, then stop every running, awaiting-approval or queued turn (their pending approvals
        are cancelled; a running turn in another process stops at its next boundary). Returns
        ``{"stopped": [turn ids], "jobs_paused": {"since","by"}}``."""
        paused = self.pause_jobs(via)
        stopped: list[str] = []
        for r in self.db.all("SELECT id FROM turns WHERE status IN ('running','awaiting_approval','queued')"
                             " ORDER BY rowid"):
            stopped += self.stop(turn=r["id"])
        self.notify("notice", f"Emergency brake ({via}): stopped {len(stopped)} turn(s)"
                              f"{': ' + ', '.join(stopped) if stopped else ''}; scheduled jobs are paused until "
                              "palui jobs resume.")
        return {"stopped": stopped, "jobs_paused": paused}

    def pause_jobs(self, via: str = "cli") -> dict[str, Any]:
        """Pause every scheduled job (kept if already paused). Returns ``{"since","by"}`` (epoch s, who)."""
        return jobs_mod.pause(self.db, via, time.time())

    def jobs_paused(self) -> dict[str, Any] | None:
        """``{"since","by","noted"}`` while the jobs are paused, else None."""
        return jobs_mod.paused(self.db)

    def resume_jobs(self) -> bool:
        """``palui jobs resume``: the jobs run on their schedule again (from their next fire). True if they
        were paused."""
        was = jobs_mod.resume(self.db)
        if was:
            self.notify("notice", "Scheduled jobs resumed: each runs again from its next scheduled time.")
        return was

    def note_jobs_paused(self) -> bool:
        """Tell the person, once per pause, that due runs are skipped. True if this call told them."""
        if not jobs_mod.claim_pause_note(self.db):
            return False
        self.notify("job", "A scheduled job was due, but the jobs are paused by the emergency brake: due runs are "
                           "skipped until palui jobs resume.")
        return True

    def start_job_now(self, name: str, launch: Launch) -> str:
        """``palui jobs run NAME`` — refused while the jobs are paused (raises JobsPaused)."""
        if self.jobs_paused():
            raise JobsPaused(f"job {name!r} not started: the jobs are paused by the emergency brake "
                             "(palui stop --all); palui jobs resume lets them run again")
        return super().start_job_now(name, launch)
