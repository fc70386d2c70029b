"""A 50-tool-call scripted turn through Palui vs the same calls through the bare model library.

The runner's first benchmark. One turn: 10 model steps of 5 ``recall__search_memories`` calls each,
then an answer (11 steps, within the 12-step budget). Two ways, alternating in one process:

- palui:    ``TurnsPart.send`` — the governed turn (policy at offer and call time, taint,
            audit, durable state after every call, usage and caps).
- baseline: ``pydantic_ai.Agent`` (the model library's own agent loop) with the same
            ``script:`` model and one tool per offered name calling the same connector
            (``RecallConnector.call_tool``) on the same database, calls run sequentially.

Usage: ``.venv/bin/python bench/turn.py [--turns N]`` (default 30). Prints p50/p99 per turn
CPU and wall, and the ratio palui/baseline (target ≤ 1.1, CPU). No thresholds: read the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from common import QUICK_HELP, fresh_home, quick, report

STEPS, PER_STEP = 10, 5


def script() -> dict:
    steps = [{"tool_calls": [{"tool": "recall__search_memories", "args": {"query": f"milk {s}-{c}"}}
                             for c in range(PER_STEP)], "usage": {"input_tokens": 300, "output_tokens": 40}}
             for s in range(STEPS)]
    steps.append({"text": "Done looking.", "usage": {"input_tokens": 300, "output_tokens": 5}})
    return {"steps": steps}


async def main(turns: int, warmup: int) -> None:
    home = fresh_home()
    path = home / "bench-script.json"
    path.write_text(json.dumps(script()))
    model = f"script:{path}"

    from pydantic_ai import Agent
    from pydantic_ai.tools import Tool

    from palui.connectors.base import CallContext
    from palui.connectors.builtin.recall import RecallConnector
    from palui.models import resolve_model
    from palui.service import Service
    from palui.store import memories
    from palui.types import Origin

    svc = Service()
    for text in ("buy milk", "dentist on Tuesday", "call Ana about the flat", "oat milk, not cow's milk"):
        memories.add_memory(svc.db, text, memories.TRUSTED, "bench", None)
    handle = resolve_model(model)
    recall = RecallConnector()
    ctx = CallContext(turn_id="bench", conversation_id="bench", origin=Origin.CHAT, tainted=False,
                      taint_source=None, step=1, db=svc.db, settings=svc.settings)

    async def search_memories(query: str, limit: int = 10) -> str:
        """Search the person's saved memories by keywords."""
        r = await recall.call_tool("search_memories", {"query": query, "limit": limit}, ctx)
        return r.text

    agent = Agent(handle.model, tools=[Tool(search_memories, name="recall__search_memories", sequential=True)],
                  system_prompt="You are Palui, the person's own assistant.")

    async def palui_turn() -> None:
        r = await svc.turns.send("look for milk", model=model)
        assert r["status"] == "done" and len([e for e in r["events"] if e["type"] == "tool_call"]) == 50, r

    async def baseline_turn() -> None:
        r = await agent.run("look for milk")
        assert r.output == "Done looking.", r.output

    for _ in range(warmup):
        await palui_turn()
        await baseline_turn()
    rows: dict[str, list[float]] = {"palui (TurnsPart.send)": [], "baseline (pydantic_ai.Agent)": []}
    cpu: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(turns):
        for name, fn in (("palui (TurnsPart.send)", palui_turn), ("baseline (pydantic_ai.Agent)", baseline_turn)):
            t0, c0 = time.perf_counter(), time.process_time()
            await fn()
            rows[name].append((time.perf_counter() - t0) * 1000)
            cpu[name].append((time.process_time() - c0) * 1000)
    # CPU of the process (time.process_time) moves less with the machine's load than wall time.
    report("one turn with 50 tool calls in 10 steps, CPU", "ms", cpu, "baseline (pydantic_ai.Agent)")
    report("one turn with 50 tool calls in 10 steps, wall", "ms", rows, "baseline (pydantic_ai.Agent)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=quick(30, 2))
    ap.add_argument("--warmup", type=int, default=quick(3, 1))
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    asyncio.run(main(a.turns, a.warmup))
