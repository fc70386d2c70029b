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
            kept by the same triggers). Target: the governed turn ≤ 3× this floor (CPU).

Usage: ``.venv/bin/python bench/turn_overhead.py [--turns N]`` (default 300). Prints
per-turn p50/p99 of CPU time (``time.process_time``) and of wall time in ms, and each ratio to
the floor. No thresholds: read the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from common import QUICK_HELP, fresh_home, quick, report

QUESTION = "Do I need to buy milk?"
SCRIPT = {"steps": [
    {"tool_calls": [{"tool": "recall__search_memories", "args": {"query": "milk"}}],
     "usage": {"input_tokens": 400, "output_tokens": 20}},
    {"text": "Yes: you saved 'buy milk'.", "usage": {"input_tokens": 450, "output_tokens": 12}},
]}


async def main(turns: int, warmup: int) -> None:
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
    for text in ("buy milk", "dentist on Tuesday", "call Ana about the flat", "oat milk, not cow's milk"):
        memories.add_memory(svc.db, text, memories.TRUSTED, "bench", None)

    # The baseline offers the model the same tools, with the same schemas, built once.
    defs = [ToolDefinition(name=r.name, description=r.description or r.tool,
                           parameters_json_schema=r.input_schema or {"type": "object"})
            for r in svc.tools.list() if r.enabled]
    params = ModelRequestParameters(function_tools=defs, allow_text_output=True)
    handle = resolve_model(model)
    recall = RecallConnector()
    ctx = CallContext(turn_id="bench", conversation_id="bench", origin=Origin.CHAT, tainted=False,
                      taint_source=None, step=1, db=svc.db, settings=svc.settings)
    system = "You are Palui, the person's own assistant."

    async def palui_turn() -> None:
        r = await svc.turns.send(QUESTION, model=model)
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

    conversation = svc.turns.new_conversation()
    head_file = audit_chain.head_path(svc.db.path)
    floor_ids = iter(range(10**9))

    async def floor_turn() -> None:
        messages = await baseline_turn()
        now = time.time()
        with svc.db.write() as c:
            c.execute("INSERT INTO turns (id, conversation_id, origin, status, input, model, messages_json, steps,"
                      " input_tokens, output_tokens, answer, created_at, updated_at) VALUES"
                      " (?, ?, 'chat', 'done', ?, ?, ?, 2, 850, 32, ?, ?, ?)",
                      (f"t-floor{next(floor_ids)}", conversation, QUESTION, model,
                       ModelMessagesTypeAdapter.dump_json(messages[1:]).decode(), "Yes", now, now))
            audit_chain.append(c, {"time": now, "turn_id": None, "tool": "recall__search_memories", "class": "read",
                                   "class_source": "builtin", "origin": "chat", "tainted": 0, "verdict": "run",
                                   "reason": "run: read tool", "args_hash": "0" * 64, "outcome": "ok",
                                   "duration_ms": 0.1}, head_file)
            c.executemany("INSERT INTO usage (time, day, turn_id, job_id, tokens) VALUES (?, ?, NULL, NULL, ?)",
                          [(now, time.strftime("%Y-%m-%d"), 420), (now, time.strftime("%Y-%m-%d"), 462)])

    async def baseline_only() -> None:
        await baseline_turn()

    ways = {"palui (TurnsPart.send)": palui_turn, "floor (loop + one transaction)": floor_turn,
            "baseline (hand loop)": baseline_only}
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
    print(f"  database: {svc.settings.db_path} ({svc.settings.db_path.stat().st_size // 1024} KiB after "
          f"{warmup + turns} turns)")
    svc.db.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=quick(300, 5))
    ap.add_argument("--warmup", type=int, default=quick(20, 1))
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    asyncio.run(main(a.turns, a.warmup))
