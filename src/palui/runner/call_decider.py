"""The deciding steps of a governed call (spec §3, §4.5, §7.6): the policy again, on the tool as stored now.

:class:`CallDecider` is held by the governed call (:mod:`palui.runner.governed_call`), which runs its steps in
the one order there:

- :meth:`offered` — the tool is the door's to call (a turn: offered at its start; a gateway client: in its
  connectors); else refused with the reason and its fix;
- :meth:`connected` — an MCP tool's connector is started, within the door's time (connecting may flag the
  tool, which is then read again);
- :meth:`switches` — the matrix: ``off`` and ``unavailable`` refuse, and so does a tool that needs MCP tasks;
- :meth:`review` — a tool flagged "changed — review" is refused; one flagged for a held loosening or a
  tightening goes on under the stricter class its row already holds (spec §7.6, both doors);
- :meth:`arguments` — strict JSON, ``limits.argument_chars`` and the tool's input schema
  (:mod:`palui.policy.input_schema`): refused as the model's error, and nothing is written for it.

Each returns what the next step needs, or None when it answered the call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from palui.policy.input_schema import argument_problem
from palui.policy.matrix import decide
from palui.runner.offer import is_builtin, usable_tool
from palui.runner.pending import PendingCall
from palui.types import NEEDS_TASKS, Decision, Verdict

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.connectors.hub import ConnectorHub
    from palui.runner.call_records import CallRecords
    from palui.runner.state import Turn
    from palui.store.db import Database
    from palui.store.tools import ToolRow

CONNECT_TIMEOUT = 30.0  # seconds to start an MCP connector before a call gives up on it


class CallDecider:
    """The call-time decision of one door's calls.

    Args:
        db: the catalog (the tool as stored now).
        settings: ``limits.argument_chars``.
        hub: the connectors of this process (an MCP connector is started before its call is decided).
        records: answers and audits a refused call.
        offer: the door's offer (:attr:`CallOptions.offer`): why a tool is not its to call, or None.
        time_left: the door's time left in seconds (bounds the connector's start).
    """

    def __init__(self, db: Database, settings: Settings, hub: ConnectorHub, records: CallRecords,
                 offer: Callable[[Turn, ToolRow | None, str], str | None], time_left: Callable[[Turn], float]) -> None:
        self._db = db
        self._settings = settings
        self._hub = hub
        self._records = records
        self._offer = offer
        self._time_left = time_left

    def offered(self, t: Turn, call: PendingCall) -> ToolRow | None:
        """The tool as stored now, or None when it is not the door's to call (refused with the reason)."""
        row = usable_tool(self._db, call["tool"])
        why = self._offer(t, row, call["tool"])
        if why is not None or row is None:
            self._records.refuse(t, call, row, "off" if row is not None and not row.enabled else "unavailable",
                                 why or "no tool has this name")
            return None
        return row

    async def connected(self, t: Turn, call: PendingCall, row: ToolRow) -> ToolRow | None:
        """An MCP tool's connector started within the door's time (at most :data:`CONNECT_TIMEOUT`), and the tool
        read again (the connection re-checks its pins, spec §7.6); None when refused."""
        if is_builtin(row):
            return row
        bound = max(1.0, min(CONNECT_TIMEOUT, self._time_left(t)))
        try:
            await asyncio.wait_for(self._hub.get(row.connector), timeout=bound)
        except Exception as e:
            what = f"it did not start within {bound:g} s" if isinstance(e, TimeoutError) else str(e)[:200]
            why = f"connector {row.connector} is not available: {what or type(e).__name__}"
            self._records.refuse(t, call, row, "run", why, outcome="error")
            self._records.connector_down(t, row.connector, str(e))
            return None
        again = usable_tool(self._db, call["tool"])  # the connection may have flagged it
        if again is None:
            self._records.refuse(t, call, None, "unavailable", "the tool is no longer listed by its server")
        return again

    def switches(self, t: Turn, call: PendingCall, row: ToolRow) -> Decision | None:
        """The matrix's ``run`` or ``ask`` for the tool in this turn (origin, taint); None when ``off`` or
        ``unavailable`` refused it, or the tool needs MCP tasks (never offered, never sent)."""
        d = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source)
        if d.verdict in (Verdict.OFF, Verdict.UNAVAILABLE):
            self._records.refuse(t, call, row, d.verdict.value, d.reason)
            return None
        if row.needs_tasks:
            self._records.refuse(t, call, row, "unavailable", f"the tool {NEEDS_TASKS}")
            return None
        return d

    def review(self, t: Turn, call: PendingCall, row: ToolRow, d: Decision) -> bool:
        """False (refused) for a tool whose description or schema changed and waits for review; a held loosening
        or a tightening keeps the tool usable under the stricter class its row holds (spec §7.6)."""
        if row.changed and (row.review or {}).get("kind", "changed") == "changed":
            self._records.refuse(t, call, row, d.verdict.value, "the tool is flagged \"changed — review\"")
            return False
        return True

    def arguments(self, t: Turn, call: PendingCall, row: ToolRow) -> bool:
        """False when the arguments are refused (spec §3.3): answered with the reason as the model's error, and
        nothing else is written (no audit row, no event: a refused call's arguments are never stored)."""
        why = call.get("bad_args") or argument_problem(
            call["args"], row.input_schema, self._settings.limits.argument_chars,
            check_schema=row.schema_checked)
        if why is None:
            return True
        self._records.result(call, f"Error: the tool {call['tool']!r} was not called: {why}.", True)
        return False
