"""A chat turn through the Telegram channel against the same turn through ``POST /api/turns`` (spec §8.3).

One real ``palui serve`` process with a Telegram channel pointed at the fake Bot API
(tests/support/fake_telegram.py, in this process on 127.0.0.1) and paired. The same scripted
turn both ways: the ``script:`` model answers after two steps of 200 ms each (a read tool call,
``recall__search_memories``, then the answer), alternating turn by turn:

- channel: from the fake queueing the person's message (``QueuedUpdate.queued_at``) to the fake
  receiving the answer's ``sendMessage`` (``Call.received_at``): long poll, the update recorded
  with its turn in one transaction, the turn, the answer notice, the outbox, the send;
- api:     from sending ``POST /api/turns {"message", "conversation"}`` (one keep-alive
  ``httpx.Client``, bearer token) to its response with the finished turn.

Each side keeps its own conversation. Prints p50/p99 and the ratio, and the bar it was built to: at the
median, at most 1.2 times the API's time and at most 50 ms added.

Usage: ``.venv/bin/python bench/channel.py [--turns 30] [--warmup 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from common import QUICK_HELP, ROOT, fresh_home, pct, quick, report

sys.path.insert(0, str(ROOT / "tests"))
from support.fake_telegram import FakeTelegram  # noqa: E402

PERSON = 111
STEP_SECONDS = 0.2
SCRIPT = {"steps": [
    {"tool_calls": [{"tool": "recall__search_memories", "args": {"query": "milk"}}], "delay_seconds": STEP_SECONDS},
    {"text": "Yes: buy milk.", "delay_seconds": STEP_SECONDS},
]}


def cli(*args: str, env: dict[str, str] | None = None) -> str:
    r = subprocess.run([sys.executable, "-m", "palui", *args], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"palui {' '.join(args)} failed: {r.stderr}")
    return r.stdout


def main(turns: int, warmup: int) -> None:
    import httpx

    home = fresh_home()
    script = home / "script.json"
    script.write_text(json.dumps(SCRIPT))
    os.environ["PALUI_MODEL"] = f"script:{script}"
    with FakeTelegram(max_poll_timeout=30) as fake:
        fake.user(PERSON, first_name="Alice", username="alice")
        cli("channels", "add", "telegram", "--api-base", fake.url, env={"PALUI_TELEGRAM_TOKEN": fake.token})
        from service import start_service

        proc, url, token = start_service(home, dict(os.environ))
        try:
            deadline = time.monotonic() + 30
            while "unpaired" not in cli("channels", "list"):
                if time.monotonic() > deadline:
                    raise SystemExit("the channel did not connect")
                time.sleep(0.2)
            code = cli("channels", "pair", "telegram").split("pairing code: ")[1].split()[0]
            up = fake.push_message(PERSON, PERSON, f"/pair {code}")
            fake.wait_for(lambda c: c.method == "sendMessage" and "paired" in c.params.get("text", ""), 20, after=up)
            http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
            conv = http.post("/api/conversations", json={}).json()["conversation"]
            rows: dict[str, list[float]] = {"channel (Telegram, fake Bot API)": [], "api (POST /api/turns)": []}
            for i in range(warmup + turns):
                up = fake.push_message(PERSON, PERSON, "Do I need to buy milk?")
                call = fake.wait_for(lambda c: c.method == "sendMessage" and "buy milk" in c.params.get("text", ""),
                                     60, after=up)
                channel_ms = (call.received_at - up.queued_at) * 1000
                t0 = time.perf_counter()
                r = http.post("/api/turns", json={"message": "Do I need to buy milk?", "conversation": conv})
                api_ms = (time.perf_counter() - t0) * 1000
                if r.status_code != 200 or r.json()["status"] != "done":
                    raise SystemExit(f"the API turn failed: {r.status_code} {r.text[:300]}")
                if i >= warmup:
                    rows["channel (Telegram, fake Bot API)"].append(channel_ms)
                    rows["api (POST /api/turns)"].append(api_ms)
            http.close()
        finally:
            proc.terminate()
            proc.wait(30)
    report(f"Chat turn, 2 model steps of {STEP_SECONDS * 1000:.0f} ms: Telegram channel vs POST /api/turns", "ms",
           rows, "api (POST /api/turns)")
    ch, api = pct(rows["channel (Telegram, fake Bot API)"], 50), pct(rows["api (POST /api/turns)"], 50)
    ok = ch <= 1.2 * api and ch - api <= 50
    print(f"\n  median: channel {ch:.1f} ms, api {api:.1f} ms: {ch / api:.2f}x, {ch - api:+.1f} ms added "
          f"-> {'within' if ok else 'OUTSIDE'} the bar (<= 1.2x and <= 50 ms added)")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=quick(30, 2))
    p.add_argument("--warmup", type=int, default=quick(3, 1))
    p.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = p.parse_args()
    main(a.turns, a.warmup)
