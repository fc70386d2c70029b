"""Requests on a kept-alive connection to ``palui serve``, and an HTTP approve against the same approve in-process.

- keep-alive: ``GET /api/health`` again and again on one ``httpx.Client`` connection (target < 10 ms);
  a request that waits for Nagle's algorithm and a delayed ACK takes about 40 ms.
- approve: a chat turn asks to run ``recall__forget_memory`` (destructive: ask); the timed part is
  the answer and the rest of the turn (the call, the final model step, the result):
  ``POST /api/approvals/{id}/approve`` on the client's reused connection to a real ``palui serve``,
  against ``ApprovalsPart.answer_and_resume`` in this process on a home of its own (target ≤ 2×).

Usage: ``.venv/bin/python bench/keepalive.py [--n 40]``. Wall time per request (the network path is
the point here), alternating the two sides; prints p50/p99 and ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import QUICK_HELP, ROOT, fresh_home, quick, report

ASK = {"steps": [
    {"tool_calls": [{"tool": "recall__forget_memory", "args": {"id": 1}}],
     "usage": {"input_tokens": 300, "output_tokens": 10}},
    {"text": "Forgotten.", "usage": {"input_tokens": 320, "output_tokens": 5}},
]}


def start_service(home: Path) -> tuple[subprocess.Popen, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PALUI_TICK_SECONDS"}
    env.update(PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(home / "serve.log", "wb"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            info = json.loads((home / "serve.json").read_text())
            if info.get("pid") == proc.pid:
                return proc, f"http://127.0.0.1:{info['port']}", (home / "access_token").read_text().strip()
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            raise SystemExit(f"palui serve exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("palui serve did not start in 60 s")


async def main(n: int) -> None:
    import httpx

    from palui.config import load_settings
    from palui.service import Service

    served = fresh_home()
    script = served / "ask.json"
    script.write_text(json.dumps(ASK))
    (served / "palui.toml").write_text(f'model = "script:{script}"\n')
    proc, url, token = start_service(served)
    local_home = fresh_home()
    local = Service(load_settings({**{k: v for k, v in os.environ.items() if k.startswith("PALUI_")},
                                   "PALUI_HOME": str(local_home)}))
    model = f"script:{script}"
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            client.get("/api/health").raise_for_status()
            health: list[float] = []
            for _ in range(20 + n * 5):
                t0 = time.perf_counter()
                client.get("/api/health").raise_for_status()
                health.append((time.perf_counter() - t0) * 1000)
            health = health[20:]

            http_ms: list[float] = []
            local_ms: list[float] = []
            for i in range(n + 3):
                r = client.post("/api/turns", json={"message": "forget memory 1"}).json()
                assert r["status"] == "awaiting_approval", r
                aid = r["pending_approvals"][0]["id"]
                t0 = time.perf_counter()
                done = client.post(f"/api/approvals/{aid}/approve", json={}).json()
                dt = (time.perf_counter() - t0) * 1000
                assert done["status"] == "done", done
                if i >= 3:
                    http_ms.append(dt)
                r = await local.turns.send("forget memory 1", model=model)
                assert r["status"] == "awaiting_approval", r
                aid = r["pending_approvals"][0]["id"]
                t0 = time.perf_counter()
                done = await local.approvals.answer_and_resume(aid, True, "api")
                dt = (time.perf_counter() - t0) * 1000
                assert done["status"] == "done", done
                if i >= 3:
                    local_ms.append(dt)
    finally:
        proc.terminate()
        proc.wait(30)
        await local.close()
    report("GET /api/health on one kept-alive connection", "ms", {"keep-alive GET /api/health": health},
           "keep-alive GET /api/health")
    report("approve and finish the turn: HTTP on a reused connection vs in-process", "ms",
           {"HTTP POST /api/approvals/{id}/approve": http_ms, "in-process answer_and_resume": local_ms},
           "in-process answer_and_resume")
    print(f"  load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=quick(40, 3))
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    asyncio.run(main(ap.parse_args().n))
