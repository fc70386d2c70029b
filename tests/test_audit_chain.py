"""The hash-chained audit (spec §10.3), through the CLI: rows edited, inserted and deleted with sqlite3
(the last rows included) are named by ``palui audit verify`` (exit 1); ``--head`` catches a rewrite of the
log and of the head file; ``export --jsonl`` gives rows anyone can check with the documented formula."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat

import pytest

from palui.store.audit_chain import CHAINED, COLUMNS, CURRENT_VERSION, GENESIS, row_hash
from support.scripts import call, calls, text, write_script

#: The columns a row Palui writes now is hashed over (chain version 2: version 1's, then client and session).
NOW = COLUMNS[CURRENT_VERSION]


@pytest.fixture
def logged(cli, tmp_path, home):
    """Six audit rows from one turn of six different calls; returns the database path."""
    model = write_script(tmp_path / "s.json",
                         calls(*[call("recall__add_memory", text=f"note {i}") for i in range(3)]),
                         calls(*[call("recall__search_memories", query=f"note {i}") for i in range(3)]),
                         text("done"))
    r = cli("run", "--json", "--model", model, "save three notes")
    assert json.loads(r.stdout)["status"] == "done", r.stdout
    db = home / "palui.db"
    assert count(db) == 6
    return db


def sql(db, statement: str, params: tuple = ()) -> None:
    con = sqlite3.connect(db)
    with con:
        con.execute(statement, params)
    con.close()


def count(db) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM audit").fetchone()[0]
    finally:
        con.close()


def rows(db) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT {', '.join(NOW)}, prev_hash, hash FROM audit ORDER BY id").fetchall()
    finally:
        con.close()


def broken(cli, *args: str) -> str:
    r = cli("audit", "verify", *args)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("palui: ") is False  # a finding, not an error of the command
    return r.stderr.strip()


def test_an_untouched_log_verifies_and_the_head_file_is_private(cli, logged, home):
    r = cli("audit", "verify")
    assert r.returncode == 0, r.stderr
    last = rows(logged)[-1]
    assert f"audit chain intact: 6 row(s), head row 6 hash {last[-1]}" in r.stdout
    head = home / "audit_head"
    assert json.loads(head.read_text()) == {"id": 6, "hash": last[-1], "prev": {"id": 5, "hash": rows(logged)[-2][-1]}}
    assert stat.S_IMODE(head.stat().st_mode) == 0o600
    out = cli.json("audit", "verify", "--json")
    assert out["ok"] and out["rows"] == 6 and out["head_file"] == {"id": 6, "hash": last[-1]}
    status = cli.json("status", "--json")
    assert status["audit_head"] == {"id": 6, "hash": last[-1]}
    assert f"audit head: row 6, hash {last[-1]}" in cli("status").stdout


@pytest.mark.parametrize("row", [3, 6])
def test_an_edited_row_is_named(cli, logged, row):
    sql(logged, "UPDATE audit SET outcome = 'denied' WHERE id = ?", (row,))
    assert broken(cli) == f"audit chain broken: row {row} was changed: its content does not match its hash"


def test_an_edited_row_whose_hash_was_recomputed_is_named_by_the_next_link(cli, logged):
    r = rows(logged)[2]
    values = list(r[:len(NOW)])
    values[NOW.index("verdict")] = "ask"
    sql(logged, "UPDATE audit SET verdict = 'ask', hash = ? WHERE id = 3", (row_hash(r[-2], values, CURRENT_VERSION),))
    assert broken(cli) == "audit chain broken: row 3 was changed: row 4 no longer links to it"


def test_the_last_row_rechained_differs_from_the_head(cli, logged):
    r = rows(logged)[-1]
    values = list(r[:len(NOW)])
    values[NOW.index("outcome")] = "error"
    sql(logged, "UPDATE audit SET outcome = 'error', hash = ? WHERE id = 6",
        (row_hash(r[-2], values, CURRENT_VERSION),))
    assert "row 6 does not have the head's hash" in broken(cli)


@pytest.mark.parametrize("row", [1, 3])
def test_a_deleted_row_is_named(cli, logged, row):
    sql(logged, "DELETE FROM audit WHERE id = ?", (row,))
    assert f"row {row} missing: deleted" in broken(cli)


def test_deleted_last_rows_are_missing_at_the_end(cli, logged):
    sql(logged, "DELETE FROM audit WHERE id >= 5")
    assert broken(cli) == ("audit chain broken: rows 5–6 missing at the end: deleted (the head is row 6)")


def test_a_deleted_last_row_still_shows_after_palui_writes_more(cli, logged, tmp_path):
    sql(logged, "DELETE FROM audit WHERE id = 6")
    model = write_script(tmp_path / "more.json", calls(call("recall__search_memories", query="more")), text("ok"))
    assert cli("run", "--model", model, "more").returncode == 0
    assert max(r[0] for r in rows(logged)) == 7  # the deleted id is not given out again
    assert "row 6 missing: deleted (row 7 follows row 5)" in broken(cli)


def test_the_last_committed_row_deleted_is_missing_at_the_end(cli, logged):
    # The table now ends exactly at the head's previous head, as after an interrupted write: the audit_state
    # row counted row 6, so it was committed and then deleted.
    sql(logged, "DELETE FROM audit WHERE id = 6")
    assert broken(cli) == "audit chain broken: row 6 missing at the end: deleted (the head is row 6)"


@pytest.mark.slow
def test_a_kill_between_the_head_and_the_commit_is_an_interrupted_write(cli, logged, home, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from support.live_service import wait_for

    held = tmp_path / "held.pid"
    model = write_script(tmp_path / "more.json", calls(call("recall__search_memories", query="more")), text("ok"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env.update(PALUI_HOME=str(home), PALUI_TEST_AUDIT_HOLD=str(held))
    proc = subprocess.Popen([sys.executable, "-m", "palui", "run", "--model", model, "more"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = int(wait_for(lambda: held.exists() and held.read_text(), what="the audit write held after its head"))
        assert pid == proc.pid and json.loads((home / "audit_head").read_text())["id"] == 7
        os.kill(pid, signal.SIGKILL)  # the head is written, the transaction never commits
    finally:
        proc.wait(60)
    assert count(logged) == 6
    r = cli("audit", "verify")
    assert r.returncode == 0, r.stderr
    assert "audit chain intact: 6 row(s)" in r.stdout
    assert "the last audit write was interrupted (row 7 never committed)" in r.stdout
    assert "missing" not in r.stdout + r.stderr
    out = cli.json("audit", "verify", "--json")
    assert out["ok"] and out["interrupted"]["row"] == 7
    # The next write takes the id that never committed: no gap, and the log verifies plainly.
    assert cli("run", "--model", model, "more").returncode == 0
    assert [r[0] for r in rows(logged)] == [1, 2, 3, 4, 5, 6, 7]
    r = cli("audit", "verify")
    assert r.returncode == 0 and "interrupted" not in r.stdout, r.stdout


def test_a_row_inserted_at_the_end_with_a_forged_hash_is_after_the_head(cli, logged):
    last = rows(logged)[-1]
    values = [7, last[1] + 1, "t-forged", "recall__forget_memory", "destructive", "builtin", "chat", 0, "run",
              "run: nothing to see", None, "ok", 1.0]
    sql(logged, f"INSERT INTO audit ({', '.join(CHAINED)}, prev_hash, hash) VALUES ({', '.join('?' * 15)})",
        (*values, last[-1], row_hash(last[-1], values)))
    assert broken(cli) == "audit chain broken: row 7 inserted after the head (row 6)"


def test_a_row_inserted_in_the_middle_is_named(cli, logged):
    before = rows(logged)
    # Make room at id 3 (renumber 3..6 to 4..7), then insert a forged row that links to row 2.
    sql(logged, "UPDATE audit SET id = id + 100 WHERE id >= 3")
    sql(logged, "UPDATE audit SET id = id - 99 WHERE id >= 100")
    values = [3, before[2][1], "t-forged", "recall__forget_memory", "destructive", "builtin", "chat", 0, "run",
              "run: nothing to see", None, "ok", 1.0]
    sql(logged, f"INSERT INTO audit ({', '.join(CHAINED)}, prev_hash, hash) VALUES ({', '.join('?' * 15)})",
        (*values, before[1][-1], row_hash(before[1][-1], values)))
    assert broken(cli) == "audit chain broken: row 3 was inserted: row 4 links to the row before it"


def test_a_row_inserted_without_a_hash_is_named(cli, logged):
    sql(logged, "UPDATE audit SET id = id + 100 WHERE id >= 2")
    sql(logged, "UPDATE audit SET id = id - 99 WHERE id >= 100")
    sql(logged, "INSERT INTO audit (id, time, tool, verdict, reason, outcome) VALUES (2, 0, 'x', 'run', 'r', 'ok')")
    assert "row 2 has no hash: it was inserted outside Palui's audit" in broken(cli)


def test_a_rewrite_of_log_and_head_passes_alone_but_not_against_a_noted_head(cli, logged, home):
    noted = rows(logged)[-1][-1]
    # The attacker changes row 2 and chains every later row again, and rewrites the head file.
    prev = GENESIS
    for r in rows(logged):
        values = list(r[:len(NOW)])
        if values[0] == 2:
            values[NOW.index("outcome")] = "denied"
        h = row_hash(prev, values, CURRENT_VERSION)
        sql(logged, "UPDATE audit SET outcome = ?, prev_hash = ?, hash = ? WHERE id = ?",
            (values[NOW.index("outcome")], prev, h, values[0]))
        prev = h
    (home / "audit_head").write_text(json.dumps({"id": 6, "hash": prev}))
    assert broken(cli) == ("audit chain broken: row 6 does not have the hash it was written with: the log was "
                           "changed and chained again at or before that row")  # the audit_state row disagrees
    sql(logged, "UPDATE audit_state SET last_hash = ?", (prev,))  # one who writes the database rewrites it too
    assert cli("audit", "verify").returncode == 0  # what the chain cannot show (docs say so)
    assert broken(cli, "--head", noted[:16]) == (
        f"audit chain broken: no row has the noted hash {noted[:16]}: a row at or before the one it named was "
        "changed or deleted")
    assert cli("audit", "verify", "--head", "abc").returncode == 2  # not a hash: bad usage


def test_a_noted_older_head_still_verifies_after_more_rows(cli, logged, tmp_path):
    noted = rows(logged)[2][-1]
    model = write_script(tmp_path / "more.json", calls(call("recall__search_memories", query="more")), text("ok"))
    assert cli("run", "--model", model, "more").returncode == 0
    assert cli("audit", "verify", "--head", noted).returncode == 0


def test_a_missing_head_file_is_reported_unless_a_head_is_given(cli, logged, home):
    noted = rows(logged)[-1][-1]
    (home / "audit_head").unlink()
    assert "the audit_head file is missing" in broken(cli)
    assert cli("audit", "verify", "--head", noted).returncode == 0


def test_export_writes_every_row_with_its_hash_in_the_documented_form(cli, logged):
    lines = cli("audit", "export", "--jsonl").stdout.splitlines()
    assert len(lines) == 6
    prev = GENESIS
    for line in lines:
        row = json.loads(line)
        assert row["chain_version"] == 2  # [version, *columns]: version 1's, then the gateway's client and session
        canonical = json.dumps([2, *[row[k] for k in NOW]], ensure_ascii=True, separators=(",", ":"))
        assert row["prev_hash"] == prev
        assert row["hash"] == hashlib.sha256(f"{prev}\n{canonical}".encode()).hexdigest()
        assert row["time_iso"].startswith("20")
        prev = row["hash"]
    assert cli("audit", "export", "--jsonl", "--since", "2999-01-01").stdout == ""
    assert len(cli("audit", "export", "--since", "2000-01-01").stdout.splitlines()) == 6
    assert cli("audit", "export", "--since", "yesterday").returncode == 2


def test_rows_written_before_the_chain_are_chained_by_the_migration(home):
    from palui.store import db as db_mod
    from palui.store import migrations
    from palui.store.audit_chain import head_path, read_head

    old = [m for m in migrations.MIGRATIONS if m[0] < 25]
    path = home / "palui.db"
    orig = db_mod.MIGRATIONS
    db_mod.MIGRATIONS = old
    try:
        d = db_mod.Database(path)
        with d.write() as c:
            for i in range(3):
                c.execute("INSERT INTO audit (time, tool, tainted, verdict, reason, outcome) VALUES (?,?,?,?,?,?)",
                          (1000.0 + i, f"tool{i}", 0, "run", "r", "ok"))
        d.close()
    finally:
        db_mod.MIGRATIONS = orig
    d = db_mod.Database(path)  # migrations 25 and 26 run now
    from palui.runner import audit

    result = audit.verify(d)
    assert result["ok"] and result["rows"] == 3, result
    assert read_head(head_path(path)).id == 3
    audit.record(d, turn_id=None, tool="tool3", tool_class=None, class_source=None, origin="chat", tainted=False,
                 verdict="run", reason="r", args_hash=None, outcome="ok", duration_ms=5)
    assert audit.verify(d)["rows"] == 4 and audit.verify(d)["ok"]
    d.close()


@pytest.mark.slow
def test_the_service_posts_the_head_to_the_persons_channel_once_a_day(cli, logged, home, tmp_path):
    import time

    from support.live_service import LiveService, wait_for, write_clock

    clock = tmp_path / "clock"
    write_clock(clock, time.time())
    head = rows(logged)[-1][-1]

    def posts(s):
        return [m["text"] for m in s.get("/api/inbox") if m["text"].startswith("Audit head on")]

    with LiveService(home, {"PALUI_TEST_CLOCK": str(clock)}) as s:
        [first] = wait_for(lambda: posts(s), what="the daily post")
        assert f"row 6, hash {head}" in first and f"palui audit verify --head {head}" in first
        time.sleep(1.0)  # several ticks later: still one post today
        assert len(posts(s)) == 1
        write_clock(clock, time.time() + 86_400)
        later = wait_for(lambda: posts(s) if len(posts(s)) == 2 else None, what="the next day's post")
        assert later[0] == first


def test_an_emptied_log_with_its_head_file_deleted_does_not_verify(cli, logged, home):
    """Every row and the audit_head file deleted: the turns still record the six calls, and the
    audit_state row still counts six rows written (it verified as `intact: 0 row(s)` before)."""
    sql(logged, "DELETE FROM audit")
    (home / "audit_head").unlink()
    assert broken(cli) == ("audit chain broken: audit log empty but 6 tool call(s) recorded in the turns; the audit "
                           "counted 6 row(s) up to row 6")
    sql(logged, "DELETE FROM audit_state")  # the counter deleted too: the turns' events still tell
    assert broken(cli) == "audit chain broken: audit log empty but 6 tool call(s) recorded in the turns"
    verdict = json.loads(cli("audit", "verify", "--json").stdout)
    assert verdict["ok"] is False and verdict["problem"]["kind"] == "emptied"


def test_the_audit_state_row_deleted_or_rows_deleted_at_the_end_with_the_head_file_are_named(cli, logged, home):
    sql(logged, "DELETE FROM audit WHERE id >= 5")
    (home / "audit_head").unlink()
    noted = rows(logged)[-1][-1]  # row 4's hash, as if the person gave it: the head file is not needed
    assert broken(cli, "--head", noted) == ("audit chain broken: the log holds 4 row(s) but 6 were written: rows "
                                            "were deleted")
    sql(logged, "DELETE FROM audit_state")
    assert "the audit_state row is missing" in broken(cli, "--head", noted)


def test_a_row_relabelled_with_another_chain_version_is_named(cli, logged):
    sql(logged, "UPDATE audit SET chain_version = 1 WHERE id = 4")  # a version that hashes fewer columns
    assert broken(cli) == "audit chain broken: row 4 was changed: its content does not match its hash"
    sql(logged, "UPDATE audit SET chain_version = 3 WHERE id = 4")
    assert broken(cli) == ("audit chain broken: row 4 was changed: it names chain version 3, which Palui never "
                           "wrote")


def test_an_upgraded_home_counts_the_rows_it_had_and_old_rows_verify_as_version_1(home):
    from palui.runner import audit
    from palui.store import db as db_mod
    from palui.store import migrations
    from palui.store.audit_chain import Head, head_path, write_head
    from palui.store.migrations_integrity import AUDIT_STATE

    path = home / "palui.db"
    orig = db_mod.MIGRATIONS
    db_mod.MIGRATIONS = [m for m in migrations.MIGRATIONS if m[0] < AUDIT_STATE]
    try:
        d = db_mod.Database(path)
        prev = GENESIS
        with d.write() as c:  # rows as today's main writes them: chained, with no chain version
            for i in range(1, 4):
                values = [i, 1000.0 + i, None, f"tool{i}", None, None, "chat", 0, "run", "r", None, "ok", 1.0]
                h = row_hash(prev, values)
                c.execute(f"INSERT INTO audit ({', '.join(CHAINED)}, prev_hash, hash) VALUES ({', '.join('?' * 15)})",
                          (*values, prev, h))
                prev = h
        write_head(head_path(path), Head(3, prev))
        d.close()
    finally:
        db_mod.MIGRATIONS = orig
    d = db_mod.Database(path)  # the audit_state migration runs now
    try:
        assert tuple(d.row("SELECT rows, first_id, last_id FROM audit_state")) == (3, 1, 3)
        assert [r[0] for r in d.all("SELECT chain_version FROM audit")] == [1, 1, 1]
        assert audit.verify(d)["ok"]
        audit.record(d, turn_id=None, tool="tool3", tool_class=None, class_source=None, origin="chat", tainted=False,
                     verdict="run", reason="r", args_hash=None, outcome="ok", duration_ms=5)
        result = audit.verify(d)
        assert result["ok"] and result["rows"] == 4, result
        assert d.row("SELECT rows FROM audit_state")[0] == 4
    finally:
        d.close()
