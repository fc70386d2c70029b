"""Deciding a call at call time (spec §3, §4): the policy again, on the tool as stored now.

:class:`CallDecider` is held by the pending-calls walk (:mod:`palui.runner.pending_calls`). A call to a tool
that is gone or was not offered this turn is refused with the reason and its fix; an MCP tool's
connector is started first (connecting may flag the tool, which is then read again); then the
matrix decides (``off`` and ``unavailable`` refuse), a tool that needs MCP tasks is refused,
arguments that are not a JSON object are answered with an error, and a ``run`` of a tool that
reaches outside in a tainted turn may become ``ask`` (the Rule of Two). What is left is a
:class:`~palui.types.Decision` of ``run`` or ``ask`` for the caller to send or to hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from palui.policy.matrix import decide
from palui.runner.offer import is_builtin, usable_tool
from palui.runner.pending import PendingCall
from palui.types import NEEDS_TASKS, Decision, Verdict

if TYPE_CHECKING:
    from palui.connectors.hub import ConnectorHub
    from palui.runner.call_records import CallRecords
    from palui.runner.rule_of_two import RuleOfTwo
    from palui.runner.state import Turn
    from palui.store.db import Database
    from palui.store.tools import ToolRow

CONNECT_TIMEOUT = 30.0  # seconds to start an MCP connector before a turn gives up on it


class CallDecider:
    """The call-time decision of one turn's calls.

    Args:
        db: the catalog (the tool as stored now).
        hub: the connectors of this process (an MCP connector is started before its call is decided).
        records: answers and audits a refused call.
        rule_of_two: the Rule of Two check.
        time_left: the turn's time left in seconds (bounds the connector's start).
    """

    def __init__(self, db: Database, hub: ConnectorHub, records: CallRecords, rule_of_two: RuleOfTwo,
                 time_left: Callable[[Turn], float]) -> None:
        self._db = db
        self._hub = hub
        self._records = records
        self._rule_of_two = rule_of_two
        self._time_left = time_left

    async def decide(self, t: Turn, call: PendingCall) -> tuple[ToolRow, Decision] | None:
        """The tool and its ``run`` or ``ask`` decision for ``call``; None when the call was answered here
        (refused, or its arguments are not a JSON object)."""
        row = usable_tool(self._db, call["tool"])
        if row is None or call["tool"] not in (t.offered or []):
            why = self._records.not_offered_reason(t, row, call["tool"])
            self._records.refuse(t, call, row, "off" if row is not None and not row.enabled else "unavailable", why)
            return None
        if not is_builtin(row):
            try:
                await asyncio.wait_for(self._hub.get(row.connector),
                                       timeout=max(1.0, min(CONNECT_TIMEOUT, self._time_left(t))))
            except Exception as e:
                self._records.refuse(
                    t, call, row, "run", f"connector {row.connector} is not available: {str(e)[:200]}", outcome="error"
                )
                self._records.connector_down(t, row.connector, str(e))
                return None
            row = usable_tool(self._db, call["tool"])  # the connection may have flagged it
            if row is None:
                self._records.refuse(t, call, None, "unavailable", "the tool is no longer listed by its server")
                return None
        d = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source)
        if d.verdict in (Verdict.OFF, Verdict.UNAVAILABLE):
            self._records.refuse(t, call, row, d.verdict.value, d.reason)
            return None
        if row.needs_tasks:  # never offered; a call to it never reaches the server
            self._records.refuse(t, call, row, "unavailable", f"the tool {NEEDS_TASKS}")
            return None
        if call.get("bad_args"):
            self._records.result(call, f"Error: {call['bad_args']}", True)
            self._records.audit(t, call, row, d.verdict.value, d.reason, "error: bad arguments")
            return None
        return row, self._rule_of_two.check(t, call, row, d)
