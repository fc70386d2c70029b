"""Classes suggested for unknown tools (spec §2.4): the pure rule as tables, ``palui tools suggest`` through
the CLI against a real MCP server that sends no annotations, and the connector sheet's buttons."""

from __future__ import annotations

import base64
import itertools
import json
import sys

import pytest

from palui.connectors.base import ToolSpec
from palui.policy.suggest import DESTRUCTIVE, READ, WRITE, suggest, words
from palui.server.app import csrf_value
from support.mcp_servers import HOSTILE, hostile_spec, tool

pytestmark = pytest.mark.mcp_in_process

R, W, D = "read", "write", "destructive"


@pytest.mark.parametrize("name,description,expected", [
    ("get_file_contents", "Get the contents of a file from a repository", R),
    ("search_repositories", "Search for GitHub repositories", R),
    ("listIssues", "", R),
    ("read_query", "Execute a SELECT query on the SQLite database", R),
    ("create_issue", "Create a new issue", W),
    ("create_or_update_file", "Create or update a single file in a repository", W),
    ("push_files", "Push multiple files in a single commit", W),
    ("add-comment", "", W),
    ("write_query", "Execute an INSERT, UPDATE, or DELETE query", D),
    ("update_note", "Overwrites the note with the new text", D),
    ("merge_pull_request", "Merge a pull request", D),
    ("delete_branch", "", D),
    ("dropTable", "", D),
    ("list_deleted_items", "", D),
    ("get_or_create_user", "", None),
    ("list_posts", "", None),
    ("get_record", "Returns the record, and removes it from the queue", None),
    ("convert_to_markdown", "Convert a resource to markdown", None),
    ("frobnicate", "", None),
])
def test_the_suggestion_table(name, description, expected):
    s = suggest(name, description)
    assert (s.tool_class.value if s.tool_class else None) == expected, s
    assert s.reason


VERBS = sorted(READ)[:6] + sorted(WRITE)[:6] + sorted(DESTRUCTIVE)[:6] + ["notes", "file", "x"]


def test_never_read_for_a_name_that_matches_a_write_or_destructive_pattern():
    """Every name of three words from the vocabularies (and a few nouns), in three spellings."""
    checked = 0
    for a, b, c in itertools.product(VERBS, repeat=3):
        for name in (f"{a}_{b}_{c}", f"{a}-{b}-{c}", a + b.capitalize() + c.capitalize()):
            s = suggest(name, "")
            ws = words(name)
            if any(w in WRITE or w in DESTRUCTIVE for w in ws):
                assert s.tool_class is None or s.tool_class.value != "read", (name, s)
            if any(w in DESTRUCTIVE for w in ws):
                assert s.tool_class is not None and s.tool_class.value == "destructive", (name, s)
            if ws and ws[0] in READ and all(w in READ or w in ("notes", "file", "x") for w in ws):
                assert s.tool_class is not None and s.tool_class.value == "read", (name, s)
            checked += 1
    assert checked == 3 * len(VERBS) ** 3


@pytest.mark.parametrize("name", ["get_notes", "list_files", "search_code", "create_issue", "delete_note"])
def test_a_description_only_makes_a_suggestion_stricter_or_unsure(name):
    plain = suggest(name, "")
    for text in ("Deletes everything.", "This cannot be undone.", "Creates a file.", "Read only, safe, harmless."):
        s = suggest(name, text)
        rank = {None: 3, "read": 0, "write": 1, "destructive": 2}
        got = s.tool_class.value if s.tool_class else None
        was = plain.tool_class.value if plain.tool_class else None
        assert got == was or rank[got] > rank[was], (name, text, s)


@pytest.fixture
def gh(cli, tmp_path):
    """An MCP server whose tools send no annotations at all (like github's), plus one annotated tool."""
    spec = hostile_spec(tmp_path / "spec.json", [
        tool("get_file_contents", description="Get a file.\x1b[2K\u202eevil"),
        tool("create_issue", description="Create an issue."),
        tool("merge_pull_request", description="Merge a pull request."),
        tool("list_posts", description="List posts."),
        tool("frob", description="Frob."),
        tool("search_code", annotations={"readOnlyHint": True}, description="Search code."),
    ])
    r = cli("connectors", "add", "gh", "--", sys.executable, str(HOSTILE), str(spec))
    assert r.returncode == 0, r.stderr
    return "mcp-gh"


def classes(cli) -> dict[str, tuple[str, str]]:
    return {t["name"]: (t["class"], t["class_source"]) for t in cli.json("tools", "list", "--json")
            if t["connector"] == "mcp-gh"}


