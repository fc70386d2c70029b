"""How much asking costs the person (spec §5.8): numbers read from the tables Palui already keeps.

No second bookkeeping: ``approvals`` (asks, answers, ``answered_via``, ``cancel_reason``; an ask a standing
approval answered, ``answered_via`` ``rule``, is an ask avoided, counted apart), ``audit``
(calls refused as not offered, calls made), ``untrusted_content`` (which tool's results tainted which
conversation), ``turns`` and ``runs``. Times are epoch seconds; a day is a date in the zone given
(``caps.timezone``). Reads only.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from palui.policy.standing import context_of
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import AsksSummary

#: ``answered_via`` of an ask a standing approval answered (spec §5.9).
RULE = "rule"
# A call refused because the tool could not be offered (switched off, not offered in this situation, left
# out by budgets.tools or a job's scope, gone): the runner's refusals carry these verdicts (runner/pending_calls.py).
NOT_OFFERED_VERDICTS = ("off", "unavailable")


def ask_cause(reason: str, tool_class: str, origin: str) -> str:
    """Why an approval was asked: ``outside`` (the Rule of Two), ``job`` (a write in a scheduled job),
    ``class`` (destructive or unknown: asks anyway), ``taint`` (a write in a tainted chat turn), else
    ``other``. Read from the reason the matrix (spec §3) or the Rule of Two wrote."""
    if "Rule of Two" in reason:
        return "outside"
    if origin == "job":
        return "job"
    if tool_class == "destructive":
        return "class"
    if "tainted turn" in reason:
        return "taint"
    return "other"


def connector_of(source: str) -> str:
    """The connector named by an untrusted-content source (``"mcp-time__get_time at step 2"`` →
    ``mcp-time``; a webhook payload → ``webhook``)."""
    if "__" in source:
        return source.split("__", 1)[0]
    return "webhook" if source.startswith("webhook") else source.split(" ", 1)[0]


def window(days: int, now: float, tz: tzinfo | None) -> tuple[float, list[str]]:
    """The start (epoch s) of the window of the last ``days`` days, today included, and its days (ISO dates)."""
    today = datetime.fromtimestamp(now, tz).date()
    first = today - timedelta(days=days - 1)
    start = datetime(first.year, first.month, first.day, tzinfo=tz).timestamp() if tz else \
        datetime(first.year, first.month, first.day).timestamp()
    return start, [(first + timedelta(days=i)).isoformat() for i in range(days)]


def _day(t: float, tz: tzinfo | None) -> str:
    return datetime.fromtimestamp(t, tz).date().isoformat()


def numbers(db: Database, days: int, now: float, tz: tzinfo | None) -> dict[str, Any]:
    """Every number of ``palui report`` over the last ``days`` days (see :mod:`palui.service.report` for
    the shape)."""
    since, day_list = window(days, now, tz)
    every = db.all("SELECT a.*, t.job_id, t.tainted AS turn_tainted, s.client FROM approvals a LEFT JOIN turns t"
                   " ON t.id = a.turn_id LEFT JOIN gateway_sessions s ON s.turn_id = a.turn_id"
                   " WHERE a.created_at >= ? ORDER BY a.created_at", (since,))
    # An ask a standing approval answered was not asked (spec §5.9): counted apart, as an ask avoided.
    rows = [r for r in every if r["answered_via"] != RULE]
    by_rule = Counter(r["rule_id"] for r in every if r["answered_via"] == RULE)
    per_day = Counter(_day(r["created_at"], tz) for r in rows)
    status = Counter(r["status"] for r in rows)
    answered = [r["answered_at"] - r["created_at"] for r in rows
                if r["status"] in ("approved", "denied") and r["answered_at"] is not None]
    causes = Counter(ask_cause(r["reason"], r["class"], r["origin"]) for r in rows)
    by_tool: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        by_tool[r["tool"]]["asks"] += 1
        by_tool[r["tool"]][r["status"]] += 1
        by_tool[r["tool"]][ask_cause(r["reason"], r["class"], r["origin"])] += 1
    top = sorted(by_tool.items(), key=lambda kv: (-kv[1]["asks"], kv[0]))
    job_rows = [r for r in rows if r["origin"] == "job"]
    job_waits = [r["answered_at"] - r["created_at"] for r in job_rows if r["answered_at"] is not None]
    refused = db.all("SELECT tool, COUNT(*) AS n FROM audit WHERE time >= ? AND outcome = 'refused'"
                     " AND verdict IN (?, ?) GROUP BY tool ORDER BY n DESC, tool", (since, *NOT_OFFERED_VERDICTS))
    tainted: dict[str, set[str]] = defaultdict(set)
    for r in db.all("SELECT source, conversation_id FROM untrusted_content WHERE created_at >= ?", (since,)):
        tainted[connector_of(r["source"])].add(r["conversation_id"])
    calls = db.row("SELECT COUNT(*) FROM audit WHERE time >= ? AND outcome NOT IN ('asked', 'approved by rule')"
                   " AND verdict != 'rule'", (since,))[0]
    rules = {r["id"]: r for r in db.all("SELECT id, tool, context FROM standing_approvals")}
    turns = db.row("SELECT COUNT(*) FROM turns WHERE created_at >= ?", (since,))[0]
    runs = db.row("SELECT COUNT(*) FROM runs WHERE time >= ?", (since,))[0]
    cancel = Counter(r["cancel_reason"] or "cancelled" for r in rows if r["status"] == "cancelled")
    # Tokens as the caps counted them, and the cached input among them (spec §6.4), from the days' counters.
    used = {r["day"]: (r["tokens"], r["cached_tokens"]) for r in db.all(
        "SELECT day, tokens, cached_tokens FROM usage_days WHERE job_id = '' AND day >= ? AND day <= ?",
        (day_list[0], day_list[-1]))} if day_list else {}
    return {
        "days": days,
        "since": datetime.fromtimestamp(since, tz).isoformat(),
        "turns": turns,
        "runs": runs,
        "calls": calls,
        "tokens": {"counted": sum(t for t, _ in used.values()), "cached_input": sum(c for _, c in used.values()),
                   "per_day": [{"day": d, "counted": used.get(d, (0, 0))[0], "cached_input": used.get(d, (0, 0))[1]}
                               for d in day_list]},
        "asks": {
            "total": len(rows),
            "per_day": [{"day": d, "asks": per_day.get(d, 0)} for d in day_list],
            **{s: status.get(s, 0) for s in ("approved", "denied", "expired", "cancelled", "pending")},
            "median_answer_seconds": round(statistics.median(answered), 1) if answered else None,
            "answered_via": dict(sorted(Counter(r["answered_via"] for r in rows
                                                if r["status"] in ("approved", "denied") and r["answered_via"])
                                        .items())),
            "cancel_reasons": [{"reason": k, "count": v} for k, v in cancel.most_common(5)],
            "by_cause": {c: causes.get(c, 0) for c in ("taint", "class", "job", "outside", "other")},
            "top_tools": [{"tool": name, "asks": c["asks"], "approved": c["approved"], "denied": c["denied"],
                           "expired": c["expired"], "cancelled": c["cancelled"],
                           "by_cause": {k: c[k] for k in ("taint", "class", "job", "outside", "other") if c[k]}}
                          for name, c in top[:10]],
        },
        "job_turns_waited": {
            "turns": len({r["turn_id"] for r in job_rows}),
            "asks": len(job_rows),
            "expired": sum(1 for r in job_rows if r["status"] == "expired"),
            "median_wait_seconds": round(statistics.median(job_waits), 1) if job_waits else None,
        },
        "avoided": {"total": sum(by_rule.values()),
                    "by_rule": [{"rule": rid, "tool": rules[rid]["tool"] if rid in rules else None,
                                 "context": rules[rid]["context"] if rid in rules else None, "asks": n}
                                for rid, n in by_rule.most_common(10)]},
        "repeated": repeated(rows),
        "not_offered": {"total": sum(r["n"] for r in refused),
                        "by_tool": [{"tool": r["tool"], "refused": r["n"]} for r in refused[:10]]},
        "tainted_conversations": [{"connector": k, "conversations": len(v)}
                                  for k, v in sorted(tainted.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
    }


def repeated(rows: list[Any]) -> list[dict[str, Any]]:
    """Calls the person approved themselves more than once with the same arguments in one context (spec §5.8:
    what a standing approval could answer): ``[{"tool","context","class","approvals","latest","made"}]``, most
    approved first; ``made`` whether a standing approval was made from one of them already."""
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for r in rows:
        if r["status"] != "approved" or not r["answered_via"]:
            continue
        context = context_of(r["origin"], bool(r["turn_tainted"]), r["client"])
        if context is not None:
            groups[(r["tool"], context, r["args_hash"])].append(r)
    out = [{"tool": tool, "context": context, "class": rs[-1]["class"], "approvals": len(rs),
            "latest": rs[-1]["id"], "made": any(r["rule_made"] for r in rs)}
           for (tool, context, _hash), rs in groups.items() if len(rs) > 1]
    return sorted(out, key=lambda g: (-g["approvals"], g["tool"], g["context"]))


def summary(db: Database, days: int, now: float, tz: tzinfo | None) -> AsksSummary:
    """The ``/status`` section: asks and their answers over the last ``days`` days (a few counts only)."""
    since, _ = window(days, now, tz)
    rows = db.all("SELECT status, created_at, answered_at FROM approvals WHERE created_at >= ? AND"
                  " answered_via IS NOT ?", (since, RULE))
    status = Counter(r["status"] for r in rows)
    answered = [r["answered_at"] - r["created_at"] for r in rows
                if r["status"] in ("approved", "denied") and r["answered_at"] is not None]
    return {"days": days, "asks": len(rows), "approved": status.get("approved", 0), "denied": status.get("denied", 0),
            "expired": status.get("expired", 0), "cancelled": status.get("cancelled", 0),
            "median_answer_seconds": round(statistics.median(answered), 1) if answered else None}
