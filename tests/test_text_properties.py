"""Property tests (Hypothesis) of the one escaper and of tool naming.

- The escaper (spec §4.7): for every code point, and for any text, the escaped view reads back as
  exactly the text (:func:`read_back`, written here from the rules in :mod:`palui.text.escape`, is its
  inverse) and holds no code point of the escaped classes: no hidden code point, no run of 8 or more
  space separators, and in one-line views no line feed or tab.
- Naming (spec §7): any connector name gives a valid id or a clear NamingError; any listing of raw tool
  names gives valid, distinct model-visible names, stable when the listing is stored again.
"""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from palui.connectors.base import ToolSpec
from palui.connectors.naming import MAX_CONNECTOR_NAME, connector_id, visible_name
from palui.connectors.registry import sync_tools
from palui.errors import NamingError
from palui.store.db import Database
from palui.text.escape import MIN_SPACE_RUN, escape, is_hidden, segments

SPACE_SEPARATORS = "\u0020\u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u202f\u205f\u3000"
_VIEW = re.compile(r"\\(\\|n|t|u[0-9a-f]{4}|U[0-9a-f]{8})|␠×([0-9]+)")
VISIBLE = re.compile(r"[A-Za-z0-9_-]{1,64}")
CONNECTOR_ID = re.compile(r"mcp-[a-z0-9]+(-[a-z0-9]+)*")

# Every code point, surrogates included (a Python string can hold a lone one).
any_char = st.characters(codec=None, categories=None, exclude_categories=())
# Text that reaches the escaper's special cases often: backslashes, the run marker, spaces, escapes' letters.
tricky = st.text(st.one_of(any_char, st.sampled_from(["\\", "␠", "×", "8", "u", "n", "\n", "\t", " ", "\u3000",
                                                      "\u202e", "\x1b", "\U000e0041"])), max_size=60)


def read_back(view: str) -> str:
    """The text an escaped view shows: the inverse of :func:`escape` (in either view)."""
    out, pos = [], 0
    for m in _VIEW.finditer(view):
        if "\\" in view[pos:m.start()] or "␠" in view[pos:m.start()]:
            raise AssertionError(f"an unpaired backslash or a bare ␠ in the view {view!r}")
        out.append(view[pos:m.start()])
        code, run = m.group(1), m.group(2)
        if run is not None:
            out.append(" " * int(run))  # a run of space separators; the kinds are not kept (spec §4.7)
        elif code == "\\":
            out.append("\\")
        elif code in ("n", "t"):
            out.append("\n" if code == "n" else "\t")
        else:
            out.append(chr(int(code[1:], 16)))
        pos = m.end()
    rest = view[pos:]
    assert "\\" not in rest and "␠" not in rest, view
    out.append(rest)
    return "".join(out)


def spaces_as_plain(s: str) -> str:
    """``s`` with every run of 8+ space separators made plain spaces: what :func:`read_back` can give back."""
    return re.sub(f"[{SPACE_SEPARATORS}]{{{MIN_SPACE_RUN},}}", lambda m: " " * len(m.group()), s)


def check_view(s: str, one_line: bool) -> None:
    view = escape(s, one_line=one_line)
    assert read_back(view) == spaces_as_plain(s)
    assert not any(is_hidden(ch) for ch in view), view
    assert not re.search(f"[{SPACE_SEPARATORS}]{{{MIN_SPACE_RUN},}}", view), view
    if one_line:
        assert "\n" not in view and "\t" not in view
    assert "".join(t for _, t in segments(s, one_line=one_line)) == view


@pytest.mark.slow  # every one of the 1.1 million code points: about 10 s of CPU alone, too much for the fast net
def test_every_code_point_alone_reads_back_and_shows_no_escaped_class():
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        for one_line in (False, True):
            view = escape(ch, one_line=one_line)
            assert read_back(view) == ch, (hex(cp), view)
            assert not any(is_hidden(c) for c in view), hex(cp)
            if one_line:
                assert "\n" not in view and "\t" not in view
            if is_hidden(ch) or ch in "\\␠" or (one_line and ch in "\n\t"):
                assert view != ch, hex(cp)
            else:
                assert view == ch, hex(cp)


@settings(max_examples=400, deadline=None)
@given(st.text(any_char, max_size=200), st.booleans())
def test_any_text_reads_back_and_shows_no_escaped_class(s, one_line):
    check_view(s, one_line)


@settings(max_examples=400, deadline=None)
@given(tricky, st.booleans())
def test_text_that_imitates_an_escape_or_a_run_reads_back_as_itself(s, one_line):
    check_view(s, one_line)


@settings(max_examples=300, deadline=None)
@given(st.text(any_char, max_size=MAX_CONNECTOR_NAME + 20), st.sets(st.text("abc-", max_size=6), max_size=5))
def test_any_connector_name_gives_a_valid_unique_id_or_a_naming_error(name, taken_slugs):
    taken = {f"mcp-{t}" for t in taken_slugs}
    try:
        cid = connector_id(name, taken)
    except NamingError as e:
        assert str(e)
        return
    assert CONNECTOR_ID.fullmatch(cid) and "__" not in cid, cid
    assert cid not in taken
    assert cid == connector_id(name, taken)  # stable: the same name and ids give the same id


raw_names = st.lists(st.one_of(st.text(any_char, min_size=1, max_size=80),
                               st.text("ab._-", min_size=1, max_size=70)), unique=True, max_size=12)


@settings(max_examples=150, deadline=None)
@given(raw_names, st.sampled_from(["mcp-x", "mcp-" + "long" * 12]))
@example(["0" * 10 + "\ud800"], "mcp-" + "long" * 12)  # too long: hashed, and the hash took no lone surrogate
def test_any_tool_names_give_valid_distinct_stable_visible_names(names, cid):
    assigned: dict[str, str] = {}
    for raw in names:
        name = visible_name(cid, raw, set(assigned.values()))
        assert VISIBLE.fullmatch(name), name
        assert name not in assigned.values(), (raw, name)
        assigned[raw] = name
    # Stable: the same tool asked again, with the others' names taken, keeps its name.
    for raw, name in assigned.items():
        assert visible_name(cid, raw, set(assigned.values()) - {name}) == name


# What a server can list: the MCP SDK's JSON parser refuses a lone surrogate, which SQLite could not store.
stored_names = st.lists(st.one_of(st.text(st.characters(codec="utf-8"), min_size=1, max_size=80),
                                  st.text("ab._-", min_size=1, max_size=70)), unique=True, max_size=12)


@settings(max_examples=25, deadline=None)
@given(stored_names)
def test_a_stored_listing_keeps_its_names_when_listed_again(tmp_path_factory, names):
    db = Database(tmp_path_factory.mktemp("naming") / "palui.db")
    try:
        with db.write() as c:
            c.execute("INSERT INTO connectors (id, kind, name, created_at) VALUES ('mcp-x', 'mcp', 'x', 0)")
        specs = [ToolSpec(n, "d", {"type": "object"}, None) for n in names]
        first = sync_tools(db, "mcp-x", specs, builtin=False).added
        again = sync_tools(db, "mcp-x", list(reversed(specs)), builtin=False).added
        rows = db.all("SELECT raw_name, name FROM tools WHERE connector_id = 'mcp-x'")
        stored = {r["raw_name"]: r["name"] for r in rows}
    finally:
        db.close()
    assert again == []
    assert sorted(first) == sorted(stored.values()) and len(set(first)) == len(first) == len(names)
    assert all(VISIBLE.fullmatch(n) for n in first)
