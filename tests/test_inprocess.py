"""The in-process command line of the suite (``support/inprocess.py``) answers as ``python -m palui`` does,
and leaves the test process as it found it.

Most CLI tests run their commands in the test process (the ``cli`` fixture); these compare it with a real
child on the same home (exit code, stdout, stderr for success, bad usage, an error, ``--json``, stdin) and
check that what a command changes in the process (environment, umask, logging, working directory) is put
back, so one test's command cannot leak into the next.
"""

from __future__ import annotations

import json
import logging
import os

import pytest

from support import inprocess

CASES = [
    ("--version",),
    ("--help",),
    ("tools", "list", "--json"),
    ("connectors", "list"),
    ("status", "--json"),
    ("memories", "list", "--json"),
    ("tools", "set-class", "nope__missing", "read"),  # an error: exit 1
    ("tools", "list", "--limit", "x"),  # bad usage: exit 2
    ("approvals", "approve", "a-nope"),
    ("nonsense",),
]


def said(r) -> tuple[int, str, str]:
    return r.returncode, r.stdout, r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_a_command_in_process_answers_as_a_child_does(cli, cli_process, args):
    assert said(cli(*args)) == said(cli_process(*args))


@pytest.mark.slow
def test_a_change_in_process_is_seen_by_a_child_and_back(cli, cli_process):
    assert cli_process("tools", "disable", "recall__forget_memory").returncode == 0
    here = {t["name"]: t["enabled"] for t in cli.json("tools", "list", "--json")}
    assert here["recall__forget_memory"] is False
    assert cli("tools", "enable", "recall__forget_memory").returncode == 0
    child = {t["name"]: t["enabled"] for t in cli_process.json("tools", "list", "--json")}
    assert child == {**here, "recall__forget_memory": True}
    answer = "y\n"  # stdin reaches the command either way
    assert said(cli("tools", "review", "nope__x", input=answer)) == said(cli_process("tools", "review", "nope__x",
                                                                                     input=answer))


def test_a_command_leaves_the_process_as_it_found_it(cli, home, tmp_path):
    root = logging.getLogger()
    before = (dict(os.environ), os.getcwd(), list(root.handlers), root.level, logging.getLogRecordFactory())
    mask = os.umask(0o022)
    try:
        assert cli("status", env={"PALUI_TICK_SECONDS": "5"}).returncode == 0
        assert cli("tools", "disable", "recall__forget_memory").returncode == 0
        assert os.umask(0o022) == 0o022  # palui.cli sets 0o077 for its own process only
    finally:
        os.umask(mask)
    after = (dict(os.environ), os.getcwd(), list(root.handlers), root.level, logging.getLogRecordFactory())
    assert after == before
    assert (home / "logs").is_dir()  # the command did set up its log (opened at its first record), then took it down


def test_env_reaches_the_command_and_goes_away(cli, home):
    (home / "palui.toml").write_text("[budgets]\nsteps = 7\n")
    r = cli("policy", "explain", "recall__search_memories", "--json", env={"PALUI_BUDGETS__STEPS": "nope"})
    assert r.returncode == 1 and "PALUI_BUDGETS__STEPS" in r.stderr
    assert "PALUI_BUDGETS__STEPS" not in os.environ
    assert cli("policy", "explain", "recall__search_memories", "--json").returncode == 0


def test_an_uncaught_exception_is_exit_1_with_its_traceback(home, monkeypatch):
    import palui.cli

    def boom(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(palui.cli, "load_commands", boom)
    r = inprocess.run(["status"], env={**os.environ, "PALUI_HOME": str(home)})
    assert r.returncode == 1 and "RuntimeError: boom" in r.stderr and r.stdout == ""
    assert json.dumps(r.args) == '["palui", "status"]'
