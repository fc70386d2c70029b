"""The parts of a longer argument value that stand in untrusted content (spec §4): what an approval quotes.

A hijacked argument is rarely a page's text verbatim: the model writes "Stay at Luxury Palace, address:
1 Rue de la Paix, 75002 Paris" from two tool results. The approval then quotes the parts that came from
untrusted content, in the value's own spelling, and not the whole value (:func:`find_spans`).

Both sides are compared in the form of :func:`palui.text.escape.normalize_for_marks`. A *word* is a run
of letters, digits or ``_`` in that form; the punctuation and spacing between words are not compared.
A part of the value counts when it is one of:

1. a run of 3 or more consecutive words that stands, word for word, in an untrusted text;
2. a run of 2 words that is a whole *field* of an untrusted text (:mod:`palui.policy.haystack`: a line,
   list item or quoted string, not a label such as ``Hotel Names:`` or a JSON key) — a name a tool
   returned on its own ("Luxury Palace" in a list of hotels);
3. a *unit* that stands as a whole word in an untrusted text: an e-mail or other ``x@y`` address, a URL
   (``scheme://…``, ``www.…``), a domain name (``evil.example``; not ``report.pdf``), a number of 4 or
   more digits (separators allowed: ``75002``, ``+1-555-0100``, ``2024-05-13``; a year alone is not
   one) or any other word of :data:`MIN_UNIT_WORD` characters or more (an IBAN). A unit is the text
   between spaces, ``;``, ``|``, quotes, brackets and commas (not a comma between digits: ``1,000``),
   with :data:`EDGE` characters stripped off its ends (``DE89…,`` is the IBAN; ``a;b`` are two units).

Overlapping parts merge, so each span is maximal (the longest run that matched, not every 3-word
window). Marks stay signal: a span counts only when it holds a unit, or two words outside
:data:`STOP_WORDS` of which one is *significant* (4 or more characters): "of the and", "here are the
notes from" or "thank you for your" is never a span, "Pay to IBAN", "Luxury Palace" and "1 Rue de la
Paix" are; a word in :data:`STOP_WORDS` is not a unit ("whatever", "yourself"); a run or unit that
also stands in the person's own messages does not count.

Cost: each text is a :class:`~palui.policy.haystack.Haystack`, read once per call (linear in its
size); a value is then looked up word by word in sets, and a unit made of several words with one
substring search (:func:`~palui.policy.haystack.has_word`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from palui.policy.haystack import WORD, Haystack, prepare
from palui.policy.offsets import OffsetMap
from palui.policy.rule_of_two import NOT_TLDS

MIN_RUN = 3  # words in a run that counts anywhere in untrusted text (rule 1)
MIN_SIGNIFICANT = 4  # characters of a word that makes a run signal
MIN_UNIT_WORD = 8  # characters of a plain word that counts on its own (an IBAN, a rare word)
MIN_UNIT_DIGITS = 4  # digits of a number that counts on its own
EDGE = "\"'()[]{}<>.,;:!?"  # stripped off the ends of a unit ("DE89…," is the IBAN)

#: Words that say little on their own: English function words and the most frequent verbs and
#: adverbs. A span needs two words outside this list, one of them :func:`significant`; a long word
#: here is not a unit.
STOP_WORDS = frozenset("""
a about above after again against all almost along already also although always am among an and another
any anybody anyone anything anyway are around as at back be because become been before being below
between both but by came can cannot come comes could did do does doing done down during each either else
enough even ever every everybody everyone everything for from further gave get gets give given gives
going got had has have having he hello her here hers herself hi him himself his how however i if in into
is it its itself just keep know knows least less let like likes look looks made make makes many may maybe
me more most much must my myself neither never no nobody none not nothing now of off on once one only onto or
other others otherwise our ours ourselves out over please rather really regards said same says see shall
she should since so some somebody someone something sometimes soon still such sure take takes tell than
thank thanks that the their theirs them themselves then there therefore these they thing things think
this those though through thus till to today together too took toward towards under unless until up upon
us use used using very want wants was we well went were what whatever when whenever where whereas whether
which while who whom whose why will with within without would yes yet you your yours yourself yourselves
""".split())

_SEPS = r"\s;,|\"'<>()\[\]{}"
_UNIT_CHAR = rf"(?:[^{_SEPS}]|(?<=\d),(?=\d))"
# the text between separators that may be a unit: 8+ characters, or one of @ . : or a digit in it (the
# scan skips every other word in C: most words are neither)
_UNIT = re.compile(rf"(?<![^{_SEPS}])(?={_UNIT_CHAR}{{{MIN_UNIT_WORD}}}|{_UNIT_CHAR}*[@.:\d]){_UNIT_CHAR}+")
_YEAR = re.compile(r"(?:19|20)\d\d")
_NUMBER = re.compile(r"[+#(]?\d[\d().,/-]*\d\)?")
_DOMAIN = re.compile(r"[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S|www\.\w")


def significant(word: str) -> bool:
    """Whether a (normalised) word makes a run signal: 4+ characters and not in :data:`STOP_WORDS`."""
    return len(word) >= MIN_SIGNIFICANT and word not in STOP_WORDS


def says_something(words: Sequence[str]) -> bool:
    """Whether a run of (normalised) words is signal: two words outside :data:`STOP_WORDS`, one of
    them :func:`significant`."""
    content = [w for w in words if w not in STOP_WORDS]
    return len(content) >= 2 and any(significant(w) for w in content)


def is_unit(word: str) -> bool:
    """Whether a normalised, edge-stripped word counts on its own (rule 3 of the module docstring)."""
    if len(word) >= MIN_UNIT_WORD:
        return word not in STOP_WORDS
    if "@" in word:
        return re.search(r"\w@\w", word) is not None
    if "." in word or ":" in word:
        if _URL.match(word):
            return True
        if _DOMAIN.fullmatch(word):
            last = word.rsplit(".", 1)[1]
            return last.isalpha() and len(last) >= 2 and last not in NOT_TLDS
    if _NUMBER.fullmatch(word):
        return sum(c.isdigit() for c in word) >= MIN_UNIT_DIGITS and not _YEAR.fullmatch(word)
    return False


@dataclass(frozen=True)
class Span:
    """A part of an argument value found in untrusted content.

    ``start``/``end``: code point offsets in the value; ``text``: the value's own spelling of the part
    (``value[start:end]``); ``match``: its normalised form; ``source``: the first untrusted text that has it.
    """

    start: int
    end: int
    text: str
    match: str
    source: str


def find_spans(value: str | OffsetMap, sources: Sequence[Haystack], own: Haystack | None = None) -> list[Span]:
    """The maximal parts of ``value`` that stand in untrusted ``sources`` (rules of the module docstring),
    in the order they appear in ``value``; each names the first source (in conversation order) of the
    leftmost part it merged. ``own``: the person's own messages; what stands there is not a part.
    ``value`` may come as its :class:`~palui.policy.offsets.OffsetMap` already made.

    Linear in the sizes of ``value`` and the texts: each text is read once (:meth:`Haystack.prepare`), then
    the value's trigrams and pairs are looked up in sets, source by source.
    """
    where = value if isinstance(value, OffsetMap) else OffsetMap(value)
    value, norm = where.value, where.text
    words = list(WORD.finditer(norm))
    texts = WORD.findall(norm)
    prepare([*sources, *([own] if own else [])], [norm])
    found: list[tuple[int, int, str, bool]] = []  # (start, end, source, a unit?), offsets in ``norm``
    lookups: tuple[tuple[int, Callable[[Haystack], set[Any]]], ...] = (
        (MIN_RUN, lambda h: h.found.trigrams), (2, lambda h: h.found.pairs))
    for n, have in lookups:
        grams = list(zip(*(texts[k:] for k in range(n)), strict=False))
        hits = _first_sources(grams, [(h.source, have(h)) for h in sources], have(own) if own else set())
        for first, last, name in _runs(hits, n):
            found.append((words[first].start(), words[last + n - 1].end(), name, False))
    for m in _UNIT.finditer(norm):
        unit = m.group().strip(EDGE)
        if not unit or not is_unit(unit) or (own and own.has_word(unit)):
            continue
        origin = next((h.source for h in sources if h.has_word(unit)), None)
        if origin is not None:
            a = m.start() + m.group().index(unit)
            found.append((a, a + len(unit), origin, True))
    spans = []
    for a, b, source, has_unit in _merged(found):
        if has_unit or says_something(WORD.findall(norm[a:b])):
            start, end = where.span(a, b)
            spans.append(Span(start, end, value[start:end], norm[a:b], source))
    return spans


def _first_sources(items: list[Any], sources: list[tuple[str, set[Any]]], own: set[Any]) -> list[tuple[int, str]]:
    """(index, first source that has it) for each of ``items`` found in a source and not in ``own``, in
    index order. Set operations per source; one pass over ``items`` at the end."""
    left = set(items) - own
    name_of: dict[Any, str] = {}
    for name, found in sources:
        if not left:
            break
        hit = left & found
        name_of.update(dict.fromkeys(hit, name))
        left -= hit
    return [(i, name_of[item]) for i, item in enumerate(items) if item in name_of]


def _runs(hits: list[tuple[int, str]], n: int) -> list[tuple[int, int, str]]:
    """Windows of ``n`` words starting at the indexes of ``hits`` (in order), overlapping ones as one:
    (first window, last window, source of the first)."""
    out: list[tuple[int, int, str]] = []
    for i, name in hits:
        if out and i < out[-1][1] + n:
            out[-1] = (out[-1][0], i, out[-1][2])
        else:
            out.append((i, i, name))
    return out


def _merged(found: list[tuple[int, int, str, bool]]) -> list[tuple[int, int, str, bool]]:
    """Overlapping parts as one, keeping the source of the leftmost; a unit if any part was one."""
    out: list[tuple[int, int, str, bool]] = []
    for a, b, src, unit in sorted(found, key=lambda f: (f[0], -f[1])):
        if out and a < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b), out[-1][2], out[-1][3] or unit)
        else:
            out.append((a, b, src, unit))
    return out
