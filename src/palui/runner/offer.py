"""Which tools a turn is offered (spec §3, §6): the policy at offer time over the stored catalog, then the budget;
and which tools a gateway client may call (spec §8.6).

Everything here reads a catalog :class:`~palui.store.catalog.Snapshot`: the stored, pinned
definitions. No MCP server is started to offer its tools (docs/decisions/0078-mcp-servers-start-on-first-call.md):
a server starts when a turn calls one of its tools, and that connection re-checks the pins (a changed tool is
switched off, flagged and the call refused, spec §7). What depends only on the catalog
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
from palui.policy.input_schema import DESCRIPTION_CHARS, cut_description, for_model
from palui.policy.matrix import decide
from palui.store import catalog
from palui.store.catalog import Snapshot
from palui.store.db import Database
from palui.store.tools import ToolRow
from palui.text.escape import strip_hidden
from palui.types import Notify, Origin

BUILTIN = ("recall", "tasks", "web", "messages")
#: The built-in connectors a gateway client may be given (spec §8.6): ``messages`` writes to the person's own
#: channel, where another agent's text would read as Palui's.
GATEWAY_BUILTIN = ("recall", "tasks", "web")
#: Why a tool is not a gateway client's to call (spec §8.6).
NOT_THE_CLIENTS = "no tool of this client has this name"


@dataclass(frozen=True)
class Offer:
    """The tools a turn is offered (model-visible names, by connector then name) and the enabled,
    allowed tools the budget left out (spec §6: listed in the turn's events)."""

    offered: list[str]
    left_out: list[str]


def is_builtin(r: ToolRow) -> bool:
    """Whether ``r`` is a built-in connector's tool (no connection to start before calling it)."""
    return r.connector in BUILTIN


def gateway_offers(r: ToolRow | None, connectors: tuple[str, ...] | None) -> bool:
    """Whether a gateway client given ``connectors`` (None: every MCP connector) may call the tool ``r``: an MCP
    connector's tool in its connectors, or a built-in one of :data:`GATEWAY_BUILTIN` it was given by name (spec
    §8.6). Whether the tool may run now is the governed call's to decide."""
    if r is None:
        return False
    if is_builtin(r):
        return r.connector in GATEWAY_BUILTIN and connectors is not None and r.connector in connectors
    return connectors is None or r.connector in connectors


def usable_tool(db: Database, name: str) -> ToolRow | None:
    """One tool as stored now, for the call-time check (spec §3): the catalog version and the row are read
    in one statement (:func:`~palui.store.catalog.tool_now`), so a switch-off made by another process is
    seen before the call. None if gone, no longer listed or its connector is off."""
    r = catalog.tool_now(db, name)
    return r if r is not None and r.usable else None


def candidates(snap: Snapshot, origin: Origin, tainted: bool, carry: dict[Any, Any] | None = None) -> list[Candidate]:
    """The usable tools the policy offers in this situation (switched on, allowed by the matrix).
    ``carry`` (see :func:`choose`) keeps each tool's candidate while its parsed row is the same object."""
    key = ("candidates", origin, tainted)
    out = snap.memo.get(key)
    if out is None:
        made: dict[str, tuple[ToolRow, Candidate]] = {} if carry is None else carry.setdefault("candidates", {})
        offered: dict[tuple[Any, bool], bool] = {}  # the verdict depends on class and switch only, here
        out = []
        for r in snap.usable():
            if r.needs_tasks or r.connector_signin:  # spec §7.7, §7.9: never offered; a sign-in first
                continue
            k = (r.tool_class, r.enabled)
            if k not in offered:
                offered[k] = decide(r.tool_class, r.enabled, origin, tainted, None).offered
            if offered[k]:
                hit = made.get(r.name)
                if hit is None or hit[0] is not r:
                    hit = made[r.name] = (r, _candidate(r))
                out.append(hit[1])
        snap.memo[key] = out
    return out


def waiting_for_sign_in(snap: Snapshot, scope: list[str] | None = None) -> list[str]:
    """Connectors with switched-on tools that are not offered until the person signs in again (spec §7.9)."""
    key = ("sign_in", None if scope is None else tuple(scope))
    out = snap.memo.get(key)
    if out is None:
        out = snap.memo[key] = sorted({r.connector for r in snap.usable() if r.connector_signin and r.enabled
                                       and (scope is None or r.connector in scope)})
    return out


def tell_unreadable(db: Database, snap: Snapshot, notify: Notify) -> list[str]:
    """Tell the person once about each stored tool row that did not read through its schema (a class word
    that is not one: read as unknown, treated as destructive, spec §2), naming the tool and the fix. Once
    per tool and stored problem: a ``kv`` row, written with the notice in one transaction, remembers what
    was told. Checked once per catalog version. Returns the names told now."""
    if snap.memo.get("unreadable_told"):
        return []
    told = []
    for r in sorted((r for r in snap.tools.values() if r.unreadable and r.present), key=lambda r: r.name):
        key = f"unreadable_tool:{r.name}"
        with db.write() as c:
            seen = c.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
            if seen is not None and seen[0] == r.unreadable:
                continue
            c.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, r.unreadable))
            notify("notice", r.unreadable_notice or r.name)
        told.append(r.name)
    snap.memo["unreadable_told"] = True
    return told


