"""Look-alike tool names (spec §7.5, UTS #39 skeletons): a name with a Cyrillic `а` for a Latin `a` is flagged
like hidden characters: ``tools list|show`` say so, ``enable-read`` leaves it off, and it is switched on only
after ``tools show`` named what it reads like. Through the CLI, against a stdio MCP server."""

from __future__ import annotations

import sys

import pytest

from palui.text.confusables import has_look_alikes, skeleton
from support.mcp_servers import HOSTILE, READ, hostile_spec, tool

pytestmark = pytest.mark.mcp_in_process

LOOK_ALIKE = "re\u0430d_notes"  # CYRILLIC SMALL LETTER A


@pytest.fixture
def notes(cli, tmp_path):
    spec = hostile_spec(tmp_path / "spec.json", [tool(LOOK_ALIKE, annotations=READ),
                                                 tool("list_notes", annotations=READ),
                                                 tool("caf\u00e9_notes", annotations=READ)])
    r = cli("connectors", "add", "notes", "--", sys.executable, str(HOSTILE), str(spec))
    assert r.returncode == 0, r.stderr
    return {t["tool"]: t for t in cli.json("tools", "list", "--connector", "mcp-notes", "--json")}


@pytest.mark.slow
def test_a_cyrillic_look_alike_name_is_flagged_and_left_off_by_enable_read(cli, notes):
    odd, plain, accented = notes[LOOK_ALIKE], notes["list_notes"], notes["caf\u00e9_notes"]
    assert odd["look_alike_name"] and not plain["look_alike_name"] and not accented["look_alike_name"]
    assert "look-alike name" in cli("tools", "list", "--connector", "mcp-notes").stdout
    r = cli("tools", "enable-read", "mcp-notes")
    assert "2 read tool(s) switched on" in r.stdout
    assert f"left off: {odd['name']}: its name has look-alike characters" in r.stdout
    r = cli("tools", "enable", odd["name"])
    assert r.returncode == 2 and "look-alike characters; look at it first with palui tools show" in r.stderr
    shown = cli("tools", "show", odd["name"])
    assert shown.returncode == 0
    assert "look-alike name: reads like read_notes" in shown.stdout and "re\\u0430d_notes" in shown.stdout
    assert cli("tools", "enable", odd["name"]).returncode == 0  # seen: it may be switched on


def test_skeletons_follow_unicode_confusables():
    assert skeleton(LOOK_ALIKE) == "read_notes"
    assert has_look_alikes("\uff52ead") and has_look_alikes("\u03bfpen")  # fullwidth r, Greek omicron
    assert not has_look_alikes("summarize") and not has_look_alikes("caf\u00e9") and not has_look_alikes("\u4e2d\u6587")
