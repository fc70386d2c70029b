"""The per-turn tool budget: which tools to offer when more than ~30 are allowed (SPEC §6). Pure.

Built-in connectors are always offered. MCP connectors are ranked by BM25 relevance of
their connector and tool names and descriptions to the turn's input, and taken whole,
most relevant first, while they fit (a connector that does not fit the room left is
skipped and the next one tried); a single connector with more tools than the whole
budget is cut by ranking its tools. Ties break by connector id (then tool name), so the
choice is deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """Lower-case alphanumeric tokens; ``snake_case`` and ``kebab-case`` split."""
    return _TOKEN.findall(text.lower())


@dataclass(frozen=True)
class Candidate:
    """A tool that the policy would offer: its name, connector, whether built-in, and text to rank."""

    name: str
    connector: str
    builtin: bool
    text: str


def bm25_scores(query: str, docs: list[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """BM25 score of each document for ``query`` (Okapi BM25, idf with +1 smoothing)."""
    q = tokens(query)
    toks = [tokens(d) for d in docs]
    if not docs:
        return []
    avg = sum(len(t) for t in toks) / len(toks) or 1.0
    df: Counter[str] = Counter()
    for t in toks:
        df.update(set(t))
    n = len(docs)
    scores = []
    for t in toks:
        tf = Counter(t)
        s = 0.0
        for term in q:
            if term not in tf:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            s += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(t) / avg))
        scores.append(s)
    return scores


def select(candidates: list[Candidate], query: str, limit: int) -> list[Candidate]:
    """Choose at most ``limit`` tools (built-ins always in), per the rule in the module docstring.

    Returns the chosen candidates in a stable order (connector id, then name).
    """
    builtin = [c for c in candidates if c.builtin]
    rest = [c for c in candidates if not c.builtin]
    chosen = list(builtin)
    room = limit - len(chosen)
    by_conn: dict[str, list[Candidate]] = {}
    for c in rest:
        by_conn.setdefault(c.connector, []).append(c)
    conn_ids = sorted(by_conn)
    conn_docs = [" ".join(c.text for c in by_conn[cid]) + " " + cid for cid in conn_ids]
    conn_scores = bm25_scores(query, conn_docs)
    order = sorted(range(len(conn_ids)), key=lambda i: (-conn_scores[i], conn_ids[i]))
    whole_room = room
    for i in order:
        if room <= 0:
            break
        tools = by_conn[conn_ids[i]]
        if len(tools) <= room:
            chosen.extend(tools)
            room -= len(tools)
        elif len(tools) > whole_room:
            # A connector that could never fit whole is cut by ranking its tools.
            scores = bm25_scores(query, [t.text for t in tools])
            ranked = sorted(range(len(tools)), key=lambda j: (-scores[j], tools[j].name))
            chosen.extend(tools[j] for j in ranked[:room])
            room = 0
        # else: it would fit an empty budget but not the room left; skip it, smaller ones may fit.
    return sorted(chosen, key=lambda c: (c.connector, c.name))
