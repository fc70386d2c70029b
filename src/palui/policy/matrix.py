"""The decision matrix of spec §3, as a pure function.

(effective class, switch, origin, taint) -> Decision(verdict, reason, source).
No I/O, no clock: callers pass everything in.
"""

from __future__ import annotations

from palui.types import Decision, Origin, ToolClass, Verdict

WEBHOOK_REASON = "webhook summaries get no tools"


def decide(
    tool_class: ToolClass,
    enabled: bool,
    origin: Origin,
    tainted: bool,
    taint_source: str | None = None,
) -> Decision:
    """Decide one tool for one turn (spec §3).

    Args:
        tool_class: the *effective* class (an unknown class is already ``destructive``).
        enabled: the tool's on/off switch.
        origin: what started the turn.
        tainted: whether untrusted content is in the turn's model context (spec §4).
        taint_source: what tainted it, e.g. ``"web__fetch_page at step 3"``; only
            used in the reason.

    Precedence: (1) webhook -> unavailable; (2) off -> off; (3) the matrix.
    A job turn keeps the job column even when tainted. The ``gateway`` column (a call another MCP
    client made through Palui, spec §8.6) is decided like the chat columns, with its own words. In a tainted turn every
    reason, whichever rule decided, ends with ``(tainted by <taint_source>)`` when
    the source is known (spec §3: "every verdict carries a reason naming the rule
    and, in a tainted turn, what tainted it").
    """
    verdict, reason, rule = _decide(tool_class, enabled, origin, tainted)
    if tainted and taint_source:
        reason = f"{reason} (tainted by {taint_source})"
    return Decision(verdict, f"{verdict.value}: {reason}", rule)


def _decide(tool_class: ToolClass, enabled: bool, origin: Origin, tainted: bool) -> tuple[Verdict, str, str]:
    """(verdict, reason without the verdict prefix or taint source, deciding rule)."""
    if origin is Origin.WEBHOOK:
        return Verdict.UNAVAILABLE, WEBHOOK_REASON, "webhook"
    if not enabled:
        return Verdict.OFF, "the tool is switched off", "switch"

    cls = tool_class.value
    if origin is Origin.JOB:
        if tool_class is ToolClass.READ:
            return Verdict.RUN, "read tool in a scheduled job", "matrix"
        if tool_class is ToolClass.WRITE:
            return Verdict.ASK, "write tool in a scheduled job", "matrix"
        return Verdict.UNAVAILABLE, "destructive tools are not offered in scheduled jobs", "matrix"

    if origin is Origin.GATEWAY:
        where = "a tainted gateway session" if tainted else "an untainted gateway session"
        if tool_class is ToolClass.READ:
            return Verdict.RUN, f"read tool in {where}", "matrix"
        if tool_class is ToolClass.WRITE and not tainted:
            return Verdict.RUN, f"write tool in {where}", "matrix"
        return Verdict.ASK, f"{cls} tool in {where}", "matrix"

    # origin chat
    if tool_class is ToolClass.READ:
        return Verdict.RUN, f"read tool in {'a tainted turn' if tainted else 'a chat turn'}", "matrix"
    if tainted:
        return Verdict.ASK, f"{cls} tool in a tainted turn", "matrix"
    if tool_class is ToolClass.WRITE:
        return Verdict.RUN, "write tool in an untainted chat turn", "matrix"
    return Verdict.ASK, "destructive tool in a chat turn", "matrix"
