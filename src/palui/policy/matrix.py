"""The decision matrix of SPEC §3, as a pure function.

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
    """Decide one tool for one turn (SPEC §3).

    Args:
        tool_class: the *effective* class (an unknown class is already ``destructive``).
        enabled: the tool's on/off switch.
        origin: what started the turn.
        tainted: whether untrusted content is in the turn's model context (SPEC §4).
        taint_source: what tainted it, e.g. ``"web__fetch_page at step 3"``; only
            used in the reason.

    Precedence: (1) webhook -> unavailable; (2) off -> off; (3) the matrix.
    A job turn keeps the job column even when tainted.
    """
    if origin is Origin.WEBHOOK:
        return Decision(Verdict.UNAVAILABLE, f"unavailable: {WEBHOOK_REASON}", "webhook")
    if not enabled:
        return Decision(Verdict.OFF, "off: the tool is switched off", "switch")

    cls = tool_class.value
    if origin is Origin.JOB:
        if tool_class is ToolClass.READ:
            return Decision(Verdict.RUN, "run: read tool in a scheduled job", "matrix")
        if tool_class is ToolClass.WRITE:
            return Decision(Verdict.ASK, "ask: write tool in a scheduled job", "matrix")
        return Decision(
            Verdict.UNAVAILABLE, "unavailable: destructive tools are not offered in scheduled jobs", "matrix"
        )

    # origin chat
    if tool_class is ToolClass.READ:
        where = "a tainted turn" if tainted else "a chat turn"
        return Decision(Verdict.RUN, f"run: read tool in {where}{_by(tainted, taint_source)}", "matrix")
    if tainted:
        return Decision(Verdict.ASK, f"ask: {cls} tool in a tainted turn{_by(True, taint_source)}", "matrix")
    if tool_class is ToolClass.WRITE:
        return Decision(Verdict.RUN, "run: write tool in an untainted chat turn", "matrix")
    return Decision(Verdict.ASK, "ask: destructive tool in a chat turn", "matrix")


def _by(tainted: bool, source: str | None) -> str:
    if tainted and source:
        return f" (tainted by {source})"
    return ""
