"""Hidden characters shown as unambiguous escapes, so what the person approves is what they see.

spec §4.7: every surface shows control, format (bidirectional, zero-width) and TAG characters
as escapes. A code point is *hidden* when its General_Category is Cc (except line feed and tab), Cf,
Co, Cs, Cn, Zl or Zp, or when it is Default_Ignorable_Code_Point; the generated
:mod:`palui.text.hidden_table` lists them (its ``UNICODE_VERSION`` says which Unicode). Unassigned
code points are hidden too, so a table older than the text errs towards showing more escapes.

The rendering, in :func:`escape` and :func:`segments`:

- a hidden code point ``c`` becomes ``\\uXXXX`` (4 lower-case hex digits) when ``c <= U+FFFF``,
  else ``\\UXXXXXXXX`` (8 digits): U+202E is ``\\u202e``, U+E0020 is ``\\U000e0020``;
- a literal backslash becomes ``\\\\``, so plain text cannot imitate an escape, and a literal ``␠`` (U+2420,
  the first character of a run's marker) becomes ``\\u2420``, so plain text cannot imitate a run either:
  the escaped view reads back as exactly one text;
- line feed and tab stay as they are in multi-line views; in one-line views they become ``\\n``
  and ``\\t``. Carriage return, like every other control, is always ``\\u000d``;
- a run of 8 or more space separators (General_Category Zs: space, no-break space, the en/em/thin
  spaces, ideographic space, …) becomes ``␠×N`` with N the run's length. Every other whitespace
  character is either a line feed or tab (never part of a run) or hidden (escaped one by one).

Pure: no I/O. Linear in the length of the input (these run over tool outputs of up to 1,000,000
characters).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right

from palui.text.hidden_table import HIDDEN_RANGES, UNICODE_VERSION

__all__ = [
    "HIDDEN_NOTE", "MIN_SPACE_RUN", "TRAILING_SPACES", "UNICODE_VERSION", "escape", "has_hidden", "is_hidden",
    "normalize_for_marks", "segments", "strip_hidden",
]

HIDDEN_NOTE = "contains hidden characters"
"""The marker text a surface shows next to a value for which :func:`has_hidden` is true."""

MIN_SPACE_RUN = 8
"""Runs of this many space separators or more are shown as ``␠×N``."""

# General_Category Zs (Unicode 14 through 17): the whitespace that is neither hidden nor a line feed or tab.
_SPACE_SEPARATORS = "\u0020\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"

#: A run of space separators at the end of a text: a streamed piece holds it back until the run is
#: complete, since 8 or more of them are shown as one ``␠×N`` (:class:`palui.text.display.StreamShown`).
TRAILING_SPACES = re.compile(f"[{_SPACE_SEPARATORS}]+$")
_STARTS = tuple(start for start, _ in HIDDEN_RANGES)
_Ranges = list[tuple[int, int]]


def _class(ranges: _Ranges) -> str:
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


def _span(ranges: _Ranges) -> str:
    return f"(?=[\\U{ranges[0][0]:08x}-\\U{ranges[-1][1]:08x}])"


def _search_tree(ranges: _Ranges, leaf: int = 16) -> str:
    """A regex for one code point in ``ranges`` (sorted), as a balanced tree of one-range lookaheads."""
    if len(ranges) <= leaf:
        return f"[{_class(ranges)}]"
    left, right = ranges[:len(ranges) // 2], ranges[len(ranges) // 2:]
    return f"(?:{_span(left)}{_search_tree(left, leaf)}|{_span(right)}{_search_tree(right, leaf)})"


def _hidden_pattern(extra_bmp: str = "") -> str:
    """A regex for a run of hidden code points (one or more; a run may come out as several matches).

    The regex engine tests a character class as a bitmap for the BMP followed by its ranges above
    U+FFFF one by one, in the order given: a class of all ~400 astral ranges would cost every emoji
    ~400 tests. So BMP code points get the bitmap alone; above it, the few huge ranges (unassigned
    planes, TAG characters, private use) come first, largest first, and the other ranges are found
    through a balanced tree of lookaheads. Typical text costs one bitmap test per character.
    """
    bmp = [(a, min(b, 0xFFFF)) for a, b in HIDDEN_RANGES if a <= 0xFFFF]
    astral = [(max(a, 0x10000), b) for a, b in HIDDEN_RANGES if b > 0xFFFF]
    huge = sorted((r for r in astral if r[1] - r[0] >= 0x800), key=lambda r: r[0] - r[1])
    rest = [r for r in astral if r[1] - r[0] < 0x800]
    return (f"[{_class(bmp)}{extra_bmp}]+"
            f"|(?=[\\U00010000-\\U0010ffff])(?:[{_class(huge)}]+|{_span(rest)}{_search_tree(rest)})")


_LAYOUT_CLASS = "\\n\\t"  # line feed and tab, escaped in one-line views only
_MARKER_CLASS = "\\u2420"  # ␠, which starts a run's marker ␠×N: escaped in every view
_LAYOUT = {"\n": "\\n", "\t": "\\t"}
_RUN = f"[{_SPACE_SEPARATORS}]{{{MIN_SPACE_RUN},}}"
_WS = re.compile(r"\s+")
_SPACES = " " * MIN_SPACE_RUN


_COMPILED: dict[str, re.Pattern[str]] = {}


def _patterns() -> dict[str, re.Pattern[str]]:
    """The regexes, compiled on first use: a few hundred ranges take tens of milliseconds to compile,
    which every command would otherwise pay at start (docs/decisions/0085-a-light-cli-start.md), most of them
    for ASCII text only."""
    if not _COMPILED:
        _COMPILED.update(_compile())
    return _COMPILED


def _compile() -> dict[str, re.Pattern[str]]:
    bmp_hidden = _class([(a, min(b, 0xFFFF)) for a, b in HIDDEN_RANGES if a <= 0xFFFF])
    # Most text has nothing to render: one scan for a character that could start a match (a single
    # character class scans fast), and a substring search for a run of plain spaces.
    trigger = f"\\\\{_SPACE_SEPARATORS.replace(' ', '')}{bmp_hidden}{_MARKER_CLASS}\\U00010000-\\U0010ffff"
    return {
        "hidden": re.compile(_hidden_pattern()),
        "render_multi": re.compile(
            f"(?P<backslash>\\\\+)|(?P<space_run>{_RUN})|(?P<escape>{_hidden_pattern(_MARKER_CLASS)})"),
        "render_one_line": re.compile(
            f"(?P<backslash>\\\\+)|(?P<space_run>{_RUN})|(?P<escape>{_hidden_pattern(_LAYOUT_CLASS + _MARKER_CLASS)})"),
        "trigger_multi": re.compile(f"[{trigger}]"),
        "trigger_one_line": re.compile(f"[{trigger}{_LAYOUT_CLASS}]"),
        "maybe_hidden": re.compile(f"[{bmp_hidden}\\U00010000-\\U0010ffff]"),
    }


def _ascii_plain(s: str) -> bool:
    """Printable ASCII holds no hidden code point (they are all controls there); a fast answer for most text."""
    return s.isascii() and s.isprintable()


def _plain(s: str, one_line: bool) -> bool:
    """Whether ``s`` renders as itself."""
    if _ascii_plain(s):
        return "\\" not in s and _SPACES not in s
    p = _patterns()
    return (p["trigger_one_line"] if one_line else p["trigger_multi"]).search(s) is None and _SPACES not in s


def is_hidden(ch: str) -> bool:
    """Whether the one code point ``ch`` is hidden (spec §4.7; the rule is in the module docstring).

    Raises ``TypeError`` when ``ch`` is not a string of length 1.
    """
    cp = ord(ch)
    i = bisect_right(_STARTS, cp) - 1
    return i >= 0 and cp <= HIDDEN_RANGES[i][1]


def has_hidden(s: str) -> bool:
    """Whether ``s`` has at least one hidden code point: then a surface shows :data:`HIDDEN_NOTE` next to
    it (spec §4.7)."""
    if _ascii_plain(s):
        return False
    p = _patterns()
    return p["maybe_hidden"].search(s) is not None and p["hidden"].search(s) is not None


def control_character(s: str) -> str | None:
    """Where ``s`` holds its first control character (C0, DEL or C1: NUL, a line feed, an escape…), as
    ``U+0000 at character 3``, or None. Such a character in a path, a host or a process argument is refused
    where the value is read (spec §10.4), with this position, before the operating system chokes on it."""
    if _ascii_plain(s):
        return None
    for i, c in enumerate(s, 1):
        if c < " " or "\x7f" <= c <= "\x9f":
            return f"U+{ord(c):04X} at character {i:,}"
    return None


def _escape_char(ch: str) -> str:
    cp = ord(ch)
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _escape_run(run: str) -> str:
    """Escapes of a run of hidden code points (and, in one-line views, line feeds and tabs)."""
    if len(run) == 1:
        return _LAYOUT.get(run) or _escape_char(run)
    # Python's own codec writes \uXXXX and \UXXXXXXXX (lower-case) at C speed; only its \xXX (below
    # U+0100) and \r need rewriting. The run has no backslash, so every backslash starts an escape.
    return run.encode("unicode_escape").decode("ascii").replace("\\x", "\\u00").replace("\\r", "\\u000d")


def _render(m: re.Match[str]) -> str:
    kind, text = m.lastgroup, m.group()
    if kind == "escape":
        return _escape_run(text)
    if kind == "backslash":
        return text * 2
    return f"␠×{len(text)}"


def escape(s: str, *, one_line: bool = False) -> str:
    """``s`` with every hidden code point shown as an escape (spec §4.7).

    Args:
        s: any text (arguments, tool outputs, descriptions), up to ~1,000,000 characters.
        one_line: for one-line views (tables, lists, notifications): line feed and tab are shown as
            ``\\n`` and ``\\t`` too. In multi-line views (the default) they stay as they are.

    Returns:
        The display text: ``"a\\u202eb"`` (with a real U+202E) gives ``a\\u202eb`` (with a backslash),
        ``"C:\\\\u202e"`` gives ``C:\\\\u202e`` (the backslash doubled), 8+ spaces give ``␠×N``.
        A string with nothing to escape is returned unchanged.
    """
    if _plain(s, one_line):
        return s
    return _patterns()["render_one_line" if one_line else "render_multi"].sub(_render, s)


def segments(s: str, *, one_line: bool = False) -> list[tuple[str, str]]:
    """The rendering of :func:`escape` as ``[(kind, text)]``, for a renderer that styles the escapes
    (spec §4.7).

    ``kind`` is ``"text"`` (shown as is), ``"escape"`` (the escapes of a run of consecutive hidden code
    points, and in one-line views of line feeds and tabs: ``"\\u202e\\u200b"``), ``"backslash"`` (a run
    of literal backslashes, each shown as ``\\\\``) or ``"space_run"`` (one ``␠×N``). Adjacent
    segments never have the same kind, so a run of 10,000 TAG characters is one segment, not 10,000
    (one styled span, not 10,000 in a page). ``"".join(t for _, t in segments(s)) == escape(s)``; an
    empty ``s`` gives ``[]``.
    """
    if _plain(s, one_line):
        return [("text", s)] if s else []
    out: list[tuple[str, str]] = []
    escapes: list[str] = []  # a run of hidden code points can come as several matches (BMP, astral)
    pos = 0
    for m in _patterns()["render_one_line" if one_line else "render_multi"].finditer(s):
        start, kind = m.start(), m.lastgroup or "escape"
        if escapes and (start > pos or kind != "escape"):
            out.append(("escape", "".join(escapes)))
            escapes = []
        if start > pos:
            out.append(("text", s[pos:start]))
        if kind == "escape":
            escapes.append(_render(m))
        else:
            out.append((kind, _render(m)))
        pos = m.end()
    if escapes:
        out.append(("escape", "".join(escapes)))
    if pos < len(s):
        out.append(("text", s[pos:]))
    return out


def strip_hidden(s: str) -> str:
    """``s`` with every hidden code point removed; line feeds and tabs are kept (spec §4.7).

    What the model is sent of a tool definition with hidden characters: the person reviews the escaped
    text, the model never gets instructions the person could not see.
    """
    if _ascii_plain(s):
        return s
    p = _patterns()
    return p["hidden"].sub("", s) if p["maybe_hidden"].search(s) else s


def normalize_for_marks(s: str) -> str:
    """``s`` as compared when marking approval arguments (spec §4.6): NFKC, hidden code points removed,
    case-folded, whitespace runs collapsed to one space, stripped.

    Hidden code points are removed before NFKC as well as after it, so that one between a letter and
    its combining mark cannot keep them from composing (``"e\\u200b\\u0301"`` and ``"é"`` compare equal).
    A hidden code point is removed, not turned into a space, even where it separates words (U+2028,
    CR): a value copied without it still matches the text it came from.
    """
    s = unicodedata.normalize("NFKC", strip_hidden(s))
    return _WS.sub(" ", strip_hidden(s).casefold()).strip()
