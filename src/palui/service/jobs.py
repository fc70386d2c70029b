"""Service part: scheduled jobs (spec §6, §8.4).

Jobs run as turns of origin ``job`` (reads run, writes ask with the 24 h job expiry,
destructive tools are not offered — the runner and the policy do that). A job run
refused by a cap never leaves a queued turn behind: the caps are checked before the
turn is created, and if they change between that check and the admitting claim the
turn is marked ``stopped`` ("not started") and the job postponed (docs/triggers.md).

A job's times are on the scheduler clock (:meth:`palui.service.clock.Clock.scheduler_now`), the caps
on the real one. While the emergency brake holds the jobs (:mod:`palui.service.brake`) no job is started.
The scheduler (:mod:`palui.service.scheduler`) starts due runs with :meth:`JobsPart.cap`,
:meth:`JobsPart.postpone` and :meth:`JobsPart.start_turn`; a job's own token cap and connector scope,
which the runner and the admitting claim read, are :func:`palui.triggers.jobs.own_token_cap` and
:func:`palui.triggers.jobs.scope_of`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from palui.config import Settings
from palui.errors import JobRefused, PaluiError, UsageError
from palui.runner import caps
from palui.runner import state as st
from palui.service.brake import BrakePart, JobsPaused
from palui.service.clock import Clock
from palui.service.notifier import Notifier
from palui.service.turn_tasks import EventSink
from palui.service.turns import TurnsPart
from palui.store.db import Database
from palui.triggers import jobs as jobs_mod
from palui.triggers.jobs import Job
from palui.types import Origin

if TYPE_CHECKING:
    # The result shape of a job (the ``Job`` of palui.results; ``Job`` here is the stored row).
    from palui.results import Job as JobResult
    from palui.results import TurnResult

#: Starts a queued turn that this process created; returns the cap that refused it, or None.
Launch = Callable[[str], "str | None"]

GLOBAL_CAPS = st.GLOBAL_CAPS


class JobsPart:
    """Scheduled jobs: the table, their caps, and starting a run.

    Args:
        db, settings, notifier, clock: the service's shared collaborators.
        turns_part: creates, admits, runs and stops the turns of jobs.
        brake_part: whether the emergency brake holds the jobs.
    """

    def __init__(self, db: Database, settings: Settings, notifier: Notifier, clock: Clock, turns_part: TurnsPart,
                 brake_part: BrakePart) -> None:
        self.db = db
        self.settings = settings
        self.notifier = notifier
        self.clock = clock
        self.turns_part = turns_part
        self.brake_part = brake_part

    # -- the table ------------------------------------------------------------------------------

    def add(self, name: str, cron: str, prompt: str, token_cap: int | None = None,
            tz: str | None = None, connectors: list[str] | None = None) -> JobResult:
        """Add a job; returns it as :meth:`list` does. Its first run is the first cron fire after now
        (scheduler clock). ``connectors`` limits its turns to those connectors' tools (spec §8.4).
        Raises UsageError (bad name, cron, zone, cap; name taken; unknown connector)."""
        scope = sorted(set(connectors)) if connectors else None
        for cid in scope or []:
            if not self.db.one("SELECT 1 FROM connectors WHERE id = ?", (cid,)):
                raise UsageError(f"--connector {cid!r}: no such connector (see: palui connectors list)")
        job = jobs_mod.add(self.db, name=name, cron=cron, prompt=prompt, token_cap=token_cap, tz=tz,
                           caps_timezone=self.settings.caps.timezone, now=self.clock.scheduler_now(),
                           connectors=scope)
        return self._shown(job)

    def list(self) -> builtins.list[JobResult]:
        """Every job, by name (the ``palui jobs list --json`` shape, see :meth:`_shown`)."""
        return [self._shown(j) for j in jobs_mod.all_jobs(self.db)]

    def remove(self, name: str) -> JobResult:
        """Delete a job (its past turns stay). Its turns still waiting (for an approval, or queued)
        are stopped and their approvals cancelled: a removed job does nothing more. Raises NotFound."""
        job = jobs_mod.remove(self.db, name)
        for r in self.db.all("SELECT id FROM turns WHERE job_id = ? AND status IN ('awaiting_approval', 'queued',"
                             " 'running')", (job.id,)):
            self.turns_part.stop(turn=r["id"])
        return self._shown(job)

    def _job_zone(self, job: Job) -> tzinfo:
        return jobs_mod.zone_for(job.tz, self.settings.caps.timezone)

    def local_time(self, t: float | None, job: Job) -> str | None:
        """Epoch seconds as ISO 8601 in the job's zone (None stays None)."""
        return datetime.fromtimestamp(t, self._job_zone(job)).isoformat() if t is not None else None

    def _shown(self, job: Job) -> JobResult:
        """``{"id","name","cron","prompt","token_cap","tz","next_run","last_run","last_turn","last_status",
        "postponed_by","tokens_today","created_at","connectors"}``; times ISO 8601 in the job's zone,
        ``token_cap`` is the effective cap (the job's own, else ``caps.job_daily_tokens``), ``connectors``
        the connectors it is limited to (None: all)."""
        last = self.db.one("SELECT status FROM turns WHERE id = ?", (job.last_turn_id,)) if job.last_turn_id else None
        return {
            "id": job.id, "name": job.name, "cron": job.cron, "prompt": job.prompt,
            "token_cap": job.token_cap or self.settings.caps.job_daily_tokens,
            "own_token_cap": job.token_cap is not None,
            "tz": job.tz or self.settings.caps.timezone or "system",
            "next_run": self.local_time(job.next_run, job), "last_run": self.local_time(job.last_run, job),
            "last_turn": job.last_turn_id, "last_status": last["status"] if last else None,
            "postponed_by": job.postponed_by,
            "tokens_today": caps.tokens_today(self.db, self.clock.timezone(), job.id),
            "created_at": self.local_time(job.created_at, job),
            "connectors": job.scope,
        }

    # -- caps and starting runs ---------------------------------------------------------------------

    def cap(self, job: Job, now: float | None = None) -> str | None:
        """The cap that would refuse a run of ``job`` now (``"job token cap"``, ``"daily token cap"``,
        ``"runs per hour cap"``), or None. Read-only; the admitting claim checks again."""
        now = self.clock.now() if now is None else now
        with self.db.write() as c:  # the same counters the admitting transaction reads
            v = self.turns_part.caps_verdict(c, {"job_id": job.id, "origin": Origin.JOB.value}, now)
        return None if v.ok else v.cap

    def _cap_frees_at(self, cap: str, now: float) -> float:
        """Epoch seconds when ``cap`` lets a run start again: the next midnight in ``caps.timezone``
        for token caps, the time the sliding hour has room for the runs cap (spec §6)."""
        if cap == "runs per hour cap":
            iso = caps.window_frees_at(self.db, self.settings.caps.runs_per_hour)
            if iso:
                return max(now, datetime.fromisoformat(iso).timestamp())
            return now + 60
        return datetime.fromisoformat(caps.next_day(self.clock.timezone(), now)).timestamp()

    def postpone(self, job: Job, cap: str, now: float, turn_id: str | None = None) -> float:
        """Postpone a due run refused by ``cap`` to the time the cap frees (one coalesced run then).

        ``turn_id``: a turn already created for the run (the caps changed after the check): it is
        marked ``stopped`` with a "not started" note, so refused job runs never pile up as queued
        turns. The person is told once per global pause, and once per postponement for the job's
        own cap. Returns the new next run (epoch seconds, scheduler clock).
        """
        until = self._cap_frees_at(cap, now)
        if turn_id:
            self._not_started(turn_id, f"not started: the {cap} is reached; the job is postponed")
        moved = jobs_mod.move(self.db, job, next_run=until, postponed_by=cap)
        if cap in GLOBAL_CAPS:
            self._pause(cap)  # told once per pause
        elif moved:
            used = caps.tokens_today(self.db, self.clock.timezone(), job.id)
            limit = job.token_cap or self.settings.caps.job_daily_tokens
            self.notifier("cap", f"Job {job.name!r} is over its daily token cap ({used} of {limit} tokens today): "
                               f"its run is postponed to {self.local_time(until, job)}.")
        return until

    def _pause(self, cap: str) -> None:
        """A job postponed by a global cap pauses Palui; the person is told once per pause (spec §6)."""
        if st.set_pause(self.db, cap):
            self.turns_part.tell_paused(cap)

    def _not_started(self, turn_id: str, why: str) -> None:
        with self.db.write() as c:
            c.execute("UPDATE turns SET status='stopped', error=?, updated_at=? WHERE id=? AND status='queued'",
                      (why, self.clock.now(), turn_id))

    def start_turn(self, job: Job, now: float | None = None) -> str:
        """Create the queued turn of one run of ``job`` (origin job) and note it on the job. The
        caller launches it (the service's runtime, or in-process). Returns the turn id."""
        tid = self.turns_part.start(job.prompt, origin=Origin.JOB, job_id=job.id)
        with self.db.write() as c:
            c.execute("UPDATE jobs SET last_turn_id = ?, last_run = ? WHERE id = ?",
                      (tid, self.clock.scheduler_now() if now is None else now, job.id))
        return tid

    def start_now(self, name: str, launch: Launch) -> str:
        """``palui jobs run NAME``: start one run now, outside the schedule (the schedule is unchanged).

        Raises JobsPaused while the emergency brake holds the jobs, NotFound, or JobRefused when a cap
        refuses the run (nothing is left queued).
        """
        if self.brake_part.jobs_paused():
            raise JobsPaused(f"job {name!r} not started: the jobs are paused by the emergency brake "
                             "(palui stop --all); palui jobs resume lets them run again")
        job = jobs_mod.get(self.db, name)
        cap = self.cap(job)
        if cap is None:
            tid = self.start_turn(job)
            cap = launch(tid)
            if cap is None:
                return tid
            self._not_started(tid, f"not started: the {cap} is reached")
        if cap in GLOBAL_CAPS:
            self._pause(cap)
        until = self._cap_frees_at(cap, self.clock.now())
        raise JobRefused(f"job {job.name!r} not started: the {cap} is reached; it can start after "
                         f"{self.local_time(until, job)}", cap, until)

    async def run(self, name: str, on_event: EventSink | None = None) -> TurnResult:
        """Run a job now in this process (no service running). Returns the turn result
        (as ``palui run --json``). Raises JobsPaused, NotFound, JobRefused."""
        def launch(tid: str) -> str | None:
            got = self.turns_part.claim(tid)  # admits against the caps
            if not got.claimed and not got.cap:  # the turn was created here a moment ago: no one else may hold it
                raise PaluiError(f"turn {tid} of job {name!r} could not be claimed")
            return got.cap

        tid = self.start_now(name, launch)
        return await self.turns_part.run_claimed(tid, on_event)

