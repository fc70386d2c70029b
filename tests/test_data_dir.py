"""The data directory check before the database opens (``palui.home.prepare_data_dir``, spec §10.1).

Several ``Database`` objects over one file can be open in one process: the suite runs commands in-process
(``tests/support/inprocess.py``) while their connections wait for the garbage collector, and a test may hold
a ``Service`` too. The check must never close a descriptor of the database file there: that drops the POSIX
locks of the process's SQLite connections (https://sqlite.org/howtocorrupt.html §2.2), and the next command
of another process, believing itself the last connection, deletes the WAL that this process still writes to.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from palui.errors import ConfigError
from palui.home import prepare_data_dir
from palui.store.db import Database

# Another process (another ``palui`` command) runs one statement in WAL mode and closes its connection.
OTHER = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
         " c.execute('PRAGMA journal_mode = WAL'); print(c.execute(sys.argv[2]).fetchall()); c.close()")


def other_process(path, sql: str) -> str:
    return subprocess.run([sys.executable, "-c", OTHER, str(path), sql], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.slow
def test_the_check_keeps_the_locks_of_this_processs_open_connections(tmp_path):
    path = tmp_path / "palui.db"
    db = Database(path)  # a connection left open here, as an in-process command leaves it
    with db.write() as c:
        c.execute("CREATE TABLE probe (x INTEGER)")
    prepare_data_dir(tmp_path)  # the next command's check, in the same process

    other_process(path, "INSERT INTO probe VALUES (1)")
    # This process still holds its shared lock: the other process was not the last connection, so it left
    # the WAL and the wal-index in place (with the lock dropped, it checkpointed and deleted both).
    assert (tmp_path / "palui.db-wal").exists() and (tmp_path / "palui.db-shm").exists()
    with db.write() as c:
        c.execute("INSERT INTO probe VALUES (2)")
    # What this process wrote reaches the others (it went to a deleted WAL: lost) ...
    assert other_process(path, "SELECT count(*) FROM probe") == "[(2,)]"
    # ... and a new connection here reads the file (it was "disk I/O error" or "database disk image is malformed").
    fresh = Database(path)
    assert fresh.one("SELECT count(*) FROM probe")[0] == 2
    fresh.close()
    db.close()


def test_a_missing_database_file_is_created_private_and_an_existing_one_kept(tmp_path):
    prepare_data_dir(tmp_path / "new")
    made = tmp_path / "new" / "palui.db"
    assert made.stat().st_size == 0 and made.stat().st_mode & 0o777 == 0o600
    conn = sqlite3.connect(made)
    conn.execute("CREATE TABLE kept (x INTEGER)")
    conn.commit()
    conn.close()
    size = made.stat().st_size
    prepare_data_dir(tmp_path / "new")
    assert made.stat().st_size == size


def test_a_directory_where_the_database_file_goes_is_one_clear_line(tmp_path):
    (tmp_path / "palui.db").mkdir()
    with pytest.raises(ConfigError, match=r"cannot write palui\.db there \(Is a directory\)"):
        prepare_data_dir(tmp_path, env={"PALUI_HOME": str(tmp_path)})
    assert os.path.isdir(tmp_path / "palui.db")