def test_tools_suggest_lists_escaped_and_changes_nothing(cli, gh):
    before = classes(cli)
    r = cli("tools", "suggest", gh)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[2K" in out or "\\u001b[2K" in out
    assert "\\u202eevil" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("mcp-gh__")}
    assert set(lines) == {"mcp-gh__get_file_contents", "mcp-gh__create_issue", "mcp-gh__merge_pull_request",
                          "mcp-gh__list_posts", "mcp-gh__frob"}  # search_code has hints: not unknown
    assert lines["mcp-gh__create_issue"].split()[1] == "write"
    assert lines["mcp-gh__frob"].split()[1] == "(unknown)"
    assert "--accept takes the 2 write and destructive suggestion(s)" in out
    assert classes(cli) == before
    rows = cli.json("tools", "suggest", gh, "--json")
    assert {r["name"]: r["suggestion"] for r in rows} == {
        "mcp-gh__get_file_contents": "read", "mcp-gh__create_issue": "write",
        "mcp-gh__merge_pull_request": "destructive", "mcp-gh__list_posts": None, "mcp-gh__frob": None}


def test_bulk_accept_takes_only_write_and_destructive_and_read_goes_one_at_a_time(cli, gh):
    r = cli("tools", "suggest", gh, "--accept")
    assert r.returncode == 0, r.stderr
    assert "2 suggestion(s) accepted; 1 read suggestion(s) are accepted one at a time" in r.stdout
    c = classes(cli)
    assert c["mcp-gh__create_issue"] == ("write", "user")
    assert c["mcp-gh__merge_pull_request"] == ("destructive", "user")
    assert c["mcp-gh__get_file_contents"] == ("destructive", "unknown")
    assert c["mcp-gh__list_posts"] == ("destructive", "unknown") and c["mcp-gh__frob"] == ("destructive", "unknown")
    r = cli("tools", "suggest", gh, "--accept-tool", "mcp-gh__get_file_contents")
    assert r.returncode == 0 and "mcp-gh__get_file_contents: class read (user)" in r.stdout
    assert classes(cli)["mcp-gh__get_file_contents"] == ("read", "user")
    r = cli("tools", "suggest", gh, "--accept-tool", "mcp-gh__frob")
    assert r.returncode == 2 and "the suggestion is none (unsure) now" in r.stderr
    r = cli("tools", "suggest", gh, "--accept-tool", "mcp-gh__create_issue")
    assert r.returncode == 2 and "already has a class" in r.stderr


def test_the_sheet_suggests_and_accepts_as_shown(svc, client):
    svc.tools.register("mcp-gh", [ToolSpec("get_file", "Get a <b>file</b>\u202e.", {"type": "object"}),
                                  ToolSpec("create_issue", "Create an issue.", {"type": "object"}),
                                  ToolSpec("delete_repo", "Delete it.", {"type": "object"}),
                                  ToolSpec("frob", "Frob.", {"type": "object"})], name="gh")
    html = client.get("/connectors/mcp-gh").text
    assert "Get a &lt;b&gt;file&lt;/b&gt;" in html and "\u202e" not in html
    assert 'data-suggested="read"' in html and 'data-suggested="unknown"' in html
    assert "Accept the 2 write and destructive suggestion(s)" in html
    assert 'name="s:mcp-gh__get_file"' not in html  # read is never in the bulk form
    csrf = csrf_value("tok")
    # The bulk form names what it showed: a suggestion that differs now is skipped.
    r = client.post("/connectors/mcp-gh/suggestions", data={"csrf": csrf, "s:mcp-gh__create_issue": "write",
                                                            "s:mcp-gh__delete_repo": "write",
                                                            "s:mcp-gh__get_file": "read"})
    assert r.status_code == 303
    assert svc.tools.get("mcp-gh__create_issue").class_source.value == "user"
    assert svc.tools.get("mcp-gh__delete_repo").class_source.value == "unknown"
    assert svc.tools.get("mcp-gh__get_file").class_source.value == "unknown"
    r = client.post("/tools/mcp-gh__get_file/suggestion", data={"csrf": csrf, "class": "read"})
    assert r.status_code == 303
    row = svc.tools.get("mcp-gh__get_file")
    assert (row.tool_class.value, row.class_source.value) == ("read", "user")
    r = client.post("/tools/mcp-gh__frob/suggestion",
                    data={"csrf": csrf, "class": "read", "back": "/connectors/mcp-gh"})
    assert r.status_code == 303 and svc.tools.get("mcp-gh__frob").class_source.value == "unknown"
    assert json.loads(base64.urlsafe_b64decode(r.cookies["palui_flash"]))["kind"] == "error"
