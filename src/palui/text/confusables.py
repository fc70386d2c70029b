"""Look-alike names: the skeleton of Unicode's UTS #39 (§4 "Confusable Detection"), spec §7.5.

``skeleton(s)`` = NFD(map(NFD(s))), where *map* replaces each character that ``confusables.txt`` lists by
its prototype (:mod:`palui.text.confusables_table`, generated from Unicode's file). Two strings with the
same skeleton may look the same.

A name **has look-alike characters** when a character of it outside ASCII has a skeleton other than its
own decomposition: a Cyrillic ``а`` (skeleton ``a``) in ``reаd_file``, a fullwidth ``ｒ``, a Greek ``ο``.
An accented letter (``é``: its skeleton is itself, decomposed) is not. ASCII characters are left alone
although the file maps some of them (``m`` → ``rn``, ``1`` → ``l``): what they look like is what they are,
so flagging them would flag every name. Such a tool is flagged like hidden characters (spec §4.7): left
off by ``enable-read`` and switched on only after ``palui tools show`` named what it reads like.
"""

from __future__ import annotations

import unicodedata

__all__ = ["has_look_alikes", "skeleton"]


def _table() -> dict[int, str]:
    from palui.text.confusables_table import CONFUSABLES  # 6,700 entries: loaded when a name is first checked

    return CONFUSABLES


def skeleton(s: str) -> str:
    """The UTS #39 skeleton of ``s`` (non-ASCII mappings only, see the module docstring)."""
    table = _table()
    mapped = "".join(table.get(ord(ch), ch) for ch in unicodedata.normalize("NFD", s))
    return unicodedata.normalize("NFD", mapped)


def has_look_alikes(s: str) -> bool:
    """True when a character of ``s`` outside ASCII may be confused with another (its skeleton differs)."""
    if s.isascii():
        return False
    return any(not ch.isascii() and skeleton(ch) != unicodedata.normalize("NFD", ch) for ch in s)
