"""Retention and backups (spec §10.1, §10.2): ``retention.days`` applied by the service's tick in small
batches, ``palui prune --before DATE``, ``palui backup FILE`` (safe while others write)."""

from __future__ import annotations

import sqlite3
import stat
import time

from palui.config import load_settings
from palui.runner.state import OWNER
from palui.service import Service
from palui.store import retention

DAY = 86400.0


def fill(svc, *, age_days: float, n: int, live_conversation: str | None = None) -> None:
    """``n`` rows of untrusted content, inbox and webhook deliveries, ``age_days`` old, and as many audit rows."""
    t = time.time() - age_days * DAY
    with svc.db.write() as c:
        for i in range(n):
            c.execute("INSERT INTO untrusted_content (conversation_id, turn_id, source, text, created_at)"
                      " VALUES (?, 't-x', 'web__fetch_page at step 1', 'page text', ?)",
                      (live_conversation or f"c-old-{age_days}-{i}", t))
            c.execute("INSERT INTO inbox (time, kind, text) VALUES (?, 'notice', 'hello')", (t,))
            c.execute("INSERT INTO webhook_deliveries (webhook_id, delivery_key, body_sha256, body_bytes, received_at)"
                      " VALUES ('w-1', ?, 'h', 1, ?)", (f"k-{age_days}-{i}", t))
            c.execute("INSERT INTO audit (time, tool, verdict, reason, outcome) VALUES (?, 'x', 'run', 'r', 'ok')",
                      (t,))


def counts(svc) -> dict[str, int]:
    return {t: svc.db.row(f"SELECT COUNT(*) FROM {t}")[0]
            for t in ("untrusted_content", "inbox", "webhook_deliveries", "audit")}


async def test_the_tick_prunes_what_retention_days_no_longer_keeps_in_small_batches(home):
    svc = Service(load_settings({"PALUI_HOME": str(home), "PALUI_RETENTION__DAYS": "30"}))
    before = counts(svc)
    fill(svc, age_days=31, n=retention.BATCH + 100)  # older than 30 days: goes, a batch per tick
    fill(svc, age_days=29, n=7)  # kept
    live = svc.turns.new_conversation()
    tid = svc.turns.start("still running", conversation=live, model="script:/nonexistent")
    with svc.db.write() as c:  # running in this (live) process: the conversation is live
        c.execute("UPDATE turns SET status = 'running', owner = ? WHERE id = ?", (OWNER, tid))
    fill(svc, age_days=300, n=3, live_conversation=live)  # its untrusted content is kept, the rest goes
    await svc.runtime.tick(time.time())
    after_one = counts(svc)
    assert after_one["inbox"] == before["inbox"] + 7 + 3 + retention.BATCH + 100 - retention.BATCH  # one batch
    await svc.runtime.tick(time.time())
    after = counts(svc)
    assert after["inbox"] == before["inbox"] + 7  # ... and then the rest
    assert after["webhook_deliveries"] == 7
    assert after["untrusted_content"] == before["untrusted_content"] + 7 + 3  # the live conversation's stay
    assert after["audit"] == before["audit"] + retention.BATCH + 100 + 7 + 3  # audit rows are kept
    svc.db.close()


def test_prune_before_a_date_from_the_cli(cli, home):
    svc = Service()
    fill(svc, age_days=400, n=5)
    fill(svc, age_days=1, n=2)
    base = counts(svc)
    out = cli.json("prune", "--before", time.strftime("%Y-%m-%d", time.gmtime(time.time() - 200 * DAY)), "--json")
    assert out["deleted"] == {"untrusted_content": 5, "inbox": 5, "webhook_deliveries": 5}
    after = counts(svc)
    assert after["audit"] == base["audit"] and after["inbox"] == base["inbox"] - 5
    r = cli("prune", "--before", "last tuesday")
    assert r.returncode == 2 and "YYYY-MM-DD" in r.stderr
    svc.db.close()


def test_backup_is_a_consistent_copy_while_others_write(cli, home, tmp_path):
    svc = Service()
    fill(svc, age_days=1, n=3)
    # Another connection holds the write lock with uncommitted work, as a busy service would: the
    # backup neither waits for it nor copies it.
    other = sqlite3.connect(svc.settings.db_path, isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO inbox (time, kind, text) VALUES (?, 'notice', 'uncommitted')", (time.time(),))
    target = tmp_path / "copy.db"
    try:
        # Done while the writer still holds its lock (released below): the backup did not wait for it.
        assert svc.maintenance.backup(target)["file"] == str(target.resolve())
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    copy = sqlite3.connect(target)
    assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file, no -wal beside it
    assert copy.execute("SELECT COUNT(*) FROM inbox WHERE text = 'uncommitted'").fetchone()[0] == 0
    assert copy.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == counts(svc)["audit"]
    assert copy.execute("SELECT COUNT(*) FROM tools").fetchone()[0] == len(svc.tools.list())
    copy.close()
    r = cli("backup", str(target))  # never overwrites
    assert r.returncode == 1 and "exists already" in r.stderr
    out = cli.json("backup", str(tmp_path / "second.db"), "--json")
    assert out["bytes"] > 0 and sqlite3.connect(out["file"]).execute("PRAGMA quick_check").fetchone()[0] == "ok"
    assert not list(tmp_path.glob(".*.partial"))  # no partial file left behind
    svc.db.close()
