"""The read parts: what a read-only command lists, each part built over the database alone.

``palui approvals list``, ``palui conversations list`` and ``palui jobs list`` build one of these
(:class:`palui.service.light.ReadService`) instead of the whole service, so they start without the runner, the
connectors or the model library (docs/decisions/0085-a-light-cli-start.md). The full parts hold the same objects
and answer their ``list`` through them: one query, two ways in.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from palui.config import Settings
from palui.errors import UsageError
from palui.service.clock import Clock
from palui.store import usage
from palui.store.approval_rows import as_dict
from palui.store.db import Database
from palui.triggers import jobs as jobs_mod
from palui.triggers.jobs import Job

if TYPE_CHECKING:
    from palui.results import Approval, ConversationSummary
    from palui.results import Job as JobResult

#: Approvals on one page of a listing (newest first), and the most one page may hold.
PAGE, MAX_PAGE = 100, 1000


def shown_approval(a: Approval, row: Any, now: float) -> Approval:
    """``a`` as the person sees it at ``now``: a pending approval past its expiry is expired (spec §5.5)
    whether or not the service's sweep has marked it yet."""
    if row is not None and row["status"] == "pending" and row["expires_at"] <= now:
        return {**a, "status": "expired"}
    return a


class ApprovalReads:
    """Approvals as the person lists them.

    Args:
        db: the service's database.
        redecide: re-decides pending approvals before they are listed (spec §5).
    """

    def __init__(self, db: Database, redecide: Callable[[], object]) -> None:
        self.db = db
        self.redecide = redecide

    def list(self, status: str | None = "pending", limit: int = PAGE, before: str | None = None) -> list[Approval]:
        """Approvals as the person lists them (spec §5); pending ones are decided again first, so a tool switched
        off meanwhile no longer shows an approval that could run (this writes only when one must be cancelled).

        ``status="pending"``: what waits, ``status = 'pending' AND expires_at > now``, oldest first (they expire
        first); one past its expiry counts as expired (the service's sweep marks it so) and is not listed.
        Any other status, or None (every approval): newest first, at most ``limit`` (1-1,000), older than the
        approval ``before`` when given (the next page: pass the last id of this one). Each read is a search of an
        index, whatever the history (docs/decisions/0154-reads-bounded.md). Raises UsageError for a bad
        ``limit`` or an unknown ``before``."""
        self.redecide()
        now = time.time()
        sql = "SELECT a.*, t.conversation_id FROM approvals a LEFT JOIN turns t ON t.id = a.turn_id"
        if status == "pending":
            rows = self.db.all(sql + " WHERE a.status = 'pending' AND a.expires_at > ? ORDER BY a.created_at, a.id",
                               (now,))
        else:
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
                raise UsageError(f"a page of approvals holds 1 to {MAX_PAGE:,}")
            where: list[str] = []
            params: list[Any] = []
            if status:
                where.append("a.status = ?")
                params.append(status)
            if before is not None:
                b = self.db.one("SELECT created_at, rowid FROM approvals WHERE id = ?", (before,))
                if b is None:
                    raise UsageError(f"unknown approval {before!r} to list from")
                where.append("(a.created_at < ? OR (a.created_at = ? AND a.rowid < ?))")
                params += [b[0], b[0], b[1]]
            clause = f" WHERE {' AND '.join(where)}" if where else ""
            # (created_at, rowid) is the order of the approvals_created index: a walk of the page, no sort.
            rows = self.db.all(sql + clause + " ORDER BY a.created_at DESC, a.rowid DESC LIMIT ?", (*params, limit))
        return [shown_approval({**as_dict(r), "conversation": r["conversation_id"]}, r, now) for r in rows]


class ConversationReads:
    """Conversations as the person lists them.

    Args:
        db: the service's database.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def list(self, limit: int = 50, channel: str | None = None) -> list[ConversationSummary]:
        """Newest first: ``[{"id","origin","channel","tainted","taint_source","title","last","turns",
        "live","created_at"}]`` (``title`` is the first turn's input; ``channel`` where it was started,
        None when not recorded (before migration 30); ``live`` the number of turns running, waiting for
        approval or queued; times in epoch s). ``channel`` keeps only those started there.

        Ordered by the stored ``last_at`` (kept by trigger on every new turn, migration 12) through its
        index, so only the ``limit`` conversations shown are read, whatever the history
        (docs/decisions/0074-conversations-ordered-by-last-at.md)."""
        where, params = ("WHERE c.channel = ?", (channel, limit)) if channel else ("", (limit,))
        rows = self.db.all(
            "SELECT c.id, c.origin, c.channel, c.tainted, c.taint_source, c.created_at,"
            " (SELECT input FROM turns t WHERE t.conversation_id = c.id ORDER BY t.created_at LIMIT 1) AS title,"
            " (SELECT MAX(created_at) FROM turns t WHERE t.conversation_id = c.id) AS last,"
            " (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turns,"
            " (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id"
            "  AND t.status IN ('running','awaiting_approval','queued')) AS live"
            f" FROM conversations c {where} ORDER BY c.last_at DESC LIMIT ?",
            params,
        )
        return [{"id": r["id"], "origin": r["origin"], "channel": r["channel"], "tainted": bool(r["tainted"]),
                 "taint_source": r["taint_source"], "created_at": r["created_at"], "title": r["title"],
                 "last": r["last"], "turns": r["turns"], "live": r["live"]} for r in rows]


class JobReads:
    """Jobs as the person lists them, times in each job's zone.

    Args:
        db, settings, clock: the service's shared collaborators.
    """

    def __init__(self, db: Database, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock

    def list(self) -> builtins.list[JobResult]:
        """Every job, by name (the ``palui jobs list --json`` shape, see :meth:`_shown`)."""
        return [self.shown(j) for j in jobs_mod.all_jobs(self.db)]

    def _job_zone(self, job: Job) -> tzinfo:
        return jobs_mod.zone_for(job.tz, self.settings.caps.timezone)

    def local_time(self, t: float | None, job: Job) -> str | None:
        """Epoch seconds as ISO 8601 in the job's zone (None stays None)."""
        return datetime.fromtimestamp(t, self._job_zone(job)).isoformat() if t is not None else None

    def shown(self, job: Job) -> JobResult:
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
            "tokens_today": usage.tokens_today(self.db, self.clock.timezone(), job.id),
            "created_at": self.local_time(job.created_at, job),
            "connectors": job.scope,
        }
