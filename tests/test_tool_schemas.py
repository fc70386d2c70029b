"""A tool's input schema is checked when its server lists it (spec §7.6, decision 0027's flow).

A schema that holds a number JSON cannot carry, has a ``$ref`` outside it, is not a valid JSON Schema, or is
longer than ``connectors.max_schema_chars`` (16,000) once every description in it is cut as a tool's description
is (decision 0082), flags its tool at ``connectors add`` and ``refresh``: the tool stays off (``enable-read``
leaves it, ``tools enable`` refuses it) until the person has seen it with ``palui tools show``, which prints the
schema's size. Stored definitions stay strict JSON (a ``NaN`` is kept as the string ``"NaN"``), and a model is
sent every description inside a schema cut like the tool's (a 200,000-character property description is not
sent whole on every request).
"""

from __future__ import annotations

import json
import math

import pytest

from palui.runner import offer
from palui.store import catalog
from palui.types import Origin
from support.mcp_inprocess import READ, InProcessServer, tool
from support.scripts import call, calls, text, write_script

# The tests' own MCP servers run in this process, through the connector's transport seam (support/mcp_inprocess.py).
pytestmark = pytest.mark.mcp_in_process

NAN_SCHEMA = {"type": "object", "properties": {"n": {"type": "number", "maximum": math.nan}}}
HUGE_SCHEMA = {"type": "object", "properties": {"pick": {"type": "string", "enum": [f"choice-{i:06d}" for i in
                                                                                    range(13_000)]}}}
LONG_DESCRIPTION = {"type": "object", "properties": {"q": {"type": "string", "description": "x" * 200_000}}}
REMOTE = {"type": "object", "properties": {"q": {"$ref": "https://evil.example/schema.json"}}}
INVALID = {"type": "object", "properties": {"q": {"type": "text"}}}


def _books() -> InProcessServer:
    return InProcessServer("books", [tool("nan", READ, NAN_SCHEMA), tool("huge", READ, HUGE_SCHEMA),
                                     tool("long", READ, LONG_DESCRIPTION), tool("remote", READ, REMOTE),
                                     tool("invalid", READ, INVALID), tool("plain", READ)])


async def test_flagged_at_add_off_until_seen_and_shown_with_its_size(svc, cli, tmp_path):
    books = _books()
    try:
        cid = await books.add(svc)
        flags = {r.tool: r.schema_problem for r in svc.tools.list(cid)}
        assert flags["nan"] == "its input schema holds a number JSON cannot carry (NaN or Infinity)"
        assert flags["huge"].startswith("its input schema is too long: 208,066 characters") and \
            "more than connectors.max_schema_chars (16,000)" in flags["huge"]
        assert flags["remote"] == ("its input schema has a $ref outside it (https://evil.example/schema.json), "
                                   "which Palui never fetches")
        assert flags["invalid"] == ("its input schema is not a valid JSON Schema: at $.properties.q.type: the "
                                    "'anyOf' rule fails")
        assert flags["long"] is None and flags["plain"] is None  # a long description is cut, not flagged
        told = [m["text"] for m in svc.notifier.inbox() if "input schema" in m["text"]]
        assert len(told) == 4 and all("palui tools show" in t for t in told)
        # stored strictly: the NaN is the string "NaN", every stored definition is JSON SQLite reads
        assert svc.tools.get(f"{cid}__nan").input_schema["properties"]["n"]["maximum"] == "NaN"
        assert svc.db.row("SELECT COUNT(*) FROM tools WHERE NOT json_valid(input_schema)")[0] == 0

        r = cli("tools", "enable-read", cid)
        assert r.returncode == 0 and "2 read tool(s) switched on" in r.stdout
        assert "left off: mcp-books__nan: its input schema holds a number" in r.stdout
        r = cli("tools", "enable", f"{cid}__huge")
        assert r.returncode == 2 and "is flagged: its input schema is too long" in r.stderr
        assert "palui tools show" in r.stderr
        shown = cli("tools", "show", f"{cid}__huge")
        assert shown.returncode == 0 and "  input schema: 208,066 characters as a model is sent it" in shown.stdout
        assert "input schema flagged: its input schema is too long" in shown.stdout
        assert cli("tools", "enable", f"{cid}__huge").returncode == 0  # seen: the person may switch it on
        assert "input schema flagged" in cli("tools", "list").stdout
        # a schema flagged for its size still checks arguments; one flagged as unusable does not (spec §3.3)
        assert cli("tools", "show", f"{cid}__remote").returncode == 0
        assert cli("tools", "enable", f"{cid}__remote").returncode == 0
        r = await svc.turns.send("go", model=write_script(tmp_path / "s.json", calls(
            call(f"{cid}__huge", pick="nope"), call(f"{cid}__remote", q=5)), text("done")))
        said = [e["result"] for e in r["events"] if e["type"] == "tool_call"]
        assert said == ['remote: {"q": 5}']  # the refused call left no event
        assert books.calls == [("remote", {"q": 5})]
    finally:
        books.forget()


