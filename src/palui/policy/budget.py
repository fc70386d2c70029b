"""The per-turn tool budget: which tools to offer when more than ~30 are allowed (spec §6). Pure.

When every candidate fits the budget, all are offered. Otherwise connectors, built-in and MCP
alike, are ranked by BM25 relevance of their connector id and tool names and descriptions to
the turn's input, and taken whole, most relevant first, while they fit (a connector that does
not fit the room left is skipped and the next one tried); a single connector with more tools
than the whole budget is cut by ranking its tools. The room then left is filled with the most
relevant tools of the connectors that did not fit whole, so the budget is used (spec §6.2): first
among the connectors the input matches, then (if room is still left) as above for the connectors it
does not match at all. Ties break by connector id (then tool name), so the choice is deterministic.

Ranking works from a :class:`RankIndex` (each tool's term counts and length, built once by
:func:`rank_index`; the runner keeps one per catalog version), so a choice costs in proportion to
the candidates and the query's matches, not to re-reading every description. Scores are
computed over exactly the candidates given, whatever the index also holds.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

_TOKEN = re.compile(r"[a-z0-9]+")
K1, B = 1.5, 0.75


def tokens(text: str) -> list[str]:
    """Lower-case alphanumeric tokens; ``snake_case`` and ``kebab-case`` split; a plural or ``-ing`` form
    counted as its stem (:func:`stem`), so "remember" finds "remembering" and "memories" finds "memory"."""
    return [stem(t) for t in _TOKEN.findall(text.lower())]


def stem(word: str) -> str:
    """A light English stem: ``-ies`` → ``-y``, then ``-ing``, ``-ed`` or a plural ``-s`` dropped from words
    long enough to keep a stem of three letters or more (``hotels`` → ``hotel``, ``saved`` → ``sav``)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@dataclass(frozen=True)
class Candidate:
    """A tool that the policy would offer: its name, connector, whether built-in, and text to rank."""

    name: str
    connector: str
    builtin: bool
    text: str


@dataclass(frozen=True)
class RankIndex:
    """A candidate list tokenized for ranking (:func:`rank_index`): per tool its connector, its term
    counts (``terms[name]``) and length; ``postings[term]``: the tools whose text has the term; per connector
    its candidates (``by_connector``, in list order), the term counts of its id and the length of its
    whole document (every candidate's text and its id)."""

    candidates: tuple[Candidate, ...]
    connector: dict[str, str]
    terms: dict[str, Counter[str]]
    length: dict[str, int]
    postings: dict[str, tuple[str, ...]]
    by_connector: dict[str, tuple[Candidate, ...]]
    conn_terms: dict[str, Counter[str]]
    conn_length: dict[str, int]


def rank_index(candidates: list[Candidate], known: dict[str, Counter[str]] | None = None,
               prior: RankIndex | None = None) -> RankIndex:
    """Tokenize every candidate's text (and every connector id) once, for :func:`select`.

    ``known`` maps texts to their term counts from an earlier index (the caller's to keep): a text
    found there is not tokenized again, and every text tokenized here is added to it. ``prior`` is
    an earlier index (of another candidate list): when the lists differ in a few candidates
    (one tool switched, reclassed or changed), the new index is that one patched, costing in
    proportion to the change rather than to the catalog; it indexes exactly what a build from
    scratch would (a candidate equal to one of ``prior``'s keeps that one's term counts).
    """
    if prior is not None:
        patched = _patched(prior, candidates, known)
        if patched is not None:
            return patched
    terms = {c.name: _counts(c.text, known) for c in candidates}
    length = {n: sum(tf.values()) for n, tf in terms.items()}
    post: dict[str, list[str]] = {}
    for name, tf in terms.items():
        for term in tf:
            post.setdefault(term, []).append(name)
    return _by_connector(candidates, terms, length, {t: tuple(v) for t, v in post.items()})


def _counts(text: str, known: dict[str, Counter[str]] | None) -> Counter[str]:
    tf = known.get(text) if known is not None else None
    if tf is None:
        tf = Counter(tokens(text))
        if known is not None:
            known[text] = tf
    return tf


def _by_connector(candidates: list[Candidate], terms: dict[str, Counter[str]], length: dict[str, int],
                  postings: dict[str, tuple[str, ...]]) -> RankIndex:
    """The index from per-tool counts and postings: the per-connector parts are derived here (cheap)."""
    by_conn: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_conn.setdefault(c.connector, []).append(c)
    conn_terms = {cid: Counter(tokens(cid)) for cid in by_conn}
    conn_length = {cid: sum(conn_terms[cid].values()) + sum(length[c.name] for c in tools)
                   for cid, tools in by_conn.items()}
    return RankIndex(tuple(candidates), {c.name: c.connector for c in candidates}, terms, length, postings,
                     {cid: tuple(v) for cid, v in by_conn.items()}, conn_terms, conn_length)


