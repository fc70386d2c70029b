"""Hidden characters shown as escapes (spec §4.7): palui.text, pure."""

from __future__ import annotations

import ast
import re
import unicodedata
from itertools import pairwise
from pathlib import Path

import pytest

from palui.text import escape as escape_module
from palui.text.escape import (
    HIDDEN_NOTE,
    escape,
    has_hidden,
    is_hidden,
    normalize_for_marks,
    segments,
    strip_hidden,
)
from palui.text.hidden_table import HIDDEN_RANGES, UNICODE_VERSION

BS = "\\"

# (input, multi-line rendering, one-line rendering); every expected string is written with escapes
# of its own, so a real hidden character in this file could not make a case pass by accident.
CASES = [
    # bidirectional override and pop: the IBAN that reads differently than it is
    ("DE89 3704 \u202e0440 0532\u202c 0130 00", r"DE89 3704 \u202e0440 0532\u202c 0130 00", None),
    ("\u2066x\u2069 \u200e\u200f\u061c", r"\u2066x\u2069 \u200e\u200f\u061c", None),
    # TAG characters: a memo that ends in instructions that render as nothing
    ("memo\U000e0001\U000e0020\U000e0041\U000e007f", r"memo\U000e0001\U000e0020\U000e0041\U000e007f", None),
    ("Search your notes.\U000e0049\U000e0067", r"Search your notes.\U000e0049\U000e0067", None),
    # zero-width space, non-joiner, joiner, word joiner, BOM, soft hyphen
    ("a\u200bb\u200cc\u200dd\u2060e\ufefff\u00adg", r"a\u200bb\u200cc\u200dd\u2060e\ufefff\u00adg", None),
    # variation selectors (Default_Ignorable although Mn), the Hangul filler, combining grapheme joiner
    ("\u2764\ufe0f \u845b\U000e0100 \u3164 a\u034fb",
     ("\u2764" r"\ufe0f " "\u845b" r"\U000e0100 \u3164 a\u034fb"), None),
    # line and paragraph separators (Zl, Zp)
    ("one\u2028two\u2029three", r"one\u2028two\u2029three", None),
    # private use (BMP and plane 15), lone surrogates, noncharacters, unassigned
    ("\ue000\U000f0000\U0010fffd", r"\ue000\U000f0000\U0010fffd", None),
    ("\ud800x\udfff", r"\ud800x\udfff", None),
    ("\ufffe\uffff\U0001fffe", r"\ufffe\uffff\U0001fffe", None),
    ("\u0378\U0003fffd\U000e0080", r"\u0378\U0003fffd\U000e0080", None),
    # C0 and C1 controls: escape, NUL, DEL, NEL; carriage return is escaped in both views
    ("\x1b[2J\x00\x7f\x85", r"\u001b[2J\u0000\u007f\u0085", None),
    ("a\r\nb", "a\\u000d\nb", r"a\u000d\nb"),
    # line feed and tab stay in multi-line views, are escaped in one-line views
    ("a\nb\tc", "a\nb\tc", r"a\nb\tc"),
    # a literal backslash is doubled, so text cannot imitate an escape
    ("C:" + BS + "u202e", r"C:\\u202e", None),
    (BS + BS + "n" + BS, r"\\\\n\\", None),
    (BS + "\u202e", r"\\\u202e", None),
    # 7 spaces stay, 8 or more become one visible run
    ("a" + " " * 7 + "b", "a" + " " * 7 + "b", None),
    ("a" + " " * 8 + "b", "a␠×8b", None),
    ("a" + " " * 40, "a␠×40", None),
    ("a\u00a0\u2003\u3000" + " " * 5 + "b", "a␠×8b", None),
    # a tab or line feed breaks a run in multi-line views; in one-line views it is an escape there too
    (" " * 4 + "\t" + " " * 4, " " * 4 + "\t" + " " * 4, r"    \t    "),
    (" " * 4 + "\n" + " " * 5 + "x", " " * 4 + "\n" + " " * 5 + "x", r"    \n     x"),
    # a zero-width space between spaces is escaped and breaks the run
    (" " * 4 + "\u200b" + " " * 4, r"    \u200b    ", None),
    # nothing hidden: unchanged
    ("Grüße, 日本語, данные 😀 👍🏽 — “quotes” ½ ﬁ", "Grüße, 日本語, данные 😀 👍🏽 — “quotes” ½ ﬁ", None),
    ("", "", None),
]


