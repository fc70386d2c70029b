"""A flood of webhooks cannot starve the person (spec §6.6, §8.5), against the real
service process over HTTP: webhook turns together get at most ``caps.webhook_runs_per_hour``
of the hourly runs (default ``max(1, runs_per_hour // 3)``), the rest queue, and a chat turn is
still admitted at once, whether it is started by its request or by the service's tick behind
the held webhook turns."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from support.live_service import LiveService, wait_for
from support.scripts import text, write_script

pytestmark = pytest.mark.slow

HOOKS = 20
PER_HOOK = 10  # the default webhooks.rate_per_minute: every delivery is within its webhook's rate


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def add_hooks(s: LiveService, n: int) -> list[tuple[str, str]]:
    from palui.config import load_settings
    from palui.service import Service

    svc = Service(load_settings({"PALUI_HOME": str(s.home)}))
    try:
        return [(h["url"], h["secret"]) for h in (svc.webhooks.add(f"flood-{i}") for i in range(n))]
    finally:
        svc.db.close()


def test_200_signed_deliveries_over_20_webhooks_start_at_most_20_turns_and_a_chat_turn_is_admitted_at_once(home,
                                                                                                          tmp_path):
    model = write_script(tmp_path / "summary.json", text("Summarised.", usage={"input_tokens": 1, "output_tokens": 1}))
    slow = write_script(tmp_path / "slow.json", {"text": "Thought about it.", "delay_seconds": 1.5})
    (home / "palui.toml").write_text(f'model = "{model}"\n[caps]\nruns_per_hour = 60\n')
    with LiveService(home) as s:
        hooks = add_hooks(s, HOOKS)
        deliveries = [(url, secret, f'{{"hook": {h}, "event": {i}}}'.encode())
                      for i in range(PER_HOOK) for h, (url, secret) in enumerate(hooks)]

        def deliver(d):
            url, secret, body = d
            return httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)}, timeout=60)

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(deliver, deliveries))
        assert [a.status_code for a in answers] == [202] * 200, {a.status_code: a.text for a in answers}
        bodies = [a.json() for a in answers]
        assert len({b["turn"] for b in bodies}) == 200  # 200 distinct deliveries, 200 turns
        running = [b for b in bodies if b["turn_status"] == "running"]
        queued = [b for b in bodies if b["turn_status"] == "queued"]
        assert len(running) <= 20 and len(running) + len(queued) == 200
        assert {b.get("queued_reason") for b in queued} == {"webhook runs per hour cap"}

        def webhook_runs() -> int:
            return s.count("runs", "origin = 'webhook'")

        wait_for(lambda: s.count("turns", "origin = 'webhook' AND status = 'done'") == 20, what="20 webhook turns")
        time.sleep(1.0)  # several ticks of the service: the held webhook turns stay queued
        assert webhook_runs() == 20
        assert s.count("turns", "origin = 'webhook' AND status = 'queued'") == 180
        st = s.get("/api/status")
        assert st["paused"] is False  # the share is no global pause
        held = (st["webhooks_held"], st["webhook_runs_last_hour"], st["caps"]["webhook_runs_per_hour"])
        assert held == (True, 20, 20)
        notices = [m["text"] for m in s.get("/api/inbox") if m["kind"] == "cap"]
        assert len(notices) == 1 and "webhook" in notices[0] and "Palui is paused" not in notices[0]

        # The person's own message is admitted at once, though 180 webhook turns queue before it.
        chat = s.post("/api/turns", {"message": "What is on today?"})
        assert chat["status"] == "done" and chat["origin"] == "chat", chat

        # A chat turn started by the service's tick (it waited behind an earlier turn of its
        # conversation), queued after the 180 held webhook turns: the tick starts it too.
        conv = s.post("/api/conversations")["conversation"]
        first: dict = {}
        worker = threading.Thread(target=lambda: first.update(s.post(
            "/api/turns", {"message": "think", "conversation": conv, "model": slow})))
        worker.start()
        wait_for(lambda: s.count("turns", "conversation_id = ? AND status = 'running'", (conv,)), what="the slow turn")
        second = s.post("/api/turns", {"message": "and then?", "conversation": conv})
        assert second["status"] == "queued" and second.get("queued_behind"), second
        worker.join(30)
        assert first["status"] == "done"
        done = s.wait_turn(second["turn"], timeout=10)
        assert done["status"] == "done" and done["answer"] == "Summarised."
        assert webhook_runs() == 20 and s.count("turns", "origin = 'webhook' AND status = 'queued'") == 180
        assert s.count("runs", "origin = 'chat'") == 3

        # When the share has room again (simulated: the oldest webhook runs leave the hour), the
        # queued webhook turns start in order, oldest first, again at most the share.
        s.rows("UPDATE runs SET time = time - 3600 WHERE id IN (SELECT id FROM runs WHERE origin = 'webhook'"
               " ORDER BY time LIMIT 5)")
        wait_for(lambda: webhook_runs() == 25, what="5 more webhook turns")
        time.sleep(0.6)
        assert webhook_runs() == 25
        order = [b["turn"] for b in bodies if b["turn_status"] == "queued"]
        marks = ",".join("?" * len(order))
        rowid_order = [r[0] for r in s.rows(f"SELECT id FROM turns WHERE id IN ({marks}) ORDER BY rowid", tuple(order))]
        started_now = {r[0] for r in s.rows("SELECT turn_id FROM runs WHERE origin = 'webhook'")}
        assert [t for t in rowid_order if t in started_now] == rowid_order[:5]
