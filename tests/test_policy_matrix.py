"""The decision matrix of spec §3, as an exhaustive table.

Every stored class (read, write, destructive, none) x switch x origin (chat, job, webhook, gateway)
x taint = 64 rows. The expected verdict of each row is written out by hand from the table of spec §3,
not derived from the code under test.
"""

from __future__ import annotations

import pytest

from palui.policy.classify import effective_class
from palui.policy.matrix import decide
from palui.types import ClassSource, Origin, ToolClass, Verdict

R, W, D, NONE = "read", "write", "destructive", None
ON, OFF = True, False
CHAT, JOB, HOOK, GW = "chat", "job", "webhook", "gateway"
T, U = True, False  # tainted / untainted

# (stored class, switch, origin, tainted) -> (verdict, deciding rule)
TABLE = [
    # --- precedence 1: webhook turns get no tools, whatever the class, switch or taint
    (R, ON, HOOK, U, "unavailable", "webhook"),
    (R, ON, HOOK, T, "unavailable", "webhook"),
    (R, OFF, HOOK, U, "unavailable", "webhook"),
    (R, OFF, HOOK, T, "unavailable", "webhook"),
    (W, ON, HOOK, U, "unavailable", "webhook"),
    (W, ON, HOOK, T, "unavailable", "webhook"),
    (W, OFF, HOOK, U, "unavailable", "webhook"),
    (W, OFF, HOOK, T, "unavailable", "webhook"),
    (D, ON, HOOK, U, "unavailable", "webhook"),
    (D, ON, HOOK, T, "unavailable", "webhook"),
    (D, OFF, HOOK, U, "unavailable", "webhook"),
    (D, OFF, HOOK, T, "unavailable", "webhook"),
    (NONE, ON, HOOK, U, "unavailable", "webhook"),
    (NONE, ON, HOOK, T, "unavailable", "webhook"),
    (NONE, OFF, HOOK, U, "unavailable", "webhook"),
    (NONE, OFF, HOOK, T, "unavailable", "webhook"),
    # --- precedence 2: a tool switched off is off in chat and job turns
    (R, OFF, CHAT, U, "off", "switch"),
    (R, OFF, CHAT, T, "off", "switch"),
    (R, OFF, JOB, U, "off", "switch"),
    (R, OFF, JOB, T, "off", "switch"),
    (W, OFF, CHAT, U, "off", "switch"),
    (W, OFF, CHAT, T, "off", "switch"),
    (W, OFF, JOB, U, "off", "switch"),
    (W, OFF, JOB, T, "off", "switch"),
    (D, OFF, CHAT, U, "off", "switch"),
    (D, OFF, CHAT, T, "off", "switch"),
    (D, OFF, JOB, U, "off", "switch"),
    (D, OFF, JOB, T, "off", "switch"),
    (NONE, OFF, CHAT, U, "off", "switch"),
    (NONE, OFF, CHAT, T, "off", "switch"),
    (NONE, OFF, JOB, U, "off", "switch"),
    (NONE, OFF, JOB, T, "off", "switch"),
    # --- precedence 3: the matrix (a tainted job keeps the job column)
    (R, ON, CHAT, U, "run", "matrix"),
    (R, ON, CHAT, T, "run", "matrix"),
    (R, ON, JOB, U, "run", "matrix"),
    (R, ON, JOB, T, "run", "matrix"),
    (W, ON, CHAT, U, "run", "matrix"),
    (W, ON, CHAT, T, "ask", "matrix"),
    (W, ON, JOB, U, "ask", "matrix"),
    (W, ON, JOB, T, "ask", "matrix"),
    (D, ON, CHAT, U, "ask", "matrix"),
    (D, ON, CHAT, T, "ask", "matrix"),
    (D, ON, JOB, U, "unavailable", "matrix"),
    (D, ON, JOB, T, "unavailable", "matrix"),
    (NONE, ON, CHAT, U, "ask", "matrix"),
    (NONE, ON, CHAT, T, "ask", "matrix"),
    (NONE, ON, JOB, U, "unavailable", "matrix"),
    (NONE, ON, JOB, T, "unavailable", "matrix"),
    # --- the gateway column (spec §8.6): decided like chat; a session is tainted unless its client is trusted
    (R, OFF, GW, U, "off", "switch"),
    (R, OFF, GW, T, "off", "switch"),
    (W, OFF, GW, U, "off", "switch"),
    (W, OFF, GW, T, "off", "switch"),
    (D, OFF, GW, U, "off", "switch"),
    (D, OFF, GW, T, "off", "switch"),
    (NONE, OFF, GW, U, "off", "switch"),
    (NONE, OFF, GW, T, "off", "switch"),
    (R, ON, GW, U, "run", "matrix"),
    (R, ON, GW, T, "run", "matrix"),
    (W, ON, GW, U, "run", "matrix"),
    (W, ON, GW, T, "ask", "matrix"),
    (D, ON, GW, U, "ask", "matrix"),
    (D, ON, GW, T, "ask", "matrix"),
    (NONE, ON, GW, U, "ask", "matrix"),
    (NONE, ON, GW, T, "ask", "matrix"),
]


