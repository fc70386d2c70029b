"""``/status`` as lines, the same on every surface (the terminal, the web chat, the chat channels). Pure.

Every text that may come from elsewhere (a connector's or channel's state, a delivery failure) is shown
escaped (:func:`palui.text.display.shown`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import tzinfo
from typing import Any

from palui.text.display import shown
from palui.text.when import expiry, local

MAX_LISTED = 10  # pending approvals named one by one
#: What ``/status`` says where no ``palui serve`` runs (the CLI, the terminal chat without a service).
SERVICE_DOWN = "service: not running (palui serve): chat channels, jobs and webhooks wait until it runs"


def governance_lines(s: Mapping[str, Any], more: str = "palui report") -> list[str]:
    """The audit head, a pause of the jobs or the gateway by the emergency brake, and the last days' asks, from
    :meth:`StatusPart.get` (keys ``audit_head``, ``jobs_paused``, ``gateway_paused``, ``governance``; absent keys
    are skipped).
    ``more`` says where the whole report is."""
    out = []
    head = s.get("audit_head")
    if "audit_head" in s:
        out.append(f"audit head: row {head['id']}, hash {head['hash']}" if head else "audit head: no rows yet")
    if s.get("jobs_paused"):
        out.append("jobs: paused by the emergency brake (palui jobs resume)")
    if s.get("gateway_paused"):
        out.append("gateway: paused by the emergency brake (palui gateway resume)")
    g = s.get("governance")
    if g:
        median = f"; median answer {g['median_answer_seconds']:.0f} s" if g["median_answer_seconds"] is not None else ""
        out.append(f"asks in the last {g['days']} days: {g['asks']} (approved {g['approved']}, denied {g['denied']}, "
                   f"expired {g['expired']}, cancelled {g['cancelled']}){median}; more: {more}")
    return out


def _cached(s: Mapping[str, Any]) -> str:
    """The cached input inside today's count, counted at its weight (spec §6.4), or nothing when there was none."""
    cached = s.get("cached_tokens_today") or 0
    if not cached:
        return ""
    weight = s["caps"].get("cached_input_weight")
    how = f"{weight:g} each" if weight is not None else "the provider's weight"
    return f"; cached input read: {cached} tokens, counted at {how}"


def status_lines(s: Mapping[str, Any], more: str = "palui report", questions: str = "palui elicitations list",
                 approvals: str = "palui approvals show ID", zone: tzinfo | None = None, now: float | None = None,
                 service: str | None = None) -> list[str]:
    """:meth:`StatusPart.get` as lines (spec §8 ``/status``): the model, tokens and runs against their caps,
    the webhooks' share while it holds their turns (spec §6.6), the pause, connectors, pending approvals
    (each by id, with its tool and expiry in ``zone``, None: the system's; with ``now``, epoch seconds, as
    ``expires 09:02, in 29 min`` or, on another day, ``expires Dec 08 09:02, in 23 h 5 min``; without it,
    with its date) and questions, chat channels, then :func:`governance_lines`. ``more``, ``questions`` and
    ``approvals`` say where the whole report, the questions and the approvals' details are on this surface.
    ``service`` is a line about ``palui serve`` for a surface that may run without it (the CLI, the terminal
    chat): when it says it is not running, each channel's state reads ``not running (last: STATE)``."""
    caps = s["caps"]
    down = service is not None and service.startswith("service: not running")
    out = [*([service] if service else []),
           f"model: {shown(s['model'], one_line=True) if s['model'] else '(none configured)'}",
           f"tokens today: {s['tokens_today']} of {caps['daily_tokens']}" + _cached(s),
           f"runs in the last hour: {s['runs_last_hour']} of {caps['runs_per_hour']}"]
    if s.get("webhooks_held"):
        out.append(f"webhook turns: held, {s.get('webhook_runs_last_hour')} of {caps.get('webhook_runs_per_hour')} "
                   f"in the last hour (caps.webhook_runs_per_hour) until {s.get('webhooks_held_until')}")
    out += [f"new turns paused by a cap: {shown(s['paused_reason'], one_line=True)} until {s['paused_until']}"
            if s["paused"] else "new turns paused by a cap: no",  # the brake's pause is said with the jobs below
            "connectors: " + ", ".join(f"{c['id']} ({shown(c['state'], one_line=True)})" for c in s["connectors"]),
            f"pending approvals: {s['pending_approvals']}"]
    waiting = s.get("pending_approval_list") or []
    for a in waiting[:MAX_LISTED]:
        when = expiry(a["expires_at"], now, zone) if now is not None else \
            f"expires {local(a['expires_at'], zone, '%Y-%m-%d %H:%M')}"
        out.append(f"  {a['id']}: {shown(a['tool'], one_line=True)}, {when}")
    if waiting:
        out.append(f"  ({'and ' + str(len(waiting) - MAX_LISTED) + ' more; ' if len(waiting) > MAX_LISTED else ''}"
                   f"{approvals})")
    if s.get("pending_elicitations"):
        out.append(f"questions from MCP servers waiting: {s['pending_elicitations']} ({questions})")
    for ch in s.get("channels", []):  # chat channels (spec §8.3)
        failure = ch.get("last_failure")
        failure = f"; last delivery failure: {shown(failure, one_line=True)}" if failure else ""
        state = shown(ch["state"], one_line=True)
        state = f"not running (last: {state})" if down else state
        out.append(f"channel {ch['name']}: {state}{failure}")
    return out + governance_lines(s, more)
