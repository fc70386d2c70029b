"""Ids that never collide in the life of an install (spec §1 "id"): turn, conversation, approval and
question ids carry 128 random bits; the person may type any unique prefix of one (at least six hex
digits) on every front end, an ambiguous prefix is refused naming the candidates, and ids stored by an
older Palui (10 hex digits) keep working. Through the CLI in a subprocess, and HTTP and the web page of
a live service."""

from __future__ import annotations

import json
import re
import sqlite3

import httpx
import pytest

from palui.server.app import session_value
from palui.store.ids import new_id, short
from support.live_service import LiveService
from support.scripts import call, calls, text, write_script

FULL = r"[0-9a-f]{32}"


def asked(cli, tmp_path, name: str = "s.json") -> dict:
    """A chat turn whose destructive call waits for approval (`palui run --json`)."""
    model = write_script(tmp_path / name, calls(call("recall__forget_memory", id=1)), text("Forgotten."))
    r = cli("run", "--json", "--model", model, "forget it")
    out = json.loads(r.stdout)
    assert out["status"] == "awaiting_approval", out
    return out


def test_new_ids_have_128_random_bits_and_keep_their_prefixes(cli, tmp_path):
    out = asked(cli, tmp_path)
    [a] = cli.json("approvals", "list", "--json")
    assert re.fullmatch(rf"t-{FULL}", out["turn"]) and re.fullmatch(rf"c-{FULL}", out["conversation"])
    assert re.fullmatch(rf"a-{FULL}", a["id"])
    made = {new_id("t") for _ in range(10_000)}
    assert len(made) == 10_000
    # every hex digit is used in every position: the 32 digits are random, not a clock or a counter
    for position in range(2, 34):
        assert len({ident[position] for ident in made}) == 16
    assert short(out["turn"]) == out["turn"][:12] and short("t-3f9a1c2b7d") == "t-3f9a1c2b7d"


def test_a_unique_prefix_works_in_the_cli_and_an_ambiguous_one_is_refused_naming_the_candidates(cli, tmp_path, home):
    out = asked(cli, tmp_path)
    [a] = cli.json("approvals", "list", "--json")
    assert cli.json("approvals", "show", a["id"][:8], "--json")["id"] == a["id"]
    assert cli.json("conversations", "show", out["conversation"][:10], "--json")["id"] == out["conversation"]
    assert [r["turn"] for r in cli.json("audit", "--json", "--turn", out["turn"][:9])] == [out["turn"]]
    # Two approvals made to share a prefix: the prefix is refused and both are named.
    twin = "a-" + a["id"][2:8] + "0" * 26 if a["id"][8] != "0" else "a-" + a["id"][2:8] + "f" * 26
    con = sqlite3.connect(home / "palui.db")
    with con:
        con.execute("INSERT INTO approvals SELECT ?, " + ", ".join(
            c for (_, c, *_rest) in con.execute("PRAGMA table_info(approvals)").fetchall() if c != "id")
            + " FROM approvals WHERE id = ?", (twin, a["id"]))
    con.close()
    r = cli("approvals", "show", a["id"][:8])
    assert r.returncode == 2 and "is ambiguous" in r.stderr and a["id"] in r.stderr and twin in r.stderr
    r = cli("approvals", "approve", a["id"][:8])
    assert r.returncode == 2 and "is ambiguous" in r.stderr
    assert cli("approvals", "show", a["id"][:12]).returncode == 0  # more digits tell them apart
    r = cli("approvals", "approve", a["id"][:12])
    assert r.returncode == 0, r.stderr
    assert "Forgotten." in r.stdout


def test_ids_stored_by_an_older_palui_keep_working(cli, tmp_path, home):
    out = asked(cli, tmp_path)
    [a] = cli.json("approvals", "list", "--json")
    old_turn, old_approval = "t-3f9a1c2b7d", "a-0123abcd45"  # 40 random bits, as ids were made before
    con = sqlite3.connect(home / "palui.db")
    with con:
        con.execute("PRAGMA foreign_keys = OFF")
        for table, column in (("turn_events", "turn_id"), ("approvals", "turn_id"), ("audit", "turn_id")):
            con.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (old_turn, out["turn"]))
        con.execute("UPDATE turns SET id = ? WHERE id = ?", (old_turn, out["turn"]))
        con.execute("UPDATE approvals SET id = ? WHERE id = ?", (old_approval, a["id"]))
        con.execute("UPDATE turns SET pending_json = replace(pending_json, ?, ?)", (a["id"], old_approval))
    con.close()
    assert cli.json("approvals", "show", old_approval, "--json")["turn"] == old_turn
    assert cli.json("approvals", "show", old_approval[:8], "--json")["id"] == old_approval


@pytest.mark.slow
def test_a_unique_prefix_works_over_http_and_on_the_web_page(cli, tmp_path, home):
    out = asked(cli, tmp_path)
    [a] = cli.json("approvals", "list", "--json")
    with LiveService(home) as s:
        assert s.get(f"/api/turns/{out['turn'][:8]}")["turn"] == out["turn"]
        assert s.get(f"/api/conversations/{out['conversation'][:8]}")["id"] == out["conversation"]
        with httpx.Client(base_url=s.url, timeout=20, cookies={"palui_session": session_value(s.token)}) as c:
            page = c.get(f"/approvals/{a['id'][:8]}/card")
            assert page.status_code == 200 and a["id"] in page.text
