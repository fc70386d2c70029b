"""Texts that argument values are looked up in when approvals are marked (spec §4): untrusted content,
and the person's own messages. Pure.

A text is normalised once (:func:`palui.text.escape.normalize_for_marks`) and split into *words* (runs
of letters, digits or ``_``). What a value needs — its words, word pairs and word trigrams
(:class:`Grams`) — is then looked up in one pass over the text's words, as set intersections that run
in C: the cost is linear in the text's size, and what is kept is bounded by the values' size (a 1 MB
page never becomes a set of its 170,000 trigrams).

A *field* is a line, list item or quoted string: the text between line breaks, tabs, ``"`` ``'`` ``,``
``;`` ``|`` and brackets, not followed by a colon (a label such as ``Hotel Names:`` or a JSON key). Fields
are read from the text with only its hidden code points removed, as normalisation joins lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from palui.text.escape import normalize_for_marks, strip_hidden

WORD = re.compile(r"\w+")
_SEP = "\\n\\r\\t\"'{}\\[\\]()<>|;,:"
# a field of exactly two words (between separators, not before a colon); the words are groups 1 and 2
_FIELD2 = re.compile(rf"(?<![^{_SEP}])[^\w{_SEP}]*(\w+)[^\w{_SEP}]+(\w+)[^\w{_SEP}]*(?![^{_SEP}])(?![\"' ]*:)")

Pair = tuple[str, str]
Trigram = tuple[str, str, str]


def _wordy(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def has_word(word: str, text: str) -> bool:
    """Whether ``word`` stands in ``text`` as a whole word: no letter, digit or ``_`` right before it
    (when it starts with one) nor right after it (when it ends with one). Both sides normalised.

    One substring search finds the first occurrence; when that one is inside a longer word, one regex
    pass from there decides (never a loop over occurrences: linear in ``len(text)``)."""
    if not word:
        return False
    at = text.find(word)
    if at < 0:
        return False
    end = at + len(word)
    open_start, open_end = _wordy(word[0]), _wordy(word[-1])
    if not (open_start and at > 0 and _wordy(text[at - 1])) and \
            not (open_end and end < len(text) and _wordy(text[end])):
        return True
    pattern = ("(?<!\\w)" if open_start else "") + re.escape(word) + ("(?!\\w)" if open_end else "")
    return re.compile(pattern).search(text, at + 1) is not None


@dataclass
class Grams:
    """Words, word pairs and word trigrams (of normalised text)."""

    words: set[str] = field(default_factory=set)
    pairs: set[Pair] = field(default_factory=set)
    trigrams: set[Trigram] = field(default_factory=set)

    @classmethod
    def of(cls, texts: Iterable[str]) -> Grams:
        """The grams of each normalised text (not across texts)."""
        g = cls()
        for text in texts:
            w = WORD.findall(text)
            g.words.update(w)
            g.pairs.update(zip(w, w[1:], strict=False))
            g.trigrams.update(zip(w, w[1:], w[2:], strict=False))
        return g


class Haystack:
    """One text to look values up in, normalised (``text``), named ``source`` as a mark names it
    (``"web__fetch_page at step 2"``). ``own``: the person's own messages, where any word pair counts;
    else untrusted content, where a pair counts only as a whole field.

    Call :meth:`prepare` with the grams of every value first (one pass); the ``has_*`` methods then
    answer from sets, and look up on their own (another pass) what was not prepared.
    """

    def __init__(self, source: str, raw: str, *, own: bool = False) -> None:
        self.source = source
        self.raw = raw
        self.own = own
        self.text = normalize_for_marks(raw)
        self._words: list[str] | None = None
        self._asked = Grams()
        self.prepared: set[str] = set()  # the normalised values :func:`prepare` was called for
        #: what :meth:`prepare` found; ``pairs``: the whole fields, or for ``own`` any pair
        self.found = Grams()

    def prepare(self, grams: Grams) -> None:
        """Look up which of ``grams`` (not looked up before) this text has, in one pass over its words."""
        if grams.words <= self._asked.words and grams.pairs <= self._asked.pairs and \
                grams.trigrams <= self._asked.trigrams:
            return
        words, pairs = grams.words - self._asked.words, grams.pairs - self._asked.pairs
        trigrams = grams.trigrams - self._asked.trigrams
        if not (words or pairs or trigrams):
            return
        if self._words is None:
            self._words = WORD.findall(self.text)
        w = self._words
        self.found.words |= words.intersection(w)
        self.found.trigrams |= trigrams.intersection(zip(w, w[1:], w[2:], strict=False))
        if pairs:
            self.found.pairs |= pairs.intersection(zip(w, w[1:], strict=False) if self.own else self._fields())
        self._asked.words |= words
        self._asked.pairs |= pairs
        self._asked.trigrams |= trigrams

    def _fields(self) -> Iterator[Pair]:
        # hidden code points go first, as normalisation drops them: "Lux\u200bury Palace" is two words
        for m in _FIELD2.finditer(strip_hidden(self.raw)):
            a, b = m.group(1), m.group(2)
            if a.isascii() and b.isascii():
                yield a.casefold(), b.casefold()  # what normalize_for_marks makes of ASCII words
            else:
                pair = WORD.findall(normalize_for_marks(m.group()))
                if len(pair) == 2:
                    yield pair[0], pair[1]

    def has_word(self, word: str) -> bool:
        """:func:`has_word` over this text; answered from the words found, without a search, when a
        word in it is missing from the text or it is a single word."""
        parts = WORD.findall(word)
        if not self._asked.words.issuperset(parts):
            self.prepare(Grams(words=set(parts)))
        if not all(p in self.found.words for p in parts):
            return False
        if len(parts) == 1 and parts[0] == word:
            return True  # a whole word of the text by construction
        return has_word(word, self.text)


def prepare(haystacks: Sequence[Haystack], values: Iterable[str]) -> None:
    """Prepare every haystack for these normalised values (not done before): their grams computed once,
    each text read once (:meth:`Haystack.prepare`)."""
    new = [v for v in dict.fromkeys(values) if any(v not in h.prepared for h in haystacks)]
    if new:
        grams = Grams.of(new)
        for h in haystacks:
            h.prepare(grams)
            h.prepared.update(new)