def _candidate(r: ToolRow) -> Candidate:
    # Ranking uses the text with hidden characters removed, as the model is sent it (spec §4.7).
    text = f"{r.connector} {r.tool} {r.description[:DESCRIPTION_CHARS]}"
    return Candidate(r.name, r.connector, is_builtin(r), strip_hidden(text))


def _index(snap: Snapshot, origin: Origin, tainted: bool, carry: dict[Any, Any]) -> RankIndex:
    """The ranking index of this situation's candidates. ``carry`` (kept by the caller across catalog
    versions) holds tokenized texts and the last index per situation, reused when a new version left
    this situation's candidates exactly as they were (a change to another tool, a class that keeps
    its verdict) and patched when a few of them changed."""
    key = ("rank_index", origin, tainted)
    idx = snap.memo.get(key)
    if idx is None:
        cands = candidates(snap, origin, tainted, carry)
        sig = tuple(cands)  # the same candidate objects while their rows are unchanged: compared by identity
        prior = carry.get(key)
        if prior is not None and prior[0] == sig:
            idx = prior[1]
        else:  # a few candidates changed: the last index is patched (policy.budget.rank_index)
            idx = rank_index(cands, carry.setdefault("texts", {}), None if prior is None else prior[1])
            carry[key] = (sig, idx)
        snap.memo[key] = idx
    return idx


def choose(snap: Snapshot, origin: Origin, tainted: bool, query: str, limit: int,
           carry: dict[Any, Any] | None = None, *, scope: list[str] | None = None) -> Offer:
    """What a turn with this ``origin``, taint and input is offered, at most ``limit`` tools (spec §6).

    A webhook turn is offered nothing (spec §3). Built-in and MCP connectors are ranked together;
    when every candidate fits, all are offered. ``carry`` is the caller's dict kept from one catalog
    version to the next (tokenized texts, the last ranking index per situation). ``scope`` (a job
    limited to some connectors, spec §8.4) keeps only those connectors' tools, before ranking;
    such a list is ranked with an index of its own, built for the turn (job turns are rare).
    """
    if origin is Origin.WEBHOOK:
        return Offer([], [])
    cands = candidates(snap, origin, tainted, carry)
    if scope is not None:
        keep = set(scope)
        cands = [c for c in cands if c.connector in keep]
    if len(cands) <= limit:
        return Offer([c.name for c in select(cands, query, limit)], [])
    if scope is not None:
        chosen = select(cands, query, limit, index=rank_index(cands, None if carry is None else carry.get("texts")))
        taken = {c.name for c in chosen}
        return Offer([c.name for c in chosen], sorted(c.name for c in cands if c.name not in taken))
    chosen = select(cands, query, limit, index=_index(snap, origin, tainted, {} if carry is None else carry))
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
        if r is None or not r.usable or r.needs_tasks or r.connector_signin or \
                not decide(r.tool_class, r.enabled, origin, tainted, None).offered:
            continue
        key = ("definition", name)
        d = snap.memo.get(key)
        if d is None:
            d = snap.memo[key] = definition(r)
        out.append(d)
    return out


def definition(r: ToolRow) -> ToolDefinition:
    """A tool's definition as a model is sent it, and as the gateway lists it to a client (spec §4.7, §8.6).

    Its description, and every description inside its schema, is sent as its first 4,000 characters (decision
    0082: a server's text is hostile, one description of a megabyte would fill every turn's context); a
    definition with hidden characters has them removed (the person reviewed it escaped). The stored definition is
    kept whole: ``palui tools show`` and the review diff show all of it."""
    schema = for_model(r.input_schema) if isinstance(r.input_schema, dict) and r.input_schema else {"type": "object"}
    description = r.description or r.tool
    if r.hidden:  # what the model is sent has the hidden characters removed (spec §4.7)
        schema, description = strip_hidden_in(schema), strip_hidden(description)
    return ToolDefinition(name=r.name, description=cut_description(description), parameters_json_schema=schema)


def strip_hidden_in(value: Any) -> Any:
    """``value`` (JSON-like) with hidden characters removed from every string, keys included."""
    if isinstance(value, str):
        return strip_hidden(value)
    if isinstance(value, dict):
        return {strip_hidden(str(k)): strip_hidden_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_hidden_in(v) for v in value]
    return value
