"""Service load: N concurrent scripted chat turns through the HTTP API against the same turns in-process.

Each turn: the ``script:`` model asks for one read tool call (``recall__search_memories``),
the tool runs, the model answers (the turn of ``turn_overhead.py``). Two ways, batch by
batch, alternating, each on a PALUI_HOME of its own with the same settings (caps lifted) and
memories, so the live service's tick never takes the in-process side's queued turns:

- http:       a real ``palui serve --port 0`` process; N concurrent ``POST /api/turns``
              (one ``httpx.AsyncClient``, bearer token), each waiting for the turn's result.
- in-process: N concurrent ``TurnsPart.send`` tasks in one event loop of this process.

Both run the same governed turn runner; the difference is the service: HTTP, the
guard, JSON, the runtime's task per turn, and one more process on the machine.
Per batch: wall time → turns per second. Per turn: latency from its start to its
result, under N-way concurrency. Printed side by side with p50/p99 and the ratio.

Usage: ``.venv/bin/python bench/service.py [--n 50] [--rounds 5]``. No thresholds: read the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

from common import QUICK_HELP, ROOT, fresh_home, pct, quick, report

QUESTION = "Do I need to buy milk?"
SCRIPT = {"steps": [
    {"tool_calls": [{"tool": "recall__search_memories", "args": {"query": "milk"}}],
     "usage": {"input_tokens": 400, "output_tokens": 20}},
    {"text": "Yes: you saved 'buy milk'.", "usage": {"input_tokens": 450, "output_tokens": 12}},
]}


def start_service(home, env: dict[str, str]) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], cwd=ROOT,
                            env={**env, "PYTHONPATH": str(ROOT / "src")},
                            stdout=subprocess.DEVNULL, stderr=open(home / "serve.log", "wb"))
    info_file = home / "serve.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            info = json.loads(info_file.read_text())
            if info.get("pid") == proc.pid:
                return proc, f"http://127.0.0.1:{info['port']}", (home / "access_token").read_text().strip()
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            raise SystemExit(f"palui serve exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("palui serve did not start in 60 s")


async def main(n: int, rounds: int) -> None:
    import httpx

    from palui.config import load_settings
    from palui.service import Service
    from palui.store import memories

    # Two homes with the same settings and memories: the live service's tick starts every queued turn
    # of its own home, so on a shared home it could take the in-process side's turns (queued for the
    # moment between TurnsPart.start and its claim) and abort the batch.
    homes = {}
    for side in ("http", "in-process"):
        home = fresh_home()
        path = home / "bench-script.json"
        path.write_text(json.dumps(SCRIPT))
        model = f"script:{path}"
        (home / "palui.toml").write_text(f'model = "{model}"\n')
        env = {k: v for k, v in os.environ.items() if k.startswith("PALUI_")}
        s = Service(load_settings({**env, "PALUI_HOME": str(home)}))
        for text in ("buy milk", "dentist on Tuesday", "call Ana about the flat", "oat milk, not cow's milk"):
            memories.add_memory(s.db, text, memories.TRUSTED, "bench", None)
        homes[side] = (home, model, s, dict(os.environ))
    home, _, served, env = homes["http"]
    served.db.close()
    _, model, svc, _ = homes["in-process"]
    proc, url, token = start_service(home, env)

    async def timed(coro) -> float:
        t0 = time.perf_counter()
        r = await coro
        assert r["status"] == "done" and r["usage"]["steps"] == 2, r
        return (time.perf_counter() - t0) * 1000

    async def http_batch() -> list[float]:
        # A fresh client per batch: its N connections are opened inside the measurement, as N separate
        # callers (CLI processes, the web page) would; reusing idle keep-alive connections across batches
        # races uvicorn's keep-alive timeout (an occasional ReadError).
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120,
                                     limits=httpx.Limits(max_connections=n, max_keepalive_connections=n)) as client:
            async def one() -> dict:
                r = await client.post("/api/turns", json={"message": QUESTION})
                r.raise_for_status()
                return r.json()

            return await asyncio.gather(*(timed(one()) for _ in range(n)))

    async def inprocess_batch() -> list[float]:
        return await asyncio.gather(*(timed(svc.turns.send(QUESTION, model=model)) for _ in range(n)))

    ways = {"http (POST /api/turns)": http_batch, "in-process (TurnsPart.send)": inprocess_batch}
    latency: dict[str, list[float]] = {k: [] for k in ways}
    rate: dict[str, list[float]] = {k: [] for k in ways}
    try:
        for i in range(rounds + 1):  # round 0 warms up (imports, caches)
            for name, batch in ways.items():
                t0 = time.perf_counter()
                times = await batch()
                wall = time.perf_counter() - t0
                if i:
                    latency[name].extend(times)
                    rate[name].append(n / wall)
    finally:
        proc.terminate()
        proc.wait(30)
        await svc._hub.close()

    report(f"service load: {n} concurrent chat turns per batch, {rounds} batches each way "
           "(one read tool call + answer, script: model); per-turn latency", "ms", latency,
           "in-process (TurnsPart.send)")
    print(f"  {'throughput (turns/s per batch)':<32}{'median':>10}{'min':>10}{'max':>10}")
    for name, v in rate.items():
        print(f"  {name:<32}{statistics.median(v):>10.1f}{min(v):>10.1f}{max(v):>10.1f}")
    h, p = latency["http (POST /api/turns)"], latency["in-process (TurnsPart.send)"]
    ratio = statistics.median(rate["http (POST /api/turns)"]) / statistics.median(rate["in-process (TurnsPart.send)"])
    print(f"  service overhead per turn: p50 {pct(h, 50) - pct(p, 50):+.1f} ms, p99 {pct(h, 99) - pct(p, 99):+.1f} ms;"
          f" throughput ratio http/in-process {ratio:.2f}")
    svc.db.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=quick(50, 3), help="concurrent turns per batch")
    ap.add_argument("--rounds", type=int, default=quick(5, 1), help="measured batches each way")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    asyncio.run(main(a.n, a.rounds))
