"""Issue 15's lines of ``/status``, the same on every surface (terminal, web chat, chat channels). Pure."""

from __future__ import annotations

from typing import Any


def governance_lines(s: dict[str, Any], more: str = "palui report") -> list[str]:
    """The audit head, a pause of the jobs by the emergency brake, and the last days' asks, from
    :meth:`Service.status` (keys ``audit_head``, ``jobs_paused``, ``governance``; absent keys are skipped).
    ``more`` says where the whole report is."""
    out = []
    head = s.get("audit_head")
    if "audit_head" in s:
        out.append(f"audit head: row {head['id']}, hash {head['hash']}" if head else "audit head: no rows yet")
    if s.get("jobs_paused"):
        out.append("jobs: paused by the emergency brake (palui jobs resume)")
    g = s.get("governance")
    if g:
        median = f"; median answer {g['median_answer_seconds']:.0f} s" if g["median_answer_seconds"] is not None else ""
        out.append(f"asks in the last {g['days']} days: {g['asks']} (approved {g['approved']}, denied {g['denied']}, "
                   f"expired {g['expired']}, cancelled {g['cancelled']}){median}; more: {more}")
    return out
