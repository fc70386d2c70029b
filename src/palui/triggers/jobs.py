"""Scheduled jobs: cron expressions, next runs and the ``jobs`` table (spec §8).

A job is a prompt run as a turn of origin ``job`` on a cron schedule. Times are epoch
seconds on the scheduler's clock (:mod:`palui.triggers.clock`). The cron expression is
read in the job's zone (``--tz``), else ``caps.timezone``, else the system zone, so
``0 8 * * *`` means 08:00 local time across daylight-saving changes.

Accepted expressions: five fields (minute hour day-of-month month day-of-week, croniter
syntax) or one of ``@yearly @annually @monthly @weekly @daily @midnight @hourly``.
A sixth (seconds) field is refused: the service ticks about once a second and a job
every few seconds would eat the runs-per-hour cap.

Daylight-saving changes (spec §8.4, the rule of Vixie cron and cronie): a *fixed-time* job, one whose
minute and hour fields do not start with ``*`` (``30 2 * * *``, ``@daily``), fires once per local
date: when clocks go back it fires at the first of the two repeated wall times only, and when they go
forward over its time it fires at the first moment after the gap (croniter already does that). Every
other job (``*/5 * * * *``, ``0 * * * *``, ``@hourly``) follows real time, so an hourly job fires 25
times on the long day and 23 on the short one.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any

from palui.config_schema import value_for
from palui.errors import NotFound, UsageError
from palui.runner.state import new_id
from palui.store.db import Database
from palui.text.display import named

if TYPE_CHECKING:
    from palui.results import JobsPause

ALIASES = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
#: Missed runs are counted up to this many when a coalesced run is noted (the count is only told).
MISSED_COUNT_LIMIT = 1000
MAX_NAME = 64
MAX_PROMPT = 20_000
# Letters, digits, space, dot, dash, underscore: a name is also a URL path segment (/api/jobs/NAME/run).
NAME_RE = re.compile(rf"\A\w[\w .-]{{0,{MAX_NAME - 1}}}\Z")



@dataclass(frozen=True)
class Job:
    """A row of ``jobs``. Times in epoch seconds (scheduler clock)."""

    id: str
    name: str
    cron: str
    prompt: str
    token_cap: int | None
    tz: str | None
    next_run: float
    last_run: float | None
    last_turn_id: str | None
    postponed_by: str | None
    skip_noted_turn: str | None
    created_at: float
    connectors: str | None = None  # JSON list of the connector ids the job is limited to; None: all (spec §8.4)

    @classmethod
    def from_row(cls, r) -> Job:
        return cls(**{k: r[k] for k in cls.__dataclass_fields__})

    @property
    def scope(self) -> list[str] | None:
        """The connectors this job's turns are offered tools of, None for every connector."""
        return json.loads(self.connectors) if self.connectors else None


# -- zones and cron -------------------------------------------------------------------------------


def system_zone() -> tzinfo:
    """The system's time zone with its daylight-saving rules (``TZ``, else ``/etc/localtime``)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # (zoneinfo is imported when a zone is needed)

    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    try:
        with open("/etc/localtime", "rb") as f:
            return ZoneInfo.from_file(f)
    except (OSError, ValueError):
        return datetime.now().astimezone().tzinfo or UTC  # a fixed offset: the best left


def zone_for(tz: str | None, caps_timezone: str | None) -> tzinfo:
    """The zone a job's cron expression is read in."""
    name = tz or caps_timezone
    if not name:
        return system_zone()
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def check_zone(tz: str | None) -> str | None:
    """Validate a ``--tz`` value: a job's own ``caps.timezone``, by that key's rule (an IANA zone, no control
    character). Raises UsageError."""
    if tz is None or tz == "":
        return None
    try:
        value_for("caps.timezone", tz, "--tz")
    except UsageError as e:
        raise UsageError(f"{e} (use an IANA name such as Europe/Paris)") from None
    return tz


def check_cron(expr: str) -> str:
    """Validate a cron expression (see the module docstring); returns it normalised (single spaces).

    Raises UsageError naming what is wrong, also for an expression that never fires
    (``0 0 31 2 *``).
    """
    from croniter import croniter

    if not isinstance(expr, str) or not expr.strip():
        raise UsageError("a job needs a cron expression, e.g. --cron \"0 8 * * *\"")
    norm = " ".join(expr.split())
    if norm.startswith("@"):
        if norm.lower() not in ALIASES:
            raise UsageError(f"unknown cron alias {norm!r} (use one of {', '.join(sorted(ALIASES))})")
        norm = norm.lower()
    elif len(norm.split(" ")) != 5:
        raise UsageError(f"cron expression {expr!r} must have five fields: minute hour day-of-month month "
                         "day-of-week (e.g. \"0 8 * * *\")")
    if not croniter.is_valid(norm):
        raise UsageError(f"cron expression {expr!r} is not valid")
    from zoneinfo import ZoneInfo

    next_after(norm, time.time(), ZoneInfo("UTC"))  # never fires → UsageError
    return norm


