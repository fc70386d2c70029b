"""The connector-health line of an unattended result, and the status it gives a job (spec §8.4).

Nobody watches a job or a webhook turn as it runs, so its result says which connectors it needed were down
and what was therefore not done. A connector is **needed** by a job's turn when the job is limited to it
(``--connector``) or when the turn tried to call one of its tools; it is **down** when the turn recorded it
unavailable: not offered because it waits for a sign-in, or a call to it that could not reach its server (it
did not start, its connection closed, it restarted mid-call; :attr:`ToolResult.connector_down`). A job whose
turn would end ``done`` ends ``partial`` when some needed connector was down and ``failed`` when every one
was; never ``done``. A webhook turn has no tools (spec §3): its line says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from palui.runner.state import Turn
from palui.types import Origin, TurnStatus


@dataclass(frozen=True)
class Health:
    """``line``: the sentence the result ends with; ``status``: what a ``done`` job becomes (None: unchanged)."""

    line: str
    status: TurnStatus | None = None
    needed: tuple[str, ...] = ()
    down: tuple[str, ...] = ()


def health(t: Turn, scope: list[str] | None, connector_of: Callable[[str], str | None]) -> Health:
    """The health of unattended turn ``t`` from its events; ``scope``: the job's connectors (None: all);
    ``connector_of``: the connector of a model-visible tool name (None when unknown)."""
    if t.origin is Origin.WEBHOOK:
        return Health("Connectors: none used (a webhook summary gets no tools).")
    needed: list[str] = list(scope or [])
    why: dict[str, str] = {}
    not_run: dict[str, list[str]] = {}
    for e in t.events:
        if e["type"] == "connector_error":
            why.setdefault(e["connector"], e["error"])
    for e in t.events:
        if e["type"] != "tool_call":
            continue
        cid = connector_of(e["tool"])
        if cid is None:
            continue
        if cid not in needed:
            needed.append(cid)
        if cid in why and e["is_error"] and e["tool"] not in not_run.setdefault(cid, []):
            not_run[cid].append(e["tool"])
    down = [c for c in needed if c in why]
    if not needed:
        return Health("Connectors: none needed.")
    parts = []
    for c in needed:
        if c in why:
            what = f"{', '.join(not_run[c])} not done" if not_run.get(c) else "none of its tools ran"
            parts.append(f"{c} down ({_short(why[c].removeprefix(f'{c}: '))}): {what}")
        else:
            parts.append(f"{c} ok")
    status = None
    if down:
        status = TurnStatus.FAILED if len(down) == len(needed) else TurnStatus.PARTIAL
    return Health("Connectors: " + "; ".join(parts) + ".", status, tuple(needed), tuple(down))


def _short(text: str) -> str:
    line = text.splitlines()[0] if text else "unavailable"
    return line if len(line) <= 200 else line[:199] + "…"