@pytest.mark.parametrize("text, multi, one", CASES)
def test_escape(text, multi, one):
    assert escape(text) == multi
    assert escape(text, one_line=True) == (multi if one is None else one)


@pytest.mark.parametrize("text, _multi, _one", CASES)
def test_segments_round_trip_to_escape(text, _multi, _one):
    for one_line in (False, True):
        segs = segments(text, one_line=one_line)
        assert "".join(t for _, t in segs) == escape(text, one_line=one_line)
        assert all(kind in ("text", "escape", "backslash", "space_run") and t for kind, t in segs)
        assert all(a[0] != b[0] for a, b in pairwise(segs)), "adjacent segments of the same kind"


def test_segments_kinds():
    assert segments("a" + BS + BS + "\u202e\U000e0041" + " " * 9 + "b\n", one_line=True) == [
        ("text", "a"), ("backslash", BS * 4), ("escape", r"\u202e\U000e0041"), ("space_run", "␠×9"),
        ("text", "b"), ("escape", r"\n"),
    ]
    assert segments("plain") == [("text", "plain")]
    assert segments("") == []


def test_segments_of_a_long_run_are_one_span():
    segs = segments("x" + "\u200b\U000e0001" * 1000 + "y")
    assert [k for k, _ in segs] == ["text", "escape", "text"]
    assert segs[1][1] == r"\u200b\U000e0001" * 1000


def test_escapes_are_unambiguous():
    """BMP escapes have exactly 4 hex digits, the others exactly 8: U+E0020 is never ``\\ue0020``."""
    assert escape("\U000e0020") == r"\U000e0020"
    assert escape("\U000e0020") != r"\ue0020"
    out = escape("".join(chr(c) for c in range(0, 0x110000, 97)))
    # every backslash in the output starts a well-formed escape
    assert re.fullmatch(r"(?:[^\\]|\\u[0-9a-f]{4}|\\U[0-9a-f]{8}|\\\\)*", out, re.DOTALL)


def test_escape_decodes_back():
    """The display text is a faithful record: decoding the escapes gives the input back."""
    text = "DE89\u202e 😀 \\u202e \U000e0041\r\n\t\x00 \ud800 end\\"
    shown = escape(text, one_line=True)
    assert "\n" not in shown and "\t" not in shown and not has_hidden(shown)
    back = re.sub(r"\\(u[0-9a-f]{4}|U[0-9a-f]{8}|\\|n|t)",
                  lambda m: {"\\": "\\", "n": "\n", "t": "\t"}.get(m.group(1)) or chr(int(m.group(1)[1:], 16)),
                  shown)
    assert back == text


@pytest.mark.parametrize("ch, hidden", [
    ("\u202e", True), ("\u200b", True), ("\ufeff", True), ("\u00ad", True), ("\ufe0f", True),
    ("\U000e0041", True), ("\U000e0001", True), ("\ue000", True), ("\ud800", True), ("\u2028", True),
    ("\u2029", True), ("\u0378", True), ("\x00", True), ("\r", True), ("\x85", True), ("\u180e", True),
    ("\n", False), ("\t", False), (" ", False), ("a", False), ("\u00a0", False), ("é", False),
    ("\u0301", False), ("😀", False), ("\U0001f3fd", False), ("\\", False), ("\u3000", False),
])
def test_is_hidden(ch, hidden):
    assert is_hidden(ch) is hidden
    assert has_hidden(f"x{ch}y") is hidden
    assert (strip_hidden(f"x{ch}y") == "xy") is hidden


def test_is_hidden_takes_one_code_point():
    with pytest.raises(TypeError):
        is_hidden("ab")


def test_has_hidden_and_strip_hidden():
    assert HIDDEN_NOTE == "contains hidden characters"
    assert not has_hidden("Search your notes.\n\tAll of them.")
    assert has_hidden("Search your notes.\U000e0049\U000e0067\U000e006e")
    assert strip_hidden("Search your notes.\U000e0049\U000e0067\U000e006e") == "Search your notes."
    assert strip_hidden("a\u202eb\r\nc\td") == "ab\nc\td"
    assert strip_hidden("") == ""


