"""A person's policy pinned as tests (spec §3.4). Pure: rows in, findings out; no I/O.

The file is CSV with the header ``tool,origin,tainted,verdict``: a model-visible tool name, an
origin (``chat``, ``job``, ``webhook``, ``gateway``, or ``gateway:NAME`` for the gateway client NAME, whose
connectors decide which tools it may call), ``true``/``false`` (also ``yes``/``no``, ``1``/``0``) and a
verdict word (``run``, ``ask``, ``unavailable``, ``off``); a record whose first field starts ``#`` is a comment
(the snapshot lists the standing approvals so, spec §5.9). ``palui policy snapshot`` writes one row per
tool, origin and taint, and two per tool and gateway client; ``palui policy check FILE`` compares each row
with what the decision matrix gives now (spec §3, §8.6).

A current verdict is *looser* than the pinned one when it lets more happen: ``run`` < ``ask`` <
``unavailable`` = ``off`` (the last two are both "not offered"). Only a looser verdict makes the
service switch a tool off at start; a tighter one, a different word of the same strictness, or a tool
that no longer exists is a notice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from palui.types import Decision, Origin, Verdict

HEADER = ("tool", "origin", "tainted", "verdict")
STRICTNESS = {Verdict.RUN: 0, Verdict.ASK: 1, Verdict.UNAVAILABLE: 2, Verdict.OFF: 2}
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


@dataclass(frozen=True)
class Pin:
    """One row of the file: ``line`` is its line number (the header is line 1); ``client`` the gateway client of
    an origin ``gateway:NAME`` (None: any caller of that origin)."""

    line: int
    tool: str
    origin: Origin
    tainted: bool
    verdict: Verdict
    client: str | None = None


def origin_word(origin: Origin, client: str | None) -> str:
    """The origin cell of a row: ``chat``… or ``gateway:NAME``."""
    return f"{origin.value}:{client}" if client else origin.value


@dataclass(frozen=True)
class Finding:
    """A row that does not hold now. ``kind``: ``looser`` (the tool would now do more than pinned),
    ``tighter``, ``differs`` (another word of the same strictness), ``missing`` (no such tool), or
    ``bad`` (the row cannot be read; ``pin`` is None then). ``current`` is today's decision, if any."""

    kind: str
    line: int
    pin: Pin | None
    current: Decision | None
    message: str


def parse(records: Sequence[Sequence[str]]) -> tuple[list[Pin], list[Finding]]:
    """The pins of a CSV file already split into records (the header first) and the rows that could
    not be read. A missing or wrong header makes every row unreadable."""
    if not records or tuple(c.strip().lower() for c in records[0]) != HEADER:
        return [], [Finding("bad", 1, None, None, f"line 1: the header must be {','.join(HEADER)}")]
    pins: list[Pin] = []
    bad: list[Finding] = []
    for n, rec in enumerate(records[1:], start=2):
        cells = [c.strip() for c in rec]
        if not any(cells) or cells[0].startswith("#"):  # a comment: a standing approval's line (spec §3.4)
            continue
        if len(cells) != 4:
            bad.append(Finding("bad", n, None, None, f"line {n}: expected 4 fields, got {len(cells)}"))
            continue
        tool, origin, tainted, verdict = cells
        word, _, client = origin.partition(":")
        try:
            o = Origin(word.lower())
            if client and o is not Origin.GATEWAY:
                raise ValueError(origin)
        except ValueError:
            bad.append(Finding("bad", n, None, None,
                               f"line {n}: unknown origin {origin!r} (chat, job, webhook, gateway, gateway:NAME)"))
            continue
        if tainted.lower() not in _TRUE + _FALSE:
            bad.append(Finding("bad", n, None, None, f"line {n}: tainted must be true or false, not {tainted!r}"))
            continue
        try:
            v = Verdict(verdict.lower())
        except ValueError:
            bad.append(Finding("bad", n, None, None,
                               f"line {n}: unknown verdict {verdict!r} (run, ask, unavailable, off)"))
            continue
        pins.append(Pin(n, tool, o, tainted.lower() in _TRUE, v, client or None))
    return pins, bad


def situation(pin: Pin) -> str:
    """``chat, tainted`` / ``job`` / ``gateway:coder`` — the situation a pin is about, for messages."""
    return origin_word(pin.origin, pin.client) + (", tainted" if pin.tainted else "")


def compare(pins: Sequence[Pin], decide_now: Callable[[Pin], Decision | None]) -> list[Finding]:
    """Every pin that does not hold now. ``decide_now(pin)`` is the decision the live configuration gives
    for the pin's tool, origin and taint, or None when there is no such tool."""
    out: list[Finding] = []
    for pin in pins:
        d = decide_now(pin)
        where = f"line {pin.line}: {pin.tool} ({situation(pin)})"
        if d is None:
            out.append(Finding("missing", pin.line, pin, None, f"{where}: pinned {pin.verdict.value}, but there is "
                                                              "no such tool now"))
            continue
        if d.verdict is pin.verdict:
            continue
        now, then = STRICTNESS[d.verdict], STRICTNESS[pin.verdict]
        kind = "looser" if now < then else "tighter" if now > then else "differs"
        out.append(Finding(kind, pin.line, pin, d, f"{where}: pinned {pin.verdict.value}, now {d.verdict.value}"
                                                   f" — {d.reason}"))
    return out


def snapshot_records(situations: Sequence[tuple[str, str, bool, Decision]]) -> list[list[str]]:
    """The records of ``palui policy snapshot`` (header first) for (tool, origin word, tainted, decision); the
    origin word is :func:`origin_word`'s."""
    return [list(HEADER)] + [[tool, origin, "true" if tainted else "false", d.verdict.value]
                             for tool, origin, tainted, d in situations]