async def test_a_definition_that_changes_to_a_flagged_schema_is_flagged_at_refresh(svc):
    books = InProcessServer("books", [tool("plain", READ)])
    try:
        cid = await books.add(svc, enable=("plain",))
        books.tools[0] = {**books.tools[0], "inputSchema": NAN_SCHEMA}
        await svc.connectors.refresh_async(cid)
        row = svc.tools.get(f"{cid}__plain")
        assert row.changed and not row.enabled  # a schema change: off and held for review (spec §7.6)
        svc.tools.review(row.name)
        row = svc.tools.get(f"{cid}__plain")
        assert row.schema_problem == "its input schema holds a number JSON cannot carry (NaN or Infinity)"
        assert row.hidden_seen  # the review's diff showed it
    finally:
        books.forget()


async def test_a_model_is_sent_every_description_in_a_schema_cut(svc):
    books = InProcessServer("books", [tool("long", READ, LONG_DESCRIPTION)])
    try:
        cid = await books.add(svc, enable=("long",))
        [d] = offer.definitions(catalog.snapshot(svc.db), [f"{cid}__long"], Origin.CHAT, False)
        cut = d.parameters_json_schema["properties"]["q"]["description"]
        assert cut.startswith("x" * 4_000) and cut.endswith("[cut by Palui: the description has 200,000 characters]")
        assert len(json.dumps(d.parameters_json_schema)) < 5_000
        kept = svc.tools.get(f"{cid}__long").input_schema["properties"]["q"]["description"]
        assert len(kept) == 200_000  # kept whole
    finally:
        books.forget()


def test_a_home_with_such_tools_stored_is_migrated(home):
    """Tools stored before the check: flagged by migration 43 (with the setting's default), switched off, the
    person told once; a stored NaN is made a string."""
    import sqlite3

    from palui.store.db import Database
    from palui.store.migrations import MIGRATIONS

    path = home / "palui.db"
    Database(path).close()
    con = sqlite3.connect(path)  # the home as it was before migration 43
    with con:
        con.execute("DELETE FROM schema_migrations WHERE number = 43")
        con.execute("ALTER TABLE tools DROP COLUMN schema_problem")
        con.execute("INSERT INTO connectors (id, kind, name, transport, config_json, state, created_at) VALUES"
                    " ('mcp-old', 'mcp', 'old', 'http', '{}', 'idle', 0)")
        for name, schema in (("nan", '{"type":"object","properties":{"n":{"maximum":NaN}}}'),
                             ("plain", '{"type":"object"}')):
            con.execute("INSERT INTO tools (connector_id, raw_name, name, description, input_schema,"
                        " definition_hash, enabled, untrusted_output, created_at, updated_at) VALUES"
                        " ('mcp-old', ?, ?, '', ?, 'h', 1, 1, 0, 0)", (name, f"mcp-old__{name}", schema))
    con.close()
    db = Database(path)
    try:
        rows = {r["raw_name"]: r for r in db.all("SELECT * FROM tools WHERE connector_id = 'mcp-old'")}
        assert rows["nan"]["schema_problem"].startswith("its input schema holds a number")
        assert not rows["nan"]["enabled"]
        assert json.loads(rows["nan"]["input_schema"])["properties"]["n"]["maximum"] == "NaN"
        assert rows["plain"]["schema_problem"] is None and rows["plain"]["enabled"]
        [told] = [r["text"] for r in db.all("SELECT text FROM inbox WHERE text LIKE '%input schema is flagged%'")]
        assert "mcp-old__nan" in told
        assert {n for n, _, _ in MIGRATIONS} >= {42, 43}
    finally:
        db.close()


@pytest.mark.slow
async def test_a_turn_that_offers_a_tool_whose_schema_held_nan_reaches_the_provider(svc, cli, monkeypatch):
    """Before, one schema with ``"maximum": NaN`` failed every turn that offered it (``internal error: ValueError:
    Out of range float values are not JSON compliant``, naming no tool). Now it is stored as the string ``"NaN"``,
    flagged, and once the person has seen and switched it on, a turn through an OpenAI-compatible provider runs."""
    from support.fake_llm import FakeLLM

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    books = InProcessServer("books", [tool("nan", READ, NAN_SCHEMA)])
    try:
        cid = await books.add(svc)
        svc.tools.acknowledge_hidden(f"{cid}__nan", svc.tools.details(f"{cid}__nan")["definition_hash"])  # tools show
        svc.tools.set_enabled([f"{cid}__nan"], True)
        with FakeLLM() as fake:
            fake.text("Nothing to do.")
            r = await svc.turns.send("hello", model=f"openai:gpt-test@{fake.openai_url}")
            [sent] = fake.requests
        assert r["status"] == "done" and r["answer"] == "Nothing to do.", r
        [offered] = [t for t in sent.body["tools"] if t["function"]["name"] == f"{cid}__nan"]
        assert offered["function"]["parameters"]["properties"]["n"]["maximum"] == "NaN"
    finally:
        books.forget()
