"""What the audit's hash chain costs (spec §10.3): per turn, and ``palui audit verify`` over 100,000 rows.

1. Turns: the turn of ``turn_overhead.py`` (one ``recall__search_memories`` call + answer, ``script:``
   model) through ``TurnsPart.send``, two ways alternating turn by turn in one process:

   - chained:  ``palui.store.audit.record`` as shipped (hash over the row and the previous hash, the
               ``audit_head`` file written in the same transaction);
   - plain:    the insert as it was before the chain (one ``INSERT`` in its own transaction).

   The chain's share of a turn is printed two ways: the ratio of the two sides' p50 and mean (noisy:
   the difference is far below the turn's own spread), and — steadier — the measured extra cost of one
   chained insert over a plain one (``record`` called directly, alternating, 2,000 times each) times the
   audit rows a turn writes, over the chained turn's p50.

2. Verify: 100,000 chained rows, then ``palui.store.audit.verify`` timed with ``time.process_time``
   (CPU seconds of this process). The target is under 2 s.

Usage: ``.venv/bin/python bench/audit.py [--turns 300] [--rows 100000]``. No thresholds are asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from common import QUICK_HELP, fresh_home, pct, quick, report

SCRIPT = {"steps": [
    {"tool_calls": [{"tool": "recall__search_memories", "args": {"query": "milk"}}],
     "usage": {"input_tokens": 400, "output_tokens": 20}},
    {"text": "Yes: you saved 'buy milk'.", "usage": {"input_tokens": 450, "output_tokens": 12}},
]}


def plain_record(db, *, turn_id, tool, tool_class, class_source, origin, tainted, verdict, reason, args_hash,
                 outcome, duration_ms=None, client=None, session=None) -> None:
    """The audit insert before the chain (spec §10.3): one row, no hash, no head file."""
    with db.write() as c:
        c.execute(
            "INSERT INTO audit (time, turn_id, tool, class, class_source, origin, tainted, verdict, reason, args_hash,"
            " outcome, duration_ms, client, session) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (time.time(), turn_id, tool, tool_class, class_source, origin, int(tainted), verdict, reason, args_hash,
             outcome, duration_ms, client, session))


async def turns(n: int, warmup: int) -> None:
    home = fresh_home()
    path = home / "bench-script.json"
    path.write_text(json.dumps(SCRIPT))
    model = f"script:{path}"

    from palui.service import Service
    from palui.store import audit, memories

    svc = Service()
    for text in ("buy milk", "dentist on Tuesday", "oat milk, not cow's milk"):
        memories.add_memory(svc.db, text, memories.TRUSTED, "bench", None)
    chained = audit.record

    async def turn(record) -> None:
        audit.record = record
        try:
            r = await svc.turns.send("Do I need to buy milk?", model=model)
        finally:
            audit.record = chained
        assert r["status"] == "done", r

    ways = {"chained record": chained, "plain insert (before)": plain_record}
    times: dict[str, list[float]] = {k: [] for k in ways}
    rows_before = svc.db.row("SELECT COUNT(*) FROM audit")[0]
    for i in range(warmup + n):
        for name, fn in ways.items():
            t0 = time.perf_counter()
            await turn(fn)
            if i >= warmup:
                times[name].append((time.perf_counter() - t0) * 1000)
    rows_per_turn = (svc.db.row("SELECT COUNT(*) FROM audit")[0] - rows_before) / (2 * (warmup + n))
    report("a turn (one read call + answer) with the chained audit and with the plain insert", "ms", times,
           "plain insert (before)")

    # One insert, each way, alternating.
    args = dict(turn_id="t-bench", tool="recall__search_memories", tool_class="read", class_source="builtin",
                origin="chat", tainted=False, verdict="run", reason="run: read tool in a chat turn",
                args_hash="0" * 64, outcome="ok", duration_ms=1.5)
    one: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(2000):
        for name, fn in ways.items():
            t0 = time.perf_counter()
            fn(svc.db, **args)
            one[name].append((time.perf_counter() - t0) * 1e6)
    report("one audit insert", "us", one, "plain insert (before)")
    extra_us = statistics.median(one["chained record"]) - statistics.median(one["plain insert (before)"])
    turn_p50_ms = pct(times["chained record"], 50)
    share = extra_us * rows_per_turn / (turn_p50_ms * 1000)
    ratio50 = turn_p50_ms / pct(times["plain insert (before)"], 50)
    ratio_mean = statistics.fmean(times["chained record"]) / statistics.fmean(times["plain insert (before)"])
    print(f"\n  audit rows per turn: {rows_per_turn:.1f}; a chained insert costs {extra_us:.0f} us more than a "
          "plain one")
    print(f"  the chain's share of a turn: {share:.1%} (extra per insert x rows per turn / chained turn p50)")
    print(f"  turn ratio chained/plain: {ratio50:.3f} at p50, {ratio_mean:.3f} on the mean")
    svc.db.close()


def verify(n_rows: int) -> None:
    fresh_home()
    from palui.service import Service
    from palui.store import audit, audit_chain

    svc = Service()
    t0 = time.perf_counter()
    prev = audit_chain.GENESIS
    with svc.db.write() as c:
        batch = []
        for i in range(1, n_rows + 1):
            row = [i, 1_790_000_000.0 + i, f"t-{i // 7:010x}", "recall__search_memories", "read", "builtin", "chat",
                   i % 2, "run", "run: read tool in a tainted turn (tainted by web__fetch_page at step 1)",
                   f"{i:064x}", "ok", 1.25]
            h = audit_chain.row_hash(prev, row)
            batch.append((*row, prev, h))
            prev = h
        c.executemany(f"INSERT INTO audit ({', '.join(audit_chain.CHAINED)}, prev_hash, hash) VALUES "
                      f"({', '.join('?' * 15)})", batch)
        c.execute("UPDATE audit_state SET rows = ?, first_id = 1, last_id = ?, last_hash = ?", (n_rows, n_rows, prev))
    audit_chain.write_head(audit_chain.head_path(svc.settings.db_path), audit_chain.Head(n_rows, prev))
    print(f"\nverify: {n_rows:,} chained rows written in {time.perf_counter() - t0:.1f} s")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = audit.verify(svc.db)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert result["ok"] and result["rows"] == n_rows, result
    print(f"  palui.store.audit.verify over {n_rows:,} rows: {cpu:.2f} s CPU ({wall:.2f} s wall); target < 2 s")
    svc.db.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=quick(300, 5))
    ap.add_argument("--warmup", type=int, default=quick(20, 1))
    ap.add_argument("--rows", type=int, default=quick(100_000, 500))
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    asyncio.run(turns(a.turns, a.warmup))
    verify(a.rows)
