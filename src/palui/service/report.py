"""Service part: how much asking costs the person, and what to do about it (spec §5.8).

``palui report [--days N] [--json]``, the Governance web page and a section of ``/status`` read the same
numbers (:mod:`palui.store.report`, from the tables Palui already keeps) and the same suggestions
(:mod:`palui.policy.advice`, pure: each is a command the person may run; none loosens anything by itself,
none proposes to loosen a destructive or unknown class).
"""

from __future__ import annotations

from typing import Any

from palui.errors import UsageError
from palui.policy.advice import ConnectorFacts, ToolFacts, advise
from palui.runner import approvals
from palui.service.clock import Clock
from palui.service.tools import ToolsPart
from palui.store import report as report_store
from palui.store.db import Database

MAX_DAYS = 366


class ReportPart:
    """The governance report.

    Args:
        db: the database (the numbers are read from the tables Palui keeps).
        clock: the time now and the zone where a day starts.
        tools_part: the tools and connectors the suggestions are about.
    """

    def __init__(self, db: Database, clock: Clock, tools_part: ToolsPart) -> None:
        self.db = db
        self.clock = clock
        self.tools_part = tools_part

    def build(self, days: int = 7, now: float | None = None) -> dict[str, Any]:
        """The report over the last ``days`` days (today included, days in ``caps.timezone``)::

            {"days", "since", "turns", "runs", "calls",
             "tokens": {"counted", "cached_input", "per_day": [{"day","counted","cached_input"}]},
             "asks": {"total", "per_day": [{"day","asks"}], "approved", "denied", "expired", "cancelled",
                      "pending", "median_answer_seconds", "answered_via": {via: n},
                      "cancel_reasons": [{"reason","count"}],
                      "by_cause": {"taint","class","job","outside","other"},
                      "top_tools": [{"tool","asks","approved","denied","expired","cancelled","by_cause"}]},
             "avoided": {"total", "by_rule": [{"rule","tool","context","asks"}]},
             "repeated": [{"tool","context","class","approvals","latest","made"}],
             "job_turns_waited": {"turns","asks","expired","median_wait_seconds"},
             "not_offered": {"total", "by_tool": [{"tool","refused"}]},
             "tainted_conversations": [{"connector","conversations"}],
             "suggestions": [{"kind","text","command"}]}

        ``tokens``: the tokens the caps counted (cached input at its weight) and the cached input among them,
        raw (spec §6.4). ``avoided``: the asks standing approvals answered (spec §5.9), left out of ``asks``;
        ``repeated``: calls the person approved more than once with the same arguments in one context (the
        ``standing`` suggestions come from them). Raises UsageError for ``days`` outside 1–366.
        """
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
            raise UsageError(f"--days must be a whole number from 1 to {MAX_DAYS}")
        now = self.clock.now() if now is None else now
        approvals.sweep(self.db)  # expired approvals count as expired, not pending
        out = report_store.numbers(self.db, days, now, self.clock.timezone())
        tools = {r.name: ToolFacts(r.tool_class.value, r.class_source.value, r.enabled, r.connector, r.outside_flag)
                 for r in self.tools_part.list()}
        # The stored rows: the MCP part's view adds each server's configuration and state, none of it a fact here.
        conns = {c["id"]: ConnectorFacts(c["kind"], c["trusted_source"]) for c in self.tools_part.connector_rows()}
        out["suggestions"] = advise(out, tools, conns)
        return out
