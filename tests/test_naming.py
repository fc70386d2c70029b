"""Connector ids and model-visible tool names (spec §7)."""

from __future__ import annotations

import re

import pytest

from palui.connectors.base import ToolSpec
from palui.connectors.naming import connector_id, short_hash, visible_name
from palui.errors import NamingError
from palui.types import ClassSource, ToolClass

VISIBLE = re.compile(r"[A-Za-z0-9_-]{1,64}")
CONNECTOR_ID = re.compile(r"mcp-[a-z0-9-]+")

READ = {"readOnlyHint": True}
DESTRUCTIVE = {"destructiveHint": True}


def spec(name: str, annotations=None, description: str = "d") -> ToolSpec:
    return ToolSpec(name, description, {"type": "object"}, annotations)


# -- connector ids ----------------------------------------------------------------------------

@pytest.mark.parametrize("name,expected", [
    ("notes", "mcp-notes"),
    ("Notes", "mcp-notes"),
    ("My  Notes!!", "mcp-my-notes"),
    ("a__b", "mcp-a-b"),
    ("git_hub.server", "mcp-git-hub-server"),
    ("  --weird--  ", "mcp-weird"),
    ("Ünïcode notes", "mcp-unicode-notes"),
    ("x" * 100, "mcp-" + "x" * 40),
])
def test_connector_id_slug(name, expected):
    cid = connector_id(name, set())
    assert cid == expected
    assert CONNECTOR_ID.fullmatch(cid) and "__" not in cid and "--" not in cid


def test_connector_id_unique():
    assert connector_id("notes", {"mcp-notes"}) == "mcp-notes-2"
    assert connector_id("Notes", {"mcp-notes", "mcp-notes-2"}) == "mcp-notes-3"
    assert connector_id("notes", {"mcp-notes-2"}) == "mcp-notes"
    # A name that itself ends in -2 still gets an id no one has.
    taken = {"mcp-notes", "mcp-notes-2"}
    cid = connector_id("notes-2", taken)
    assert cid not in taken and CONNECTOR_ID.fullmatch(cid)


@pytest.mark.parametrize("name", ["", "   ", "!!!", "__", "日本"])
def test_connector_id_needs_letters(name):
    with pytest.raises(NamingError, match="no letters or digits"):
        connector_id(name, set())


# -- model-visible names (pure) ---------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    "search", "a.b", "with space", "slash/name", "café", "日本語", "", "x" * 200, "tab\tnew\nline",
    "a" * 52, "a" * 53, "dash-and_underscore",
])
def test_visible_name_always_valid(raw):
    name = visible_name("mcp-notes", raw, set())
    assert VISIBLE.fullmatch(name), name
    assert name.startswith("mcp-notes__")


def test_visible_name_rules():
    assert visible_name("mcp-notes", "search", set()) == "mcp-notes__search"
    assert visible_name("mcp-notes", "a.b c/d", set()) == "mcp-notes__a_b_c_d"
    assert visible_name("recall", "search_memories", set()) == "recall__search_memories"
    # exactly 64 characters still fits without a hash; 65 gets one
    fits = "a" * (64 - len("mcp-notes__"))
    assert visible_name("mcp-notes", fits, set()) == f"mcp-notes__{fits}"
    long = visible_name("mcp-notes", fits + "a", set())
    assert len(long) == 64 and long.endswith("_" + short_hash("mcp-notes", fits + "a"))


def test_long_names_shortened_with_stable_distinct_hash():
    a = visible_name("mcp-notes", "x" * 70 + "_one", set())
    b = visible_name("mcp-notes", "x" * 70 + "_two", set())
    assert a != b and len(a) <= 64 and len(b) <= 64
    assert a == visible_name("mcp-notes", "x" * 70 + "_one", set())  # stable across calls/processes
    assert short_hash("mcp-notes", "t") != short_hash("mcp-other", "t")


def test_collision_gets_hash():
    first = visible_name("mcp-notes", "a.b", set())
    second = visible_name("mcp-notes", "a_b", {first})
    assert first == "mcp-notes__a_b"
    assert second != first and VISIBLE.fullmatch(second) and second.startswith("mcp-notes__a_b_")