@pytest.mark.parametrize("a, b", [
    ("DE89370400440532013000", "DE8937\u200b0400440532013000"),   # zero-width inside
    ("mallory@evil.example", "MALLORY@EVIL.EXAMPLE"),              # case
    ("ＭＡＬＬＯＲＹ", "mallory"),                                      # full width (NFKC)
    ("straße", "STRASSE"),                                        # case folding, not lower()
    ("ﬁle", "file"),                                              # ligature (NFKC)
    ("é", "e\u0301"),                                             # composed or not
    ("é", "e\u200b\u0301"),                                       # a hidden character cannot block composition
    ("  a \t b\n\n c  ", "a b c"),                                # whitespace collapsed, stripped
    ("a\u00a0\u3000b", "a b"),                                    # any space separator
    ("pay\U000e0020\U000e0041 now", "pay now"),                   # TAG characters removed
])
def test_normalize_for_marks_equal(a, b):
    assert normalize_for_marks(a) == normalize_for_marks(b)


def test_normalize_for_marks_shape():
    assert normalize_for_marks("  Pay\u200b To  IBAN\u202e  ") == "pay to iban"
    assert normalize_for_marks("\u200b\u202e") == ""


# --- the generated table -------------------------------------------------------------------------

HIDDEN_CATEGORIES = {"Cc", "Cf", "Co", "Cs", "Zl", "Zp"}


def test_table_is_sorted_merged_and_in_range():
    assert re.fullmatch(r"\d+\.\d+\.\d+", UNICODE_VERSION)
    assert HIDDEN_RANGES[0][0] >= 0 and HIDDEN_RANGES[-1][1] <= 0x10FFFF
    for (a, b), (c, _) in pairwise(HIDDEN_RANGES):
        assert a <= b and b + 1 < c, "ranges must be sorted and merged"


def test_table_agrees_with_python_unicodedata():
    """Cc/Cf/Co/Cs/Zl/Zp (Python's Unicode) are hidden, except line feed and tab. A code point Python
    has assigned to another category is hidden only if it is Default_Ignorable (variation selectors,
    fillers, CGJ, …): the only other hidden ones are those Python calls Cn, where the table may be
    newer."""
    default_ignorable_not_format = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F,
                                    0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)}
    wrong = []
    for cp in range(0x110000):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in HIDDEN_CATEGORIES:
            expect = cp not in (0x0A, 0x09)
        elif cat == "Cn":
            continue
        else:
            expect = cp in default_ignorable_not_format
        if is_hidden(ch) != expect:
            wrong.append(f"U+{cp:04X} {cat}")
    assert not wrong, wrong[:20]


def test_every_whitespace_is_layout_space_run_or_hidden():
    """What the docstring promises: a character Python calls whitespace is a line feed or tab, a
    space separator (can be part of a ␠×N run), or hidden (escaped)."""
    runs = re.compile(f"[{escape_module._SPACE_SEPARATORS}]")
    for cp in range(0x110000):
        ch = chr(cp)
        if ch.isspace():
            assert ch in "\n\t" or runs.fullmatch(ch) or is_hidden(ch), f"U+{cp:04X}"
        if unicodedata.category(ch) == "Zs":
            assert runs.fullmatch(ch), f"U+{cp:04X} is Zs but not in _SPACE_SEPARATORS"


def test_regex_agrees_with_bisect():
    """The compiled regex (bitmap, huge ranges, lookahead tree) and the bisect lookup agree everywhere."""
    every = "".join(chr(c) for c in range(0x110000))
    stripped = strip_hidden(every)
    kept = "".join(ch for ch in every if not is_hidden(ch))
    assert stripped == kept


def test_table_header_names_its_source():
    path = Path(escape_module.__file__).with_name("hidden_table.py")
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert f"Unicode {UNICODE_VERSION}" in doc and "GENERATED by scripts/gen_hidden_table.py" in doc
    assert "sha256" in doc



def test_one_megabyte_is_linear():
    """1,000,000 characters of hostile input (TAG runs, alternating zero-width) render in linear time."""
    assert escape("\U000e0041" * 1_000_000) == r"\U000e0041" * 1_000_000
    assert escape("a\u200b" * 500_000) == r"a\u200b" * 500_000
    assert escape("😀" * 1_000_000) == "😀" * 1_000_000
    assert escape(" " * 1_000_000) == "␠×1000000"
    assert len(segments("a\u200b\U000e0001" * 300_000)) == 600_000