def is_fixed_time(expr: str) -> bool:
    """True for a job that fires at fixed local wall times: its minute and hour fields do not start
    with ``*`` (an alias is read as its five fields; ``@hourly`` is ``0 * * * *``)."""
    minute, hour = _ALIAS_FIELDS.get(expr, expr).split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


#: The aliases' five fields (croniter's reading of them).
_ALIAS_FIELDS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                 "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                 "@hourly": "0 * * * *"}


def _fires(expr: str, after: float, tz: tzinfo) -> Iterator[float]:
    """The fires of ``expr`` strictly after ``after`` (epoch seconds), read in ``tz``, in order.

    A fixed-time job (:func:`is_fixed_time`) skips the second of two repeated wall times: ``fold=1``
    is the later of the two instants a local time names (PEP 495), so the wall time already fired.
    """
    from croniter import croniter

    fixed = is_fixed_time(expr)
    it = croniter(expr, datetime.fromtimestamp(after, tz))
    while True:
        when = it.get_next(datetime)
        if fixed and datetime.fromtimestamp(when.timestamp(), tz).fold == 1:
            continue
        yield when.timestamp()


def next_after(expr: str, after: float, tz: tzinfo) -> float:
    """Epoch seconds of the first fire of ``expr`` strictly after ``after``, read in ``tz``
    (a fixed-time job fires once per local date, see the module docstring).

    Raises UsageError if the expression never fires.
    """
    from croniter.croniter import CroniterBadDateError

    try:
        return next(_fires(expr, after, tz))
    except CroniterBadDateError:
        raise UsageError(f"cron expression {expr!r} never fires") from None


def missed_between(expr: str, first: float, now: float, tz: tzinfo, limit: int = MISSED_COUNT_LIMIT) -> int:
    """How many fires of ``expr`` fall in ``(first, now]`` (``first`` itself is the run being made),
    counted up to ``limit``."""
    fires = _fires(expr, first, tz)
    n = 0
    while n < limit and next(fires) <= now:
        n += 1
    return n


# -- the jobs table ------------------------------------------------------------------------------------


def add(db: Database, *, name: str, cron: str, prompt: str, token_cap: int | None, tz: str | None,
        caps_timezone: str | None, now: float, connectors: list[str] | None = None) -> Job:
    """Store a new job; its first run is the first fire after ``now``.

    Raises UsageError for a bad name, cron expression, zone, prompt or token cap, or a
    name already taken.
    """
    name = (name or "").strip()
    if not NAME_RE.match(name):
        raise UsageError(f"a job name must be 1-{MAX_NAME} letters, digits, spaces, dots, dashes or underscores")
    if not isinstance(prompt, str) or not prompt.strip():
        raise UsageError("a job needs a non-empty --prompt")
    if len(prompt) > MAX_PROMPT:
        raise UsageError(f"a job prompt may have at most {MAX_PROMPT} characters")
    if token_cap is not None:  # a job's own caps.job_daily_tokens: the key's range (spec §10.4)
        value_for("caps.job_daily_tokens", token_cap, "--token-cap")
    cron = check_cron(cron)
    tz = check_zone(tz)
    first = next_after(cron, now, zone_for(tz, caps_timezone))
    jid = new_id("j")
    with db.write() as c:
        if c.execute("SELECT 1 FROM jobs WHERE name = ?", (name,)).fetchone():
            raise UsageError(f"a job named {name!r} already exists (remove it first: palui jobs remove {name})")
        c.execute("INSERT INTO jobs (id, name, cron, prompt, token_cap, tz, next_run, created_at, connectors)"
                  " VALUES (?,?,?,?,?,?,?,?,?)", (jid, name, cron, prompt, token_cap, tz, first, time.time(),
                                                  json.dumps(connectors, allow_nan=False) if connectors else None))
    return get(db, name)


def get(db: Database, name: str) -> Job:
    """The job named ``name`` (its id is accepted too). Raises NotFound."""
    r = db.one("SELECT * FROM jobs WHERE name = ? OR id = ? ORDER BY name = ? DESC LIMIT 1", (name, name, name))
    if r is None:
        raise NotFound(f"unknown job {named(name)} (see: palui jobs list)")
    return Job.from_row(r)


def all_jobs(db: Database) -> list[Job]:
    return [Job.from_row(r) for r in db.all("SELECT * FROM jobs ORDER BY name")]


