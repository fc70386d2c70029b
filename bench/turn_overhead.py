"""Per-turn overhead of the governed turn runner against a hand-written loop.

Each turn: the ``script:`` model asks for one read tool call (``recall__search_memories``),
the tool runs, the model answers. Two ways, alternating turn by turn in one process:

- palui:    ``TurnsPart.send`` — the whole governed path: the turn row, the run cap, offering
            tools (policy + budget), the system prompt and history, two model steps, the
            decision at call time, the connector call, audit, usage and caps, the inbox.
- baseline: the same model (the same ``FunctionModel`` with the same script) called with
            ``pydantic_ai.direct.model_request`` and the same tool definitions, and the
            tool run by hand (``RecallConnector.call_tool``) on the same database.
- floor:    the baseline plus what a turn must keep, in one WAL transaction: the turn row with its
            messages (encoded by the model library's adapter), one chained audit row with its head
            (``store.audit_chain.append``) and the usage rows of its two model steps (their counters
            kept by the same triggers), committed with the ``synchronous`` setting Palui gives a turn's end
            (``durable=True``: FULL, where the checkout has it). Target: the governed turn ≤ 3× this floor (CPU).

Also printed: write transactions per Palui turn (``BEGIN IMMEDIATE`` seen by a ``sqlite3`` trace callback on the
turn's connection; target ≤ 4) and statements per turn; with ``--fsyncs``, fsync and fdatasync calls per turn of each
way (the bench run again under ``strace -f -c`` for N turns of that way and for none, the difference over N).

Usage: ``.venv/bin/python bench/turn_overhead.py [--turns N] [--fsyncs] [--before CHECKOUT]`` (default 300).
``--before``: the same bench for another checkout (its own ``.venv``, e.g. the previous main) at the same time, in a
process of its own, its report printed after this one's. Prints per-turn p50/p99 of CPU time
(``time.process_time``) and of wall time in ms, and each ratio to the floor. No thresholds: read the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from common import QUICK_HELP, ROOT, before_result, before_side, fresh_home, load, print_result, quick, report

#: Run as the ``--before`` side of another (``PALUI_BENCH_CHECKOUT``, read now: ``fresh_home`` clears it).
BEFORE_SIDE = bool(os.environ.get("PALUI_BENCH_CHECKOUT"))
QUESTION = "Do I need to buy milk?"
SCRIPT = {"steps": [
    {"tool_calls": [{"tool": "recall__search_memories", "args": {"query": "milk"}}],
     "usage": {"input_tokens": 400, "output_tokens": 20}},
    {"text": "Yes: you saved 'buy milk'.", "usage": {"input_tokens": 450, "output_tokens": 12}},
]}


async def main(turns: int, warmup: int, only: str | None = None) -> dict:
    home = fresh_home()
    path = home / "bench-script.json"
    path.write_text(json.dumps(SCRIPT))
    model = f"script:{path}"

    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import ModelRequest, SystemPromptPart, ToolCallPart, ToolReturnPart, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    from palui.connectors.base import CallContext
    from palui.connectors.builtin.recall import RecallConnector
    from palui.models import resolve_model
    from palui.service import Service
    from palui.store import memories
    from palui.types import Origin

    svc = Service()
    # A checkout of the service before its parts were exposed (``--before`` an older main) has the forwards.
    send = svc.turns.send if hasattr(svc, "turns") else svc.send
    for text in ("buy milk", "dentist on Tuesday", "call Ana about the flat", "oat milk, not cow's milk"):
        memories.add_memory(svc.db, text, memories.TRUSTED, "bench", None)

    # The baseline offers the model the same tools, with the same schemas, built once.
    defs = [ToolDefinition(name=r.name, description=r.description or r.tool,
                           parameters_json_schema=r.input_schema or {"type": "object"})
            for r in (svc.tools.list() if hasattr(svc.tools, "list") else svc.tools()) if r.enabled]
    params = ModelRequestParameters(function_tools=defs, allow_text_output=True)
    handle = resolve_model(model)
    recall = RecallConnector()
    ctx = CallContext(turn_id="bench", conversation_id="bench", origin=Origin.CHAT, tainted=False,
                      taint_source=None, step=1, db=svc.db, settings=svc.settings)
    system = "You are Palui, the person's own assistant."

    async def palui_turn() -> None:
        r = await send(QUESTION, model=model)
        assert r["status"] == "done" and r["usage"]["steps"] == 2, r

    async def baseline_turn() -> list:
        messages: list = [ModelRequest(parts=[SystemPromptPart(system), UserPromptPart(QUESTION)])]
        while True:
            response = await model_request(handle.model, messages, model_request_parameters=params)
            messages.append(response)
            calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
            if not calls:
                break
            returns = []
            for c in calls:
                res = await recall.call_tool(c.tool_name.removeprefix("recall__"), c.args_as_dict(), ctx)
                returns.append(ToolReturnPart(tool_name=c.tool_name, content=res.text, tool_call_id=c.tool_call_id))
            messages.append(ModelRequest(parts=returns))
        assert len(messages) == 4, messages
        return messages

    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from palui.store import audit_chain

    conversation = (svc.turns.new_conversation() if hasattr(svc, "turns") else svc.new_conversation())
    head_file = audit_chain.head_path(svc.db.path)
    floor_ids = iter(range(10**9))

    import inspect

    # The setting Palui gives a turn's end (a checkout without it commits every write alike).
    durable = {"durable": True} if "durable" in inspect.signature(svc.db.write).parameters else {}

    async def floor_turn() -> None:
        messages = await baseline_turn()
        now = time.time()
        with svc.db.write(**durable) as c:
            c.execute("INSERT INTO turns (id, conversation_id, origin, status, input, model, messages_json, steps,"
                      " input_tokens, output_tokens, answer, created_at, updated_at) VALUES"
                      " (?, ?, 'chat', 'done', ?, ?, ?, 2, 850, 32, ?, ?, ?)",
                      (f"t-floor{next(floor_ids)}", conversation, QUESTION, model,
                       ModelMessagesTypeAdapter.dump_json(messages[1:]).decode(), "Yes", now, now))
            audit_chain.append(c, {"time": now, "turn_id": None, "tool": "recall__search_memories", "class": "read",
                                   "class_source": "builtin", "origin": "chat", "tainted": 0, "verdict": "run",
                                   "reason": "run: read tool", "args_hash": "0" * 64, "outcome": "ok",
                                   "duration_ms": 0.1, "client": None, "session": None}, head_file)
            c.executemany("INSERT INTO usage (time, day, turn_id, job_id, tokens) VALUES (?, ?, NULL, NULL, ?)",
                          [(now, time.strftime("%Y-%m-%d"), 420), (now, time.strftime("%Y-%m-%d"), 462)])

    async def baseline_only() -> None:
        await baseline_turn()

    ways = {"palui (TurnsPart.send)": palui_turn, "floor (loop + one transaction)": floor_turn,
            "baseline (hand loop)": baseline_only}
    if only is not None:  # --only WAY N: N turns of one way and nothing else (counted from outside: strace)
        for _ in range(turns):
            await ways[only]()
        svc.db.close()
        return {}
    # Write transactions and statements of one Palui turn, seen on the turn's connection (this thread's).
    seen: list[str] = []
    conn = svc.db._connect()
    conn.set_trace_callback(seen.append)
    for _ in range(quick(20, 2)):
        await palui_turn()
    conn.set_trace_callback(None)
    n = quick(20, 2)
    tx = sum(1 for s in seen if s.startswith("BEGIN IMMEDIATE")) / n
    statements = len(seen) / n
    times: dict[str, list[float]] = {k: [] for k in ways}
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    for i in range(warmup + turns):
        for name, fn in ways.items():
            t0, c0 = time.perf_counter(), time.process_time()
            await fn()
            if i >= warmup:
                times[name].append((time.perf_counter() - t0) * 1000)
                cpu[name].append((time.process_time() - c0) * 1000)
    report("turn overhead, CPU: one read tool call + answer, script: model", "ms", cpu,
           "floor (loop + one transaction)")
    report("turn overhead, wall: one read tool call + answer, script: model", "ms", times,
           "floor (loop + one transaction)")
    p = sorted(cpu["palui (TurnsPart.send)"])
    b = sorted(cpu["floor (loop + one transaction)"])
    print(f"  governance cost per turn over the floor (CPU p50 difference): {p[len(p) // 2] - b[len(b) // 2]:.2f} ms")
    print(f"  write transactions per palui turn: {tx:.1f} (target <= 4); statements per turn: {statements:.0f}")
    print(f"  database: {svc.settings.db_path} ({svc.settings.db_path.stat().st_size // 1024} KiB after "
          f"{warmup + turns} turns); load average {load()}")
    svc.db.close()
    pc, fc = pct_of(cpu["palui (TurnsPart.send)"]), pct_of(cpu["floor (loop + one transaction)"])
    return {"palui_cpu_p50": pc, "floor_cpu_p50": fc, "ratio": pc / fc, "tx": tx, "statements": statements}


def pct_of(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2]


def fsyncs(way: str, n: int) -> float:
    """fsync + fdatasync calls per turn of ``way``: this bench run under ``strace -f -c`` for ``n`` turns of it and
    for none (the start's own: migrations, the first write), the difference over ``n``."""
    def calls(k: int) -> int:
        with tempfile.NamedTemporaryFile(prefix="palui-bench-strace-", suffix=".txt") as out:
            subprocess.run(["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out.name, sys.executable,
                            sys.argv[0], "--only", way, "--turns", str(k), "--warmup", "0"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "PALUI_BENCH_CHECKOUT": str(ROOT)})  # the checkout measured here
            text = open(out.name).read()
        row = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?f(?:data)?sync", re.M)
        return sum(int(m.group(1)) for m in row.finditer(text))
    return (calls(n) - calls(0)) / n


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=quick(300, 5))
    ap.add_argument("--warmup", type=int, default=quick(20, 1))
    ap.add_argument("--fsyncs", action="store_true", help="also count fsyncs per turn of each way (strace -f -c)")
    ap.add_argument("--before", help="the same bench for another checkout (its .venv), printed after this one")
    ap.add_argument("--only", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    ways = {"palui": "palui (TurnsPart.send)", "floor": "floor (loop + one transaction)"}
    if a.only:
        asyncio.run(main(a.turns, a.warmup, ways[a.only]))
        raise SystemExit(0)
    side = before_side(a.before, [x for x in sys.argv[1:] if x != a.before and x != "--before"])
    figures = asyncio.run(main(a.turns, a.warmup))
    if a.fsyncs:
        n = quick(50, 2)
        figures.update({f"fsyncs_{k}": fsyncs(k, n) for k in ways})
        print(f"  fsyncs per turn (strace -f -c, {n} turns): palui {figures['fsyncs_palui']:.2f}, "
              f"floor {figures['fsyncs_floor']:.2f}")
    if BEFORE_SIDE:
        print_result(figures)
    text, theirs = before_result(side)
    if theirs:
        print(f"\n--- {a.before} (the same bench, run at the same time) ---\n{text}")
        print(f"\nside by side (this checkout | {a.before}):")
        for k, label in (("ratio", "CPU p50 palui / floor"), ("tx", "write transactions per turn"),
                         ("statements", "statements per turn"), ("fsyncs_palui", "fsyncs per palui turn"),
                         ("fsyncs_floor", "fsyncs per floor turn")):
            if k in figures and k in theirs:
                print(f"  {label:<32}{figures[k]:>8.2f}{theirs[k]:>10.2f}")
