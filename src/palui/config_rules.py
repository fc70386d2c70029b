"""What a configuration value may be: the rule each key of the settings model carries (spec §10.4).

A key of :class:`palui.config_schema.Settings` is declared as ``Annotated[int, Whole(1_000, "model steps")]``:
the Python type is what code reads (``settings.budgets.steps`` is an ``int``), the rule is the one home of the
key's kind, range, unit, finiteness and refusal of control characters. Every reader of a value uses the rule:

- the loader (:mod:`palui.config`) at every start, by :meth:`Rule.parse` (an environment variable's text) and
  :meth:`Rule.check` (plain Python: a command pays next to nothing for it, docs/decisions/0085-a-light-cli-start.md);
- command-line options that set what a key sets (``palui connectors add --timeout`` is
  ``mcp.call_timeout_seconds`` for one connector), through :func:`palui.config_schema.option_value`;
- pydantic, which reads the same ``Annotated`` declarations (a rule is annotated-types "grouped metadata":
  strict type, bounds for the JSON Schema, and :meth:`Rule.check` as an after-validator), as it reads the
  result types (docs/decisions/0150-result-types.md), without Palui importing pydantic to start.

A refusal is a :class:`Refused` whose text says what is allowed in words (``must be greater than 0 and at most
1,000 model steps``); the caller names the file or variable and the key, and :func:`got` shows the value given,
escaped as every surface shows text (``'Mars/\\u0000x'``, ``true``), never as a Python repr.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from palui.text.escape import control_character


class Refused(ValueError):
    """A value a rule refuses. ``str(e)`` says what is wrong in words; ``echo``: whether the message may be
    followed by the value given (False where the words already show it, or where it may hold a secret)."""

    def __init__(self, what: str, *, echo: bool = True) -> None:
        super().__init__(what)
        self.echo = echo


def got(value: Any) -> str:
    """``value`` as an error message quotes it: text quoted and escaped (``'Mars/\\u0000x'``, spec §4.7),
    ``true``/``false`` as TOML writes them, a list or table as JSON; cut to 40 characters with its length when
    longer, so a 5,000-digit number is not printed back whole."""
    from palui.text.display import named, shown_json

    if isinstance(value, str):
        return named(value, 40)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = str(value)
    else:
        text = shown_json(_plain(value), note=False)
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text):,} characters)"


def _plain(value: Any) -> Any:
    """A TOML value as JSON can show it (a date or time as its ISO text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class Rule:
    """Base of the rules. ``kind`` names the kind of value (:data:`KIND_WORDS`); ``secret``: values are never
    echoed in an error (an apprise URL carries a token, a model string may hold a key); ``text``: palui.toml
    writes the value as a string."""

    text = False
    secret = False
    #: pydantic reads a rule as grouped metadata (:meth:`__iter__`); duck-typed, so this module imports nothing.
    __is_annotated_types_grouped_metadata__ = True

    @property
    def kind(self) -> str:
        raise NotImplementedError

    def parse(self, text: str) -> Any:
        """The value written as ``text`` (an environment variable, a command-line option). Raises Refused."""
        return text

    def check(self, value: Any) -> Any:
        """``value`` (of its TOML type) if the rule allows it. Raises Refused."""
        raise NotImplementedError

    def echoes(self, value: Any) -> bool:
        """Whether a refusal of ``value`` may show it (never an apprise URL, which carries a token)."""
        return not self.secret

    def bounds(self) -> list[Any]:
        """annotated-types constraints showing the range to pydantic's JSON Schema (the check is :meth:`check`)."""
        return []

    def __iter__(self) -> Iterator[Any]:
        from pydantic import AfterValidator, Strict

        yield Strict()
        yield from self.bounds()
        yield AfterValidator(self.check)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


def _whole_text(text: str, outside: str) -> int:
    digits = text.replace("_", "").strip()
    try:
        return int(digits)
    except ValueError:  # a number of more than 4,300 digits is outside the range too
        raise Refused(outside if digits.lstrip("+-").isdigit() else "must be a whole number") from None


class Whole(Rule):
    """A whole number from 1 to ``high`` ``unit`` (``off``: from 0, which switches the thing off; ``unset``: an
    empty variable leaves the key unset, its default derived from another key)."""

    def __init__(self, high: int, unit: str = "", *, off: bool = False, unset: bool = False) -> None:
        self.high, self.unit, self.off, self.unset = high, unit, off, unset

    @property
    def kind(self) -> str:
        return "int0" if self.off else "int+?" if self.unset else "int+"

    @property
    def low(self) -> int:
        return 0 if self.off else 1

    def outside(self) -> str:
        at_most = f"at most {self.high:,}" + (f" {self.unit}" if self.unit else "")
        if self.off:
            return f"must be 0 (off) or a whole number greater than 0 and {at_most}"
        return f"must be greater than 0 and {at_most}"

    def range_text(self) -> str:
        top = f"{self.high:,}" + (f" {self.unit}" if self.unit else "")
        return f"0 (off) to {top}" if self.off else f"1 to {top}"

    def parse(self, text: str) -> Any:
        if self.unset and not text.strip():
            return None
        return _whole_text(text, self.outside())

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Refused("must be a whole number")
        if not self.low <= value <= self.high:
            raise Refused(self.outside())
        return value

    def bounds(self) -> list[Any]:
        import annotated_types as at

        return [at.Ge(self.low), at.Le(self.high)]


class Port(Whole):
    """A TCP port number, 1 to 65,535."""

    def __init__(self) -> None:
        super().__init__(65_535)

    @property
    def kind(self) -> str:
        return "port"

    def outside(self) -> str:
        return "must be a port number (1-65535)"


class Amount(Rule):
    """A finite number above 0 and at most ``high`` ``unit`` (seconds: a fraction is allowed)."""

    def __init__(self, high: int, unit: str) -> None:
        self.high, self.unit = high, unit

    @property
    def kind(self) -> str:
        return "num+"

    def outside(self) -> str:
        return f"must be greater than 0 and at most {self.high:,} {self.unit}"

    def range_text(self) -> str:
        return f"above 0, up to {self.high:,} {self.unit}"

    def parse(self, text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            raise Refused("must be a number") from None

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Refused("must be a number")
        if not math.isfinite(value):
            raise Refused("must be a finite number")
        if not 0 < value <= self.high:
            raise Refused(self.outside())
        return value

    def bounds(self) -> list[Any]:
        import annotated_types as at

        return [at.Gt(0), at.Le(self.high)]


class Fraction(Rule):
    """A finite number from 0 to 1, or unset (the key's default is then derived elsewhere: a cached input token's
    weight follows the provider, spec §6.4). An empty variable leaves it unset."""

    @property
    def kind(self) -> str:
        return "frac?"

    def range_text(self) -> str:
        return "0 to 1"

    def parse(self, text: str) -> Any:
        if not text.strip():
            return None
        try:
            return float(text)
        except ValueError:
            raise Refused("must be a number from 0 to 1") from None

    def check(self, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 <= value <= 1:
            raise Refused("must be a number from 0 to 1")
        return float(value)

    def bounds(self) -> list[Any]:
        import annotated_types as at

        return [at.Ge(0), at.Le(1)]


#: The words of :meth:`Flag.parse` (an environment variable's true or false).
TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes"), ("false", "0", "no")


class Flag(Rule):
    """true or false."""


    @property
    def kind(self) -> str:
        return "bool"

    def parse(self, text: str) -> Any:
        word = text.lower()
        if word in TRUE_WORDS + FALSE_WORDS:
            return word in TRUE_WORDS
        raise Refused("must be true or false")

    def check(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise Refused("must be true or false")
        return value


class Text(Rule):
    """A string without control characters (it becomes a path, a host, a URL or a process argument);
    ``optional``: empty means unset (None); ``secret``: a refused string is not echoed (a model string may hold
    a key); ``also``: a further check of the text, raising Refused (a time zone that exists, a model string's
    form)."""

    text = True

    def __init__(self, *, optional: bool = False, secret: bool = False,
                 also: Callable[[str], None] | None = None) -> None:
        self.optional, self.secret, self.also = optional, secret, also

    @property
    def kind(self) -> str:
        return "str?" if self.optional else "str"

    def parse(self, text: str) -> Any:
        return None if self.optional and text == "" else text

    def echoes(self, value: Any) -> bool:
        return not (self.secret and isinstance(value, str))

    def check(self, value: Any) -> str | None:
        if self.optional and (value is None or value == ""):
            return None
        if not isinstance(value, str) or (not self.optional and not value):
            raise Refused("must be a string" if self.optional else "must be a non-empty string")
        where = control_character(value)
        if where:
            raise Refused(f"must not contain control characters ({where})" if self.secret
                          else "must not contain control characters")
        if self.also:
            self.also(value)
        return value


class Texts(Rule):
    """A list of strings (in a variable: comma-separated); ``apprise``: each one an apprise URL. Never echoed."""

    secret = True

    def __init__(self, *, apprise: bool = False) -> None:
        self.apprise = apprise

    @property
    def kind(self) -> str:
        return "strlist"

    def parse(self, text: str) -> Any:
        return [v.strip() for v in text.split(",") if v.strip()]

    def check(self, value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise Refused("must be a list of strings")
        for i, item in enumerate(value, 1):
            where = control_character(item)
            if where:
                raise Refused(f"item {i} must not contain control characters ({where})")
            if self.apprise and not apprise_syntax_ok(item):
                raise Refused(f"item {i} is not an apprise URL: {APPRISE_HINT}")
        return value


class Table(Rule):
    """A table of name = "text" (in a variable: a JSON object), non-empty names and values; ``apprise``: each
    value an apprise URL. Values are never echoed (they carry tokens)."""

    secret = True

    def __init__(self, *, apprise: bool = False) -> None:
        self.apprise = apprise

    @property
    def kind(self) -> str:
        return "strdict"

    def parse(self, text: str) -> Any:
        import json

        try:
            return json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError):
            raise Refused("must be a JSON object of name: string") from None

    def check(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip() for k, v in value.items()):
            raise Refused('must be a table of name = "text" (non-empty names and values)')
        for name, url in value.items():
            where = control_character(name) or control_character(url)
            if where:
                raise Refused(f"contact {got(name)} must not contain control characters ({where})")
            if self.apprise and not apprise_syntax_ok(url):
                raise Refused(f"contact {got(name)} is not an apprise URL: {APPRISE_HINT}")
        return dict(value)


#: What each kind of value is, in words: "a whole number", not "a number, boolean, list or table"
#: (docs/decisions/0122-messages-reworded.md).
KIND_WORDS = {
    "str?": "text", "str": "non-empty text", "bool": "true or false", "int+": "a whole number",
    "int+?": "a whole number", "int0": "a whole number (0: off)",
    "port": "a port number (1-65535)", "num+": "a number", "frac?": "a number from 0 to 1",
    "strlist": "a list of strings",
    "strdict": 'a table of name = "text"',
}
NUMERIC_KINDS = {"int+", "int+?", "int0", "port", "num+"}

_APPRISE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+._-]*://\S+$")
APPRISE_HINT = ("expected SCHEME://…, e.g. json://localhost or tgram://BOT_TOKEN/CHAT_ID (see apprise's list of "
                "services)")


def apprise_syntax_ok(url: str) -> bool:
    """Whether ``url`` looks like an apprise URL: ``scheme://rest``, no whitespace (no apprise import).
    Whether apprise knows the scheme is checked by ``palui serve`` (docs/decisions/0122-messages-reworded.md)."""
    return bool(_APPRISE_URL.match(url.strip()))
