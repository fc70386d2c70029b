"""An argument value normalised for marks (spec §4), and where each part of it came from in the value:
so a mark can quote the value's own spelling of the part that matched. Pure.

The normalisation is :func:`palui.text.escape.normalize_for_marks` (NFKC, hidden code points removed,
case-folded, whitespace runs as one space, stripped). A value of printable ASCII, tabs and line feeds
(most values) is lower-cased and its whitespace runs collapsed with two regex passes, and its offsets
kept as one segment per stretch between runs of two or more whitespace characters. Otherwise it is
done piece by piece: printable ASCII between spaces lower-cased as a block, anything else one base
character at a time, with the combining marks and hidden code points after it (NFKC composes within such
a cluster). The result can differ from ``normalize_for_marks`` only where NFKC composes across base
characters (Hangul jamo): then a part is not found, never misplaced.
"""

from __future__ import annotations

import re
import unicodedata

from palui.text.escape import is_hidden, strip_hidden

_PIECE = re.compile(r"[ \t\n]+|[^ \t\n]+")
_NOT_PLAIN = re.compile(r"[^\x20-\x7e\t\n]")
_GAP = re.compile(r"[ \t\n]+")
_LONG_GAP = re.compile(r"[ \t\n]{2,}")
_WS = re.compile(r"\s")


class OffsetMap:
    """``value`` normalised (``text``), with :meth:`span` giving back the value's offsets of a part.

    Built of segments, each starting at a position of ``text``: a *plain* segment (printable ASCII
    words with one whitespace character between them) maps its characters one to one onto the value
    from an offset; a *mapped* one lists each character's start and end offsets in the value (a
    character may come from several: a letter with its combining mark, a run of spaces).
    """

    def __init__(self, value: str) -> None:
        self.value = value
        self._parts: list[str] = []
        self._at: list[int] = []  # where each segment starts in ``text``
        self._plain: list[int] = []  # for a plain segment the value offset of its first character, else -1
        self._starts: list[list[int]] = []  # for a mapped segment each character's offsets, else []
        self._ends: list[list[int]] = []
        self._n = 0
        self._space = True  # the last character is a space, or there is none yet (no space is kept then)
        self._open = False  # the last plain segment goes on with the next plain piece
        if _NOT_PLAIN.search(value) is None:
            self._plain_value(value)
            return
        for m in _PIECE.finditer(value):
            piece, at = m.group(), m.start()
            if piece[0] in " \t\n":
                self._gap(at, m.end())
            elif piece.isascii() and piece.isprintable():
                self._block(piece, at)
            else:
                self._clusters(piece, at)
        text = "".join(self._parts)
        self.text = text[:-1] if text.endswith(" ") else text  # a trailing space is not kept

    def _plain_value(self, value: str) -> None:
        """Printable ASCII, tabs and line feeds: a plain segment after each run of 2+ whitespace characters."""
        self.text = _GAP.sub(" ", value).strip(" ").lower()
        lead = len(value) - len(value.lstrip(" \t\n"))
        self._at, self._plain, self._starts, self._ends = [0], [lead], [[]], [[]]
        shift = lead  # value offset minus text offset, after the runs so far
        for m in _LONG_GAP.finditer(value, lead):
            if m.end() == len(value):
                break
            self._at.append(m.end() - shift - (m.end() - m.start()) + 1)
            self._plain.append(m.end())
            self._starts.append([])
            self._ends.append([])
            shift += m.end() - m.start() - 1

    def _gap(self, at: int, end: int) -> None:
        if not self._space and end - at == 1 and self._plain and self._plain[-1] >= 0:
            self._parts.append(" ")  # one whitespace character in plain text: one space, offsets one to one
            self._n += 1
            self._space = self._open = True
        else:
            self._char(" ", at, end)

    def _block(self, piece: str, at: int) -> None:
        if not self._open:
            self._at.append(self._n)
            self._plain.append(at)
            self._starts.append([])
            self._ends.append([])
        self._parts.append(piece.lower())
        self._n += len(piece)
        self._space = self._open = False

    def _clusters(self, piece: str, at: int) -> None:
        i, n = 0, len(piece)
        while i < n:
            j = i + 1
            while j < n and (unicodedata.combining(piece[j]) or is_hidden(piece[j])):
                j += 1
            for ch in strip_hidden(unicodedata.normalize("NFKC", strip_hidden(piece[i:j]))).casefold():
                self._char(ch, at + i, at + j)
            i = j

    def _char(self, ch: str, start: int, end: int) -> None:
        self._open = False
        if _WS.match(ch):
            if self._space:
                if self._n and self._plain[-1] < 0:
                    self._ends[-1][-1] = end  # a run of spaces is one space
                return
            ch = " "
        if not self._at or self._plain[-1] >= 0:
            self._at.append(self._n)
            self._plain.append(-1)
            self._starts.append([])
            self._ends.append([])
        self._starts[-1].append(start)
        self._ends[-1].append(end)
        self._parts.append(ch)
        self._n += 1
        self._space = ch == " "

    def _of(self, p: int) -> tuple[int, int]:
        lo, hi = 0, len(self._at)  # the last segment starting at or before p (binary search)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self._at[mid] <= p else (lo, mid)
        k = lo
        off = p - self._at[k]
        if self._plain[k] >= 0:
            return self._plain[k] + off, self._plain[k] + off + 1
        return self._starts[k][off], self._ends[k][off]

    def span(self, a: int, b: int) -> tuple[int, int]:
        """The offsets in the value of ``text[a:b]`` (``0 <= a < b <= len(text)``)."""
        return self._of(a)[0], self._of(b - 1)[1]
