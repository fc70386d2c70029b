"""The job scheduler: a ticker of the service runtime (spec §6, §8).

Every tick (``PALUI_TICK_SECONDS``, default 1 s) it reads the scheduler clock
(:mod:`palui.triggers.clock`) and, for each job whose ``next_run`` has come, in order:

0. while the emergency brake holds the jobs (``palui stop --all``, spec §5.7), **skip** the run:
   the next run moves to the next cron fire, and the person is told once per pause;

1. **skip** the run when an earlier run of the job is still in progress (awaiting an
   approval, running or queued): the next run moves to the next cron fire, and the
   person is told once per waiting turn;
2. **postpone** the run when a cap refuses it: the job's own daily token cap or the
   global daily token cap → the next midnight in ``caps.timezone``; the runs-per-hour
   cap → when the sliding hour has room. The postponed run is one run (coalesced);
3. otherwise **start** one turn of origin ``job``. Fires missed while the service was
   down (or postponed) are coalesced into this one run, and the person is told how many.

The due run is claimed by a compare-and-set on ``next_run`` before its turn is created,
so a run is started at most once.
"""

from __future__ import annotations

import logging

from palui.config import Settings
from palui.service.brake import BrakePart
from palui.service.clock import Clock
from palui.service.jobs import JobsPart, Launch
from palui.service.notifier import Notifier
from palui.service.turn_tasks import TurnTasks
from palui.service.turns import TurnsPart
from palui.store.db import Database
from palui.triggers import jobs as jobs_mod
from palui.triggers.jobs import Job

log = logging.getLogger(__name__)


class Scheduler:
    """The service's job ticker (the runtime registers :meth:`tick` at ``palui serve`` start).

    Args:
        db, settings, notifier, clock: the service's shared collaborators (the scheduler clock decides
            what is due).
        jobs_part: the jobs' caps, postponements and turns.
        brake_part: whether the emergency brake holds the jobs, and telling the person once.
        turns_part: launches a job's turn.
        turn_tasks: no job starts while the process drains.
    """

    def __init__(self, db: Database, settings: Settings, notifier: Notifier, clock: Clock,
                 jobs_part: JobsPart, brake_part: BrakePart, turns_part: TurnsPart,
                 turn_tasks: TurnTasks) -> None:
        self.db = db
        self.settings = settings
        self.notifier = notifier
        self.clock = clock
        self.jobs_part = jobs_part
        self.brake_part = brake_part
        self.turns_part = turns_part
        self.turn_tasks = turn_tasks

    def _launch(self, turn_id: str) -> str | None:
        return self.turns_part.launch(turn_id).cap

    async def tick(self, _now: float) -> None:
        """Start due jobs (the runtime's real-time ``_now`` is ignored: jobs use the scheduler clock)."""
        if self.turn_tasks.draining:
            return
        self.run_due(self._launch, self.clock.scheduler_now())

    def run_due(self, launch: Launch, now: float | None = None) -> list[str]:
        """Handle every due job once. ``launch(turn_id)`` starts a created turn and returns the cap
        that refused it (or None). Returns the ids of the turns started."""
        now = self.clock.scheduler_now() if now is None else now
        started = []
        paused = self.brake_part.jobs_paused() is not None  # spec §5.7: the emergency brake holds every job
        for job in jobs_mod.due(self.db, now):
            if paused:
                tz = jobs_mod.zone_for(job.tz, self.settings.caps.timezone)
                if jobs_mod.move(self.db, job, next_run=jobs_mod.next_after(job.cron, now, tz)):
                    self.brake_part.note_jobs_paused()
                continue
            try:
                tid = self._fire(job, launch, now)
            except Exception:  # one broken job must not stop the others
                log.exception("job %s could not be started", job.name)
                continue
            if tid:
                started.append(tid)
        return started

    def _fire(self, job: Job, launch: Launch, now: float) -> str | None:
        jobs = self.jobs_part
        tz = jobs_mod.zone_for(job.tz, self.settings.caps.timezone)
        following = jobs_mod.next_after(job.cron, now, tz)
        waiting = jobs_mod.waiting_turn(self.db, job.id)
        if waiting is not None:
            first_note = waiting["id"] != job.skip_noted_turn
            if jobs_mod.move(self.db, job, next_run=following, skip_noted_turn=waiting["id"]) and first_note:
                why = ("still awaits your approval (see: palui approvals list)"
                       if waiting["status"] == "awaiting_approval" else f"is still {waiting['status']}")
                self.notifier("job", f"Job {job.name!r} skipped its run due {jobs.local_time(job.next_run, job)}: "
                                     f"its previous run (turn {waiting['id']}) {why}. Later runs are skipped too while "
                                     "it waits.", turn_id=waiting["id"])
            return None
        cap = jobs.cap(job)
        if cap:
            jobs.postpone(job, cap, now)
            return None
        missed = 0 if job.postponed_by else jobs_mod.missed_between(job.cron, job.next_run, now, tz)
        if not jobs_mod.move(self.db, job, next_run=following, last_run=now):
            return None  # removed or moved meanwhile
        tid = jobs.start_turn(job, now)
        if missed:
            more = "+" if missed >= jobs_mod.MISSED_COUNT_LIMIT else ""
            self.notifier("job", f"Job {job.name!r} missed {missed}{more} scheduled run(s) while the service was not "
                                 f"running; they are coalesced into this one run (turn {tid}).", turn_id=tid)
        cap = launch(tid)
        if cap:
            jobs.postpone(jobs_mod.get(self.db, job.id), cap, now, turn_id=tid)
            return None
        return tid