def _patched(prior: RankIndex, candidates: list[Candidate], known: dict[str, Counter[str]] | None) -> RankIndex | None:
    """``prior`` patched to index ``candidates``, or None when the change is too large to be worth it
    (more than 1 in 16 candidates, at least 8) or a name repeats (then a build from scratch decides)."""
    old = {c.name: c for c in prior.candidates}
    new = {c.name: c for c in candidates}
    if len(new) != len(candidates) or len(old) != len(prior.candidates):
        return None
    gone = [n for n, c in old.items() if (x := new.get(n)) is not c and x != c]  # removed or changed
    come = [c for c in candidates if (x := old.get(c.name)) is not c and x != c]  # added or changed
    if len(gone) + len(come) > max(8, len(candidates) // 16):
        return None
    terms, length = dict(prior.terms), dict(prior.length)
    dropped: dict[str, set[str]] = {}
    for name in gone:
        for term in terms.pop(name):
            dropped.setdefault(term, set()).add(name)
        del length[name]
    added: dict[str, list[str]] = {}
    for c in come:
        tf = terms[c.name] = _counts(c.text, known)
        length[c.name] = sum(tf.values())
        for term in tf:
            added.setdefault(term, []).append(c.name)
    postings = dict(prior.postings)
    for term in dropped.keys() | added.keys():
        out = dropped.get(term, set())
        names = [n for n in postings.get(term, ()) if n not in out] + added.get(term, [])
        if names:
            postings[term] = tuple(names)
        else:
            postings.pop(term, None)
    return _by_connector(candidates, terms, length, postings)


def _bm25(query: list[str], tf: dict[str, dict[str, int]], length: dict[str, int]) -> dict[str, float]:
    """Okapi BM25 (idf with +1 smoothing) of each document for ``query`` (terms, repeats counted):
    ``tf[doc][term]`` holds only the query's terms; ``length[doc]`` is every document's length."""
    n = len(length)
    if not n:
        return {}
    avg = sum(length.values()) / n or 1.0
    df: Counter[str] = Counter(term for counts in tf.values() for term in counts)
    scores = dict.fromkeys(length, 0.0)
    for doc, counts in tf.items():
        s = 0.0
        for term in query:
            f = counts.get(term)
            if f:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                s += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * length[doc] / avg))
        scores[doc] = s
    return scores


def select(candidates: list[Candidate], query: str, limit: int, *, index: RankIndex | None = None) -> list[Candidate]:
    """Choose at most ``limit`` of ``candidates``, per the rule in the module docstring.

    ``index`` is :func:`rank_index` of exactly these candidates, when the caller keeps one (the
    runner does, per catalog version and situation); without it, it is built here. Returns the
    chosen candidates in a stable order (connector id, then name).
    """
    if len(candidates) <= limit:
        return sorted(candidates, key=lambda c: (c.connector, c.name))
    idx = index if index is not None else rank_index(candidates)
    q = tokens(query)
    qs = set(q)
    # A connector's document: its candidates' texts and its id. Only the query's terms need counting.
    conn_tf: dict[str, dict[str, int]] = {}
    for term in qs:
        for name in idx.postings.get(term, ()):
            cid = idx.connector[name]
            counts = conn_tf.setdefault(cid, {})
            counts[term] = counts.get(term, 0) + idx.terms[name][term]
        for cid, tf in idx.conn_terms.items():
            f = tf.get(term)
            if f:
                counts = conn_tf.setdefault(cid, {})
                counts[term] = counts.get(term, 0) + f
    conn_scores = _bm25(q, conn_tf, idx.conn_length)
    ranked = sorted(idx.by_connector, key=lambda i: (-conn_scores[i], i))
    chosen: list[Candidate] = []
    room = limit
    # Connectors the input matches come first, then the rest: in each tier connectors are taken whole while
    # they fit, and the room then left is filled with the most relevant tools of the tier's connectors that
    # did not fit whole, before any connector of the next tier (spec §6.2).
    for tier in ([c for c in ranked if conn_scores[c] > 0], [c for c in ranked if conn_scores[c] <= 0]):
        skipped: list[Candidate] = []
        for cid in tier:
            tools = idx.by_connector[cid]
            if room <= 0:
                break
            if len(tools) <= room:
                chosen.extend(tools)
                room -= len(tools)
            elif len(tools) > limit:
                # A connector that could never fit whole is cut by ranking its tools.
                chosen.extend(_ranked(idx, tools, q, qs)[:room])
                room = 0
            else:  # it would fit an empty budget but not the room left: smaller ones may fit whole first
                skipped.extend(tools)
        if room > 0 and skipped:
            filled = _ranked(idx, skipped, q, qs, [conn_scores[c.connector] for c in skipped])[:room]
            chosen.extend(filled)
            room -= len(filled)
    return sorted(chosen, key=lambda c: (c.connector, c.name))


def _ranked(idx: RankIndex, tools: list[Candidate] | tuple[Candidate, ...], q: list[str], qs: set[str],
            conn_scores: list[float] | None = None) -> list[Candidate]:
    """``tools`` by BM25 relevance of their own text to the query (scored among ``tools``), most relevant
    first; ties by their connector's score (``conn_scores``, in the order of ``tools``), then connector id and
    tool name."""
    mine = {t.name for t in tools}
    tool_tf: dict[str, dict[str, int]] = {}
    for term in qs:
        for name in idx.postings.get(term, ()):
            if name in mine:
                tool_tf.setdefault(name, {})[term] = idx.terms[name][term]
    scores = _bm25(q, tool_tf, {t.name: idx.length[t.name] for t in tools})
    by_conn = conn_scores if conn_scores is not None else [0.0] * len(tools)
    order = sorted(range(len(tools)), key=lambda i: (-scores[tools[i].name], -by_conn[i], tools[i].connector,
                                                     tools[i].name))
    return [tools[i] for i in order]