def _effective(stored: str | None) -> ToolClass:
    base = ToolClass(stored) if stored else None
    cls, source = effective_class(None, base, ClassSource.HINTS if base else None)
    if stored is None:
        assert (cls, source) == (ToolClass.DESTRUCTIVE, ClassSource.UNKNOWN)
    return cls


def test_table_is_complete():
    keys = {(c, e, o, t) for c, e, o, t, _, _ in TABLE}
    assert len(TABLE) == 64 and len(keys) == 64


@pytest.mark.parametrize("stored,enabled,origin,tainted,verdict,rule", TABLE)
def test_matrix_row(stored, enabled, origin, tainted, verdict, rule):
    d = decide(_effective(stored), enabled, Origin(origin), tainted)
    assert d.verdict is Verdict(verdict)
    assert d.source == rule
    assert d.reason.startswith(f"{verdict}: ")
    assert d.offered == (verdict in ("run", "ask"))
    if rule == "webhook":
        assert "webhook summaries get no tools" in d.reason


@pytest.mark.parametrize("stored,enabled,origin,tainted,verdict,rule", TABLE)
def test_reason_names_taint_source(stored, enabled, origin, tainted, verdict, rule):
    src = "web__fetch_page at step 3"
    d = decide(_effective(stored), enabled, Origin(origin), tainted, src)
    assert d.verdict is Verdict(verdict)  # the source never changes the verdict
    if tainted:
        assert f"tainted by {src}" in d.reason
    else:
        assert src not in d.reason


def test_reason_examples():
    d = decide(ToolClass.WRITE, True, Origin.CHAT, True, "web__fetch_page at step 3")
    assert d.reason == "ask: write tool in a tainted turn (tainted by web__fetch_page at step 3)"
    # A tainted job keeps the job column: its reason names the job rule, not the tainted-chat rule.
    d = decide(ToolClass.WRITE, True, Origin.JOB, True, "mcp-notes__read at step 1")
    assert "scheduled job" in d.reason and "tainted by mcp-notes__read at step 1" in d.reason
    d = decide(ToolClass.DESTRUCTIVE, True, Origin.JOB, True)
    assert d.verdict is Verdict.UNAVAILABLE and "scheduled job" in d.reason
    # Tainted without a known source: no dangling "tainted by".
    assert "tainted by" not in decide(ToolClass.WRITE, True, Origin.CHAT, True).reason
    d = decide(ToolClass.WRITE, True, Origin.GATEWAY, True, "the client's unseen context")
    assert d.reason == "ask: write tool in a tainted gateway session (tainted by the client's unseen context)"