def own_token_cap(db: Database, job_id: str | None) -> int | None:
    """A job's own daily token cap (``palui jobs add --token-cap``), None for the ``caps.job_daily_tokens``
    default or a turn that is not a job's (the runner's ``RunnerDeps.job_token_cap``)."""
    if not job_id:
        return None
    r = db.one("SELECT token_cap FROM jobs WHERE id = ?", (job_id,))
    return int(r[0]) if r and r[0] else None


def scope_of(db: Database, job_id: str | None) -> list[str] | None:
    """The connectors a job is limited to (``palui jobs add --connector``, spec §8.4), None for every connector
    or a turn that is not a job's (the runner's ``RunnerDeps.job_connectors``)."""
    r = db.one("SELECT connectors FROM jobs WHERE id = ?", (job_id,)) if job_id else None
    return json.loads(r[0]) if r and r[0] else None


def due(db: Database, now: float) -> list[Job]:
    """Jobs whose next run is at or before ``now``, earliest first."""
    return [Job.from_row(r) for r in db.all("SELECT * FROM jobs WHERE next_run <= ? ORDER BY next_run", (now,))]


def remove(db: Database, name: str) -> Job:
    """Delete a job (its past turns stay). Raises NotFound."""
    job = get(db, name)
    with db.write() as c:
        c.execute("DELETE FROM jobs WHERE id = ?", (job.id,))
    return job


def move(db: Database, job: Job, *, next_run: float, postponed_by: str | None = None,
         **fields: Any) -> bool:
    """Compare-and-set the job's ``next_run`` from the value in ``job`` (so one tick fires a due
    run once). ``fields`` may set ``last_run``, ``last_turn_id``, ``skip_noted_turn``.
    Returns False when the row changed meanwhile (removed, or moved by someone else)."""
    allowed = {"last_run", "last_turn_id", "skip_noted_turn"}
    assert set(fields) <= allowed, fields
    sets = ", ".join(["next_run = ?", "postponed_by = ?", *[f"{k} = ?" for k in fields]])
    with db.write() as c:
        cur = c.execute(f"UPDATE jobs SET {sets} WHERE id = ? AND next_run = ?",
                        (next_run, postponed_by, *fields.values(), job.id, job.next_run))
        return cur.rowcount == 1


def waiting_turn(db: Database, job_id: str) -> Any:
    """The job's turn that is still in progress (awaiting approval, running or queued), or None:
    ``{"id","status"}``. Awaiting approval wins when there are several."""
    return db.one("SELECT id, status FROM turns WHERE job_id = ? AND status IN"
                  " ('awaiting_approval','running','queued')"
                  " ORDER BY status = 'awaiting_approval' DESC, created_at LIMIT 1", (job_id,))


# -- the emergency brake's pause (spec §5.7) -------------------------------------------------------------

PAUSE_KEY = "jobs_paused"


def paused(db: Database) -> JobsPause | None:
    """``{"since","by","noted"}`` while ``palui stop --all`` holds the jobs, else None (a ``kv`` row, so
    every process sees it)."""
    r = db.one("SELECT value FROM kv WHERE key = ?", (PAUSE_KEY,))
    return _stored_pause(r[0]) if r else None


def _stored_pause(value: str) -> JobsPause:
    state: JobsPause = json.loads(value)  # written by pause() below
    return state


def pause(db: Database, by: str, now: float) -> JobsPause:
    """Pause every job (a pause already in place is kept). Returns the pause."""
    with db.write() as c:
        r = c.execute("SELECT value FROM kv WHERE key = ?", (PAUSE_KEY,)).fetchone()
        if r is not None:
            return _stored_pause(r[0])
        state: JobsPause = {"since": now, "by": by, "noted": False}
        c.execute("INSERT INTO kv (key, value) VALUES (?, ?)", (PAUSE_KEY, json.dumps(state, allow_nan=False)))
    return state


def resume(db: Database) -> bool:
    """End the pause. True if the jobs were paused."""
    with db.write() as c:
        return c.execute("DELETE FROM kv WHERE key = ?", (PAUSE_KEY,)).rowcount == 1


def claim_pause_note(db: Database) -> bool:
    """True exactly once per pause: the caller tells the person that due runs are skipped."""
    with db.write() as c:
        r = c.execute("SELECT value FROM kv WHERE key = ?", (PAUSE_KEY,)).fetchone()
        if r is None:
            return False
        state = json.loads(r[0])
        if state.get("noted"):
            return False
        state["noted"] = True
        c.execute("UPDATE kv SET value = ? WHERE key = ?", (json.dumps(state, allow_nan=False), PAUSE_KEY))
    return True
