"""Which tools a turn is offered (SPEC §3, §6): the policy at offer time over the stored catalog, then the budget.

Everything here reads a catalog :class:`~palui.store.catalog.Snapshot`: the stored, pinned
definitions. No MCP server is started to offer its tools (issue 11): a server starts when a
turn calls one of its tools, and that connection re-checks the pins (a changed tool is
switched off, flagged and the call refused, SPEC §7). What depends only on the catalog
version and the situation (origin, taint) is computed once per version and kept in the
snapshot's memo: the candidates the policy would offer, the ranking index, each tool's
definition as the model is sent it. The decision itself is the pure policy's
(:func:`~palui.policy.matrix.decide`); its verdict does not depend on the taint source,
only its reason does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai.tools import ToolDefinition

from palui.policy.budget import Candidate, RankIndex, rank_index, select
from palui.policy.matrix import decide
from palui.store.catalog import Snapshot
from palui.store.tools import ToolRow
from palui.text.escape import strip_hidden
from palui.types import Origin

BUILTIN = ("recall", "tasks", "web", "messages")


@dataclass(frozen=True)
class Offer:
    """The tools a turn is offered (model-visible names, by connector then name) and the enabled,
    allowed tools the budget left out (SPEC §6: listed in the turn's events)."""

    offered: list[str]
    left_out: list[str]


def is_builtin(r: ToolRow) -> bool:
    return r.connector in BUILTIN


def candidates(snap: Snapshot, origin: Origin, tainted: bool) -> list[Candidate]:
    """The usable tools the policy offers in this situation (switched on, allowed by the matrix)."""
    key = ("candidates", origin, tainted)
    out = snap.memo.get(key)
    if out is None:
        out = snap.memo[key] = [_candidate(snap, r) for r in snap.usable()
                                if decide(r.tool_class, r.enabled, origin, tainted, None).offered]
    return out


def _candidate(snap: Snapshot, r: ToolRow) -> Candidate:
    key = ("candidate", r.name)
    c = snap.memo.get(key)
    if c is None:
        # Ranking uses the text with hidden characters removed, as the model is sent it (issue 10 §2).
        c = snap.memo[key] = Candidate(r.name, r.connector, is_builtin(r), strip_hidden(f"{r.connector} {r.tool} "
                                                                                          f"{r.description}"))
    return c


def _index(snap: Snapshot, origin: Origin, tainted: bool) -> RankIndex:
    key = ("rank_index", origin, tainted)
    idx = snap.memo.get(key)
    if idx is None:
        idx = snap.memo[key] = rank_index(candidates(snap, origin, tainted))
    return idx


def choose(snap: Snapshot, origin: Origin, tainted: bool, query: str, limit: int) -> Offer:
    """What a turn with this ``origin``, taint and input is offered, at most ``limit`` tools (SPEC §6).

    A webhook turn is offered nothing (SPEC §3). Built-in and MCP connectors are ranked together;
    when every candidate fits, all are offered.
    """
    if origin is Origin.WEBHOOK:
        return Offer([], [])
    cands = candidates(snap, origin, tainted)
    if len(cands) <= limit:
        return Offer([c.name for c in select(cands, query, limit)], [])
    chosen = select(cands, query, limit, index=_index(snap, origin, tainted))
    names = [c.name for c in chosen]
    taken = set(names)
    key = ("names", origin, tainted)
    every = snap.memo.get(key)
    if every is None:
        every = snap.memo[key] = sorted(c.name for c in cands)
    return Offer(names, [n for n in every if n not in taken])


def definitions(snap: Snapshot, names: list[str], origin: Origin, tainted: bool) -> list[ToolDefinition]:
    """The definitions sent to the model at a step: each offered tool that is still usable and still
    offered by the policy now (switched off or reclassed since the turn started: never again)."""
    out = []
    for name in names:
        r = snap.tools.get(name)
        if r is None or not r.usable or not decide(r.tool_class, r.enabled, origin, tainted, None).offered:
            continue
        key = ("definition", name)
        d = snap.memo.get(key)
        if d is None:
            d = snap.memo[key] = _definition(r)
        out.append(d)
    return out


def _definition(r: ToolRow) -> ToolDefinition:
    schema = r.input_schema if isinstance(r.input_schema, dict) and r.input_schema else {"type": "object"}
    description = r.description or r.tool
    if r.hidden:  # what the model is sent has the hidden characters removed (issue 10 §2)
        schema, description = strip_hidden_in(schema), strip_hidden(description)
    return ToolDefinition(name=r.name, description=description, parameters_json_schema=schema)


def strip_hidden_in(value: Any) -> Any:
    """``value`` (JSON-like) with hidden characters removed from every string, keys included."""
    if isinstance(value, str):
        return strip_hidden(value)
    if isinstance(value, dict):
        return {strip_hidden(str(k)): strip_hidden_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_hidden_in(v) for v in value]
    return value
