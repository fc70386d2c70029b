"""A person's policy pinned as tests (spec §3.4): ``palui policy snapshot`` / ``palui policy check FILE``
through the CLI, the pure comparison as a table, and ``policy.check_file`` at ``palui serve`` start."""

from __future__ import annotations

import json

import pytest

from palui.policy.pinned import Pin, compare, parse
from palui.types import Decision, Origin, Verdict
from support.live_service import LiveService, wait_for


def snapshot(cli, home):
    r = cli("policy", "snapshot")
    assert r.returncode == 0, r.stderr
    path = home / "policy.csv"
    path.write_text(r.stdout)
    return path


def test_snapshot_has_every_tool_in_every_situation_and_checks_clean(cli, home):
    path = snapshot(cli, home)
    lines = path.read_text().splitlines()
    assert lines[0] == "tool,origin,tainted,verdict"
    tools = {r["name"] for r in cli.json("tools", "list", "--json")}
    assert {line.split(",")[0] for line in lines[1:]} == tools
    assert len(lines) - 1 == 8 * len(tools)  # chat, job, webhook, gateway: untainted and tainted (no client yet)
    assert "recall__forget_memory,job,false,unavailable" in lines
    assert "tasks__create_task,chat,true,ask" in lines
    r = cli("policy", "check", str(path))
    assert r.returncode == 0 and r.stdout.strip() == f"all {len(lines) - 1} row(s) hold"


def test_check_prints_each_mismatch_with_the_current_reason_and_exits_1(cli, home):
    path = snapshot(cli, home)
    assert cli("tools", "set-class", "tasks__create_task", "read").returncode == 0  # looser
    assert cli("tools", "disable", "recall__search_memories").returncode == 0  # tighter
    with path.open("a") as f:
        f.write("mcp-gone__tool,chat,false,run\n")
    r = cli("policy", "check", str(path))
    assert r.returncode == 1
    out = r.stdout.splitlines()
    assert any(line.startswith("looser: line ") and "tasks__create_task (chat, tainted): pinned ask, now run — "
               "run: read tool in a tainted turn" in line for line in out), out
    assert any(line.startswith("tighter: ") and "recall__search_memories (job): pinned run, now off — off: the "
               "tool is switched off" in line for line in out), out
    assert any(line.startswith("missing: ") and "mcp-gone__tool" in line for line in out), out
    found = cli("policy", "check", str(path), "--json")
    rows = json.loads(found.stdout)
    assert {r["kind"] for r in rows} == {"looser", "tighter", "missing"}
    assert all(r["reason"] for r in rows if r["kind"] != "missing")


def test_a_bad_file_is_named_row_by_row(cli, home):
    path = home / "bad.csv"
    path.write_text("tool,origin,tainted,verdict\nrecall__add_memory,cron,false,run\n"
                    "recall__add_memory,chat,maybe,run\nrecall__add_memory,chat,false,allow\nx,y\n"
                    "recall__add_memory,chat,no,run\n")
    r = cli("policy", "check", str(path))
    assert r.returncode == 1
    assert "bad: line 2: unknown origin 'cron'" in r.stdout
    assert "bad: line 3: tainted must be true or false" in r.stdout
    assert "bad: line 4: unknown verdict 'allow'" in r.stdout
    assert "bad: line 5: expected 4 fields, got 2" in r.stdout
    assert "line 6" not in r.stdout  # "no" is a valid false, and the row holds
    path.write_text("name,verdict\nx,run\n")
    assert "the header must be tool,origin,tainted,verdict" in cli("policy", "check", str(path)).stdout
    assert cli("policy", "check", str(home / "none.csv")).returncode == 1


R, A, U, OFF = Verdict.RUN, Verdict.ASK, Verdict.UNAVAILABLE, Verdict.OFF


@pytest.mark.parametrize("pinned,now,kind", [
    (R, R, None), (A, R, "looser"), (U, A, "looser"), (OFF, R, "looser"), (R, A, "tighter"), (A, U, "tighter"),
    (A, OFF, "tighter"), (U, OFF, "differs"), (OFF, U, "differs"), (U, None, "missing")])
def test_compare_table(pinned, now, kind):
    pin = Pin(2, "t", Origin.CHAT, False, pinned)
    found = compare([pin], lambda p: None if now is None else Decision(now, f"{now.value}: why", "matrix"))
    assert [f.kind for f in found] == ([] if kind is None else [kind])


def test_parse_accepts_word_variants_and_skips_blank_lines():
    pins, bad = parse([["Tool", "ORIGIN", "tainted", "verdict"], ["a", "Job", "YES", "Ask"], [], ["", "", "", ""]])
    assert bad == [] and pins == [Pin(2, "a", Origin.JOB, True, Verdict.ASK)]


@pytest.mark.slow
def test_the_service_switches_off_a_looser_tool_at_start_and_still_starts(cli, home):
    path = snapshot(cli, home)
    assert cli("tools", "set-class", "recall__forget_memory", "write").returncode == 0  # looser than pinned
    assert cli("tools", "disable", "tasks__list_tasks").returncode == 0  # tighter: only a notice
    (home / "palui.toml").write_text('[policy]\ncheck_file = "policy.csv"\n')  # relative to palui.toml
    with LiveService(home) as s:
        tools = {t["name"]: t for t in s.get("/api/tools")}
        assert tools["recall__forget_memory"]["enabled"] is False
        assert tools["tasks__create_task"]["enabled"] is True
        inbox = wait_for(lambda: [m for m in s.get("/api/inbox") if "policy file" in m["text"]], what="notice")
        text = inbox[-1]["text"]
        assert f"The policy file {path} does not hold: switched off recall__forget_memory" in text
        assert "tasks__list_tasks (chat): pinned run, now off" in text
    assert path.exists()


@pytest.mark.slow
def test_an_unreadable_policy_file_is_a_notice_and_the_service_starts(cli, home):
    (home / "palui.toml").write_text(f'[policy]\ncheck_file = "{home / "missing.csv"}"\n')
    with LiveService(home) as s:
        inbox = wait_for(lambda: [m for m in s.get("/api/inbox") if "could not be read" in m["text"]], what="notice")
        assert "missing.csv (policy.check_file) could not be read" in inbox[-1]["text"]
        assert s.get("/api/health")["ok"]