# -- names through the registry ---------------------------------------------------------------

def _names(svc, cid="mcp-x"):
    return {r.tool: r.name for r in svc.tools.list(cid)}


def test_colliding_tools_keep_their_own_name_and_class(svc):
    svc.tools.register("mcp-x", [spec("a.b", READ), spec("a_b", DESTRUCTIVE)])
    names = _names(svc)
    assert len(set(names.values())) == 2
    assert all(VISIBLE.fullmatch(n) for n in names.values())
    dotted, under = svc.tools.get(names["a.b"]), svc.tools.get(names["a_b"])
    assert (dotted.tool, dotted.tool_class) == ("a.b", ToolClass.READ)
    assert (under.tool, under.tool_class) == ("a_b", ToolClass.DESTRUCTIVE)

    # Re-listing in the other order, or with one of them missing for a while, moves no name.
    svc.tools.register("mcp-x", [spec("a_b", DESTRUCTIVE), spec("a.b", READ)])
    assert _names(svc) == names
    svc.tools.register("mcp-x", [spec("a_b", DESTRUCTIVE)])
    assert _names(svc) == {"a_b": names["a_b"]}
    svc.tools.register("mcp-x", [spec("a_b", DESTRUCTIVE), spec("a.b", READ)])
    assert _names(svc) == names
    # A newcomer whose sanitised name collides with both gets a third name.
    svc.tools.register("mcp-x", [spec("a_b", DESTRUCTIVE), spec("a.b", READ), spec("a b", READ)])
    assert len(set(_names(svc).values())) == 3

    # The person's class is keyed on (connector, raw name): setting one leaves the other alone.
    svc.tools.set_class(names["a_b"], "read")
    assert svc.tools.get(names["a_b"]).class_source is ClassSource.USER
    dotted = svc.tools.get(names["a.b"])
    assert (dotted.tool_class, dotted.class_source) == (ToolClass.READ, ClassSource.HINTS)
    svc.tools.set_class(names["a.b"], "write")
    assert svc.tools.get(names["a_b"]).tool_class is ToolClass.READ
    svc.tools.reset_class(names["a.b"])
    assert svc.tools.get(names["a_b"]).tool_class is ToolClass.READ
    assert svc.tools.get(names["a.b"]).class_source is ClassSource.HINTS


def test_mapping_survives_restart(svc, home):
    from palui.service import Service

    long_raw = "very.long." + "y" * 80
    svc.tools.register("mcp-x", [spec("a.b", READ), spec("a_b", DESTRUCTIVE), spec(long_raw)])
    names = _names(svc)
    assert len(names[long_raw]) <= 64
    svc.tools.set_class(names["a_b"], "write")
    svc.db.close()

    again = Service()
    try:
        again.tools.register("mcp-x", [spec(long_raw), spec("a_b", DESTRUCTIVE), spec("a.b", READ)])
        assert _names(again) == names
        assert again.tools.get(names["a_b"]).tool_class is ToolClass.WRITE
        assert again.tools.get(names["a.b"]).tool_class is ToolClass.READ
        assert again.tools.get(names["a.b"]).tool == "a.b"
    finally:
        again.db.close()


def test_same_tool_name_on_two_connectors(svc):
    svc.tools.register("mcp-a", [spec("search", READ)])
    svc.tools.register("mcp-b", [spec("search", DESTRUCTIVE)])
    assert svc.tools.get("mcp-a__search").tool_class is ToolClass.READ
    assert svc.tools.get("mcp-b__search").tool_class is ToolClass.DESTRUCTIVE


def test_a_connector_name_longer_than_the_limit_is_refused():
    from palui.connectors.naming import MAX_CONNECTOR_NAME as MAX

    assert connector_id("x" * MAX, set()) == "mcp-" + "x" * 40  # the id is cut, the name kept
    with pytest.raises(NamingError, match=f"at most {MAX} characters"):
        connector_id("x" * (MAX + 1), set())
