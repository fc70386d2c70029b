"""The words of a mail (spec §8.3): the person's new text, and what is quoted or forwarded in it.

Only what the person wrote anew is their words. A mail client puts other texts in the body too, and
they are someone else's words until shown otherwise:

- **quoted** lines (``>``…), with the attribution line before them (``On Mon, Alice wrote:``; any line
  ending in ``:`` right above a quote), and everything under an Outlook-style reply header (``From:``
  followed by ``Sent:``/``Date:``) or a ``-----Original Message-----`` line;
- **forwarded** text: everything from a forward marker (``---------- Forwarded message ---------``,
  ``Begin forwarded message:``) on, its author read from the ``From:`` line under the marker.

An HTML-only mail is reduced to text with Beautiful Soup (``html.parser``: no network, no scripts, no
remote content); its ``<blockquote>`` elements and Gmail's ``gmail_quote`` blocks are quoted text.
:func:`answer_word` reads an approval answer from the new text's first line only, so a forwarded or
quoted approval mail carries no answer. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from palui.text.commands import Command, CommandError, parse

__all__ = ["MailWords", "answer_of", "answer_word", "html_to_text", "split_words"]

_FORWARD = re.compile(
    r"^\s*(?:-{2,}\s*(?:forwarded message|weitergeleitete nachricht|message transf[ée]r[ée]|mensaje reenviado)"
    r"\s*-{2,}|begin forwarded message:)\s*$", re.IGNORECASE)
_ORIGINAL = re.compile(r"^\s*-{2,}\s*original message\s*-{2,}\s*$", re.IGNORECASE)
_OUTLOOK_FROM = re.compile(r"^\s*\*?from:\*?\s+\S", re.IGNORECASE)
_OUTLOOK_NEXT = re.compile(r"^\s*\*?(sent|date):\*?\s+\S", re.IGNORECASE)
_FROM_LINE = re.compile(r"^\s*\*?from:\*?\s*(.+?)\s*$", re.IGNORECASE)
_APPROVE = {"approve", "approved", "yes", "/approve", "ok"}
_DENY = {"deny", "denied", "no", "/deny"}
_BLOCK_TAGS = ["p", "div", "blockquote", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "pre",
               "hr"]


@dataclass
class MailWords:
    """A body split by whose words: ``words`` (the person's new text), ``quoted`` (quoted lines, with their
    attribution), ``forwarded`` (``(author, text)`` per forwarded block; author ``""`` when unknown)."""

    words: str
    quoted: str = ""
    forwarded: list[tuple[str, str]] = field(default_factory=list)


def _forward_author(lines: list[str]) -> str:
    for line in lines[:10]:
        m = _FROM_LINE.match(line)
        if m:
            return m.group(1)
    return ""


def split_words(text: str) -> MailWords:
    """Split a plain-text body (see the module docstring). Joining nothing is lost: every line is in
    exactly one of the three."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    own: list[str] = []
    quoted: list[str] = []
    forwarded: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FORWARD.match(line):
            rest = lines[i + 1:]
            forwarded.append((_forward_author(rest), "\n".join(rest).strip()))
            break
        outlook = _OUTLOOK_FROM.match(line) and any(_OUTLOOK_NEXT.match(x) for x in lines[i + 1:i + 4])
        if _ORIGINAL.match(line) or outlook:
            quoted.append("\n".join(lines[i:]).strip())
            break
        if line.lstrip().startswith(">"):
            # the attribution above a quote ("On Mon, Alice wrote:"), blank lines between allowed
            while own and (not own[-1].strip()):
                own.pop()
            if own and own[-1].rstrip().endswith(":"):
                quoted.append(own.pop())
            quoted.append(line)
        else:
            own.append(line)
        i += 1
    return MailWords("\n".join(own).strip(), "\n".join(quoted).strip(), forwarded)


def html_to_text(html: str) -> tuple[str, str]:
    """``(text, quoted)`` of an HTML body: the visible text (line breaks at ``<br>`` and block elements),
    and the text of its ``<blockquote>`` and ``gmail_quote`` blocks, taken out of it."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "head", "title", "template", "svg", "noscript"]):
        tag.decompose()
    quotes: list[str] = []
    for tag in soup.find_all(["blockquote", "div"]):
        if getattr(tag, "decomposed", False):
            continue
        classes: list[str] = list(tag.get("class") or [])
        if tag.name == "blockquote" or "gmail_quote" in classes:
            quotes.append(_text_of(tag))
            tag.decompose()
    return _text_of(soup), "\n".join(q for q in quotes if q)


def _text_of(node: object) -> str:
    from bs4 import Tag

    assert isinstance(node, Tag)
    for br in node.find_all("br"):
        br.replace_with("\n")
    for tag in node.find_all(_BLOCK_TAGS):
        tag.insert_after("\n")
    lines = [re.sub(r"[ \t\u00a0]+", " ", x).strip() for x in node.get_text().split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def answer_word(words: str) -> tuple[bool, str | None] | None:
    """An approval answer from the first non-blank line of the person's new text: ``(True, None)`` for
    approve / yes / ok, ``(False, reason)`` for deny / no (the rest of the line is the reason), None when
    the line is neither (:func:`answer_of` reads "always" and "deny and stop" too)."""
    cmd = answer_of(words)
    if cmd is None or cmd.name not in ("/approve", "/deny"):
        return None
    return cmd.approves, cmd.reason or None


_AND_STOP = re.compile(r"and\s+stop\b", re.IGNORECASE)  # "deny and stop", never "denied and stopped"


def answer_of(words: str) -> Command | None:
    """The answer on the first non-blank line of the person's new text, as the chat command it stands for (its id
    left empty: the reply's address names the approval): approve / yes / ok (``/approve``), deny / no and a reason
    (``/deny``), ``always [ARG=HOW …] [confirm]`` (``/always``: approve, and from now on the same, spec §5.9),
    ``stop`` or ``deny and stop`` and a reason (``/denystop``, spec §5.10). None when the line is none of these."""
    first = next((x.strip() for x in words.splitlines() if x.strip()), "")
    head, _, rest = first.partition(" ")
    word = head.lower().rstrip(".!,:;")
    if word in _APPROVE and not rest.strip():
        return Command("/approve", "")
    stop = _AND_STOP.match(rest)
    if word in _DENY and stop:
        return Command("/denystop", "", rest[stop.end():].strip(" .,:;-"))
    if word in ("stop", "/denystop"):
        return Command("/denystop", "", rest.strip(" .,:;-"))
    if word in _DENY:
        return Command("/deny", "", rest.strip(" .,:;-"))
    if word in ("always", "/always"):
        try:
            parsed = parse(f"/always a-reply {rest}".rstrip())
        except CommandError:
            return None
        return Command("/always", "", widen=parsed.widen if parsed else (), confirm=bool(parsed and parsed.confirm))
    return None
