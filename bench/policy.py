"""Throughput of the pure policy: ``decide()`` and the 30-tool budget ``select()``, against trivial baselines.

- decide: every (class, switch, origin, tainted) combination, with a taint source, called
  in a loop; baseline: a dict lookup in the same table precomputed (what a cache would cost).
- select: 200 candidate tools (the 9 built-ins and 191 MCP tools over 20 connectors) ranked
  by BM25 against a turn message and cut to 30; baseline: taking the first 30.

Usage: ``.venv/bin/python bench/policy.py [--seconds S]``. Prints calls per second and the
time per call (p50/p99 over batches of calls, so a p99 is a slow batch's average); no thresholds.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time

from common import QUICK_HELP, pct, quick

from palui.policy.budget import Candidate, select
from palui.policy.matrix import decide
from palui.types import Origin, ToolClass

WORDS = ("calendar event meeting invite note page search issue pull request repository file folder "
         "message channel email contact weather forecast invoice payment customer ticket deploy build log "
         "metric alert dashboard query table row document sheet slide photo album song playlist map route").split()


def candidates(n_mcp: int = 191, connectors: int = 20, seed: int = 7) -> list[Candidate]:
    """9 built-in tools plus ``n_mcp`` MCP tools spread over ``connectors`` connectors, with word-salad descriptions."""
    rnd = random.Random(seed)
    out = [Candidate(f"{c}__{t}", c, True, f"{c} {t} built-in tool")
           for c, t in [("recall", "search_memories"), ("recall", "add_memory"), ("recall", "forget_memory"),
                        ("tasks", "list_tasks"), ("tasks", "create_task"), ("tasks", "update_task"),
                        ("tasks", "delete_task"), ("web", "fetch_page"), ("messages", "send_message")]]
    for i in range(n_mcp):
        conn = f"mcp-server-{i % connectors:02d}"
        tool = "_".join(rnd.sample(WORDS, 2))
        desc = " ".join(rnd.choices(WORDS, k=rnd.randint(8, 30)))
        out.append(Candidate(f"{conn}__{tool}_{i}", conn, False, f"{conn} {tool} {desc}"))
    return out


def per_second(fn, seconds: float) -> tuple[float, list[float]]:
    """Call ``fn`` repeatedly for about ``seconds``; return calls/s and per-batch µs per call."""
    batch, samples, n, start = 1, [], 0, time.perf_counter()
    while True:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        dt = time.perf_counter() - t0
        n += batch
        samples.append(dt / batch * 1e6)
        if dt < 0.01:
            batch *= 2
        if time.perf_counter() - start >= seconds:
            return n / (time.perf_counter() - start), samples


def main(seconds: float) -> None:
    combos = list(itertools.product(list(ToolClass), (True, False), list(Origin), (True, False)))
    table = {c: decide(*c, taint_source="web__fetch_page at step 3") for c in combos}
    cycle = itertools.cycle(combos)

    def palui_decide() -> None:
        decide(*next(cycle), taint_source="web__fetch_page at step 3")

    def baseline_decide() -> None:
        table[next(cycle)]

    cands = candidates()
    query = "what is on my calendar this week, and did the invoice payment go through?"
    chosen = select(cands, query, 30)
    # Built-ins are ranked with the rest (spec §6.2): how many are chosen depends on the question.
    assert 0 < len(chosen) <= 30, len(chosen)

    def palui_select() -> None:
        select(cands, query, 30)

    def baseline_select() -> None:
        cands[:30]

    print(f"policy throughput ({time.strftime('%Y-%m-%d')}, {len(combos)} decide combinations, "
          f"{len(cands)} candidate tools -> {len(chosen)} chosen)")
    print(f"  {'':<34}{'calls/s':>14}{'p50 µs':>10}{'p99 µs':>10}{'x slower':>10}")
    for title, ours, base in (("decide()", palui_decide, baseline_decide),
                              ("select() 200 tools -> 30", palui_select, baseline_select)):
        # Alternate short slices so load hits both alike.
        rows: dict[str, tuple[float, list[float]]] = {}
        for name in (f"palui {title}", f"baseline for {title}"):
            rows[name] = (0.0, [])
        for _ in range(5):
            for name, fn in ((f"palui {title}", ours), (f"baseline for {title}", base)):
                rate, samples = per_second(fn, seconds / 10)
                prev_rate, prev = rows[name]
                rows[name] = (prev_rate + rate / 5, prev + samples)
        base_rate = rows[f"baseline for {title}"][0]
        for name, (rate, samples) in rows.items():
            print(f"  {name:<34}{rate:>14,.0f}{pct(samples, 50):>10.2f}{pct(samples, 99):>10.2f}"
                  f"{base_rate / rate:>9.1f}x")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=quick(4.0, 0.2), help="total seconds per pair (split in slices)")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    main(ap.parse_args().seconds)
