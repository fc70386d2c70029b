"""The settings model: every configuration key as a typed, frozen field with its rule (spec §10.4).

``settings.budgets.steps`` is an ``int``, ``settings.caps.timezone`` a ``str | None``: each ``[section]`` of
``palui.toml`` is a frozen dataclass below, each key a field ``Annotated[type, rule]`` whose default is the
key's default and whose rule (:mod:`palui.config_rules`) is the one home of its kind, range, unit, finiteness
and refusal of control characters. :data:`KEYS` lists every key by its dotted name (``"caps.daily_tokens"``,
as palui.toml and ``PALUI_CAPS__DAILY_TOKENS`` spell it), read off the model; :func:`checked` checks one value
of a key and words a refusal (``key 'budgets.steps': must be greater than 0 and at most 1,000 model steps (got
5000)``). :mod:`palui.config` reads the file and the variables into a :class:`Settings`.

pydantic reads the model as it is (``TypeAdapter(Settings)`` validates with the same rules and gives its JSON
Schema); Palui's own start does not import pydantic (docs/decisions/0085-a-light-cli-start.md).
"""

# No ``from __future__ import annotations``: the fields' ``Annotated`` types are read at import (KEYS).

import dataclasses
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypeVar, get_args, get_origin

from palui.config_models import ModelEntry
from palui.config_rules import (
    KIND_WORDS,
    NUMERIC_KINDS,
    Amount,
    Flag,
    Fraction,
    Port,
    Refused,
    Rule,
    Table,
    Text,
    Texts,
    Whole,
    got,
)
from palui.config_section import Section, build, section, section_type
from palui.errors import ConfigError, UsageError
from palui.types import Origin

_DAY = 86_400
_MIB = 1024 * 1024


def _model_form(value: str) -> None:
    # The form only (the provider, key and script are checked when a turn needs the model); the value is not
    # echoed: a mistaken string may hold a key.
    if not value.startswith("@") and not value.partition(":")[2]:
        raise Refused("expected PROVIDER:MODEL (openai:, anthropic:, ollama:, script:) or @NAME, "
                      "e.g. model = \"openai:gpt-4o\"", echo=False)


def _zone(value: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # "America" is a directory: OSError
        raise Refused(f"unknown time zone {got(value)}", echo=False) from None


def _metadata_document(value: str) -> None:
    from urllib.parse import urlsplit

    try:
        u = urlsplit(value)
    except ValueError:  # an unclosed [IPv6 literal
        u = urlsplit("")
    if u.scheme != "https" or not u.netloc or u.path in ("", "/"):
        raise Refused("must be an https:// URL with a path (a Client ID Metadata Document)", echo=False)


def _public_url(value: str) -> None:
    # It is printed as the address to give a webhook's sender (palui webhooks add) and put in links: only an
    # http(s) URL with a host, without credentials (never a javascript: or file: URL).
    from urllib.parse import urlsplit

    try:
        u = urlsplit(value)
        host = u.hostname
    except ValueError:  # an unclosed [IPv6 literal, a port out of range
        u, host = urlsplit(""), None
    if u.scheme not in ("http", "https") or not host or "@" in u.netloc or u.query or u.fragment:
        raise Refused("must be an http:// or https:// URL with a host, no credentials, query or fragment, "
                      "e.g. public_url = \"https://palui.example.org\"", echo=False)


@section
class Budgets(Section):
    """``[budgets]``: what one turn may spend (spec §6.3)."""

    steps: Annotated[int, Whole(1_000, "model steps")] = 12
    seconds: Annotated[float, Amount(_DAY, "seconds (a day)")] = 120
    tools: Annotated[int, Whole(1_000, "tools")] = 30
    #: the N-th identical call in a turn ends its tool use; 0: off
    repeat_calls: Annotated[int, Whole(1_000, "calls", off=True)] = 3
    #: N refused or failed calls in a row end the turn's tool use; 0: off
    error_streak: Annotated[int, Whole(1_000, "calls", off=True)] = 4
    #: more than N of the person's denials end the turn's tool use; 0: off
    denials: Annotated[int, Whole(1_000, "denials", off=True)] = 8


@section
class Caps(Section):
    """``[caps]``: what all turns together may spend (spec §6.4, §6.6, §8.6)."""

    daily_tokens: Annotated[int, Whole(10**12, "tokens")] = 1_000_000
    job_daily_tokens: Annotated[int, Whole(10**12, "tokens")] = 200_000
    runs_per_hour: Annotated[int, Whole(10_000, "runs")] = 60
    #: webhook turns' share of runs_per_hour; unset: max(1, runs_per_hour // 3), resolved by palui.config
    webhook_runs_per_hour: Annotated[int, Whole(10_000, "runs", unset=True)] = 20
    #: calls every MCP client together sends to connectors through Palui in any 60 minutes (the ceiling)
    gateway_calls_per_hour: Annotated[int, Whole(10_000, "calls")] = 120
    #: calls one gateway client sends in any 60 minutes, unless the client has its own (--calls-per-hour)
    gateway_client_calls_per_hour: Annotated[int, Whole(10_000, "calls")] = 60
    #: the zone that decides where a day starts; None: the system's
    timezone: Annotated[str | None, Text(optional=True, also=_zone)] = None
    #: What a cached input token counts for against the token caps (spec §6.4); unset: the provider's default
    #: (palui.policy.caps.CACHED_INPUT_WEIGHTS: anthropic 0.1, openai 0.5, others 1).
    cached_input_weight: Annotated[float | None, Fraction()] = None


@section
class Approvals(Section):
    """``[approvals]``: how long an approval stays open (spec §5.5), in seconds; how long a standing approval lives
    (spec §5.9), in days."""

    chat_expiry_seconds: Annotated[float, Amount(30 * _DAY, "seconds (30 days)")] = 1800
    job_expiry_seconds: Annotated[float, Amount(30 * _DAY, "seconds (30 days)")] = 86400
    #: how long a standing approval answers asks from when it is made (spec §5.9), in days
    standing_days: Annotated[int, Whole(366, "days")] = 30

    def expiry(self, origin: Origin) -> float:
        """How long an approval (or a server's question) of a turn of ``origin`` stays open: a job's waits
        for the person longer than a chat's (spec §5.5)."""
        return self.job_expiry_seconds if origin is Origin.JOB else self.chat_expiry_seconds


@section
class Web(Section):
    """``[web]``: the built-in page fetch (spec §7.1)."""

    allow_private: Annotated[bool, Flag()] = False
    max_bytes: Annotated[int, Whole(100 * _MIB, "bytes (100 MiB)")] = 2 * 1024 * 1024
    timeout_seconds: Annotated[float, Amount(3_600, "seconds (an hour)")] = 20


@section
class OAuth(Section):
    """``[mcp.oauth]``: how Palui signs in to MCP servers (spec §7)."""

    #: a public HTTPS Client ID Metadata Document; None: dynamic client registration
    client_metadata_url: Annotated[str | None, Text(optional=True, also=_metadata_document)] = None


@section
class MCP(Section):
    """``[mcp]``: calls to MCP servers (spec §7); a connector may override the first two."""

    call_timeout_seconds: Annotated[float, Amount(_DAY, "seconds (a day)")] = 30
    max_output_bytes: Annotated[int, Whole(100 * _MIB, "bytes (100 MiB)")] = 262_144
    #: questions one call may put to the person
    max_elicitations_per_call: Annotated[int, Whole(100, "questions")] = 3
    oauth: OAuth = field(default_factory=OAuth)


@section
class Serve(Section):
    """``[serve]``: where ``palui serve`` listens (spec §8.1)."""

    host: Annotated[str, Text()] = "127.0.0.1"
    port: Annotated[int, Port()] = 8765
    #: the URL webhooks are reached at, when not the bound address
    public_url: Annotated[str | None, Text(optional=True, also=_public_url)] = None
    #: a request's head (request line and headers) must arrive within this, else 408 and the connection closed
    header_timeout_seconds: Annotated[float, Amount(300, "seconds (5 minutes)")] = 10


@section
class Notify(Section):
    """``[notify]``: apprise URLs that also receive what goes to the inbox (spec §8)."""

    apprise: Annotated[list[str], Texts(apprise=True)] = field(default_factory=list)


@section
class Messages(Section):
    """``[messages]``: targets of ``messages__send_message``."""

    #: contact name -> apprise URL
    contacts: Annotated[dict[str, str], Table(apprise=True)] = field(default_factory=dict)


@section
class Policy(Section):
    """``[policy]``: a policy snapshot (CSV) checked when ``palui serve`` starts (spec §3.4)."""

    check_file: Annotated[str | None, Text(optional=True)] = None


@section
class Webhooks(Section):
    """``[webhooks]``: accepted deliveries per webhook per sliding minute (spec §8)."""

    rate_per_minute: Annotated[int, Whole(10_000, "deliveries")] = 10


@section
class Retention(Section):
    """``[retention]``: untrusted content, the inbox and webhook deliveries older than ``days`` are pruned; the
    results gateway calls returned (the untrusted content of gateway clients' conversations) older than
    ``gateway_days`` (spec §10.2)."""

    days: Annotated[int, Whole(36_500, "days (100 years)")] = 90
    gateway_days: Annotated[int, Whole(36_500, "days (100 years)")] = 7


@section
class Limits(Section):
    """``[limits]``: a longer message is refused before it is stored (spec §8.1); a tool call's arguments longer
    than ``argument_chars`` (canonical JSON) are refused as the model's error (spec §3.3)."""

    message_chars: Annotated[int, Whole(1_000_000, "characters")] = 100_000
    argument_chars: Annotated[int, Whole(10_000_000, "characters")] = 262_144


@section
class Connectors(Section):
    """``[connectors]``: a tool whose input schema is longer than ``max_schema_chars`` (canonical JSON, every
    description in it cut to 4,000 characters) is flagged when its server lists it (spec §7.6)."""

    max_schema_chars: Annotated[int, Whole(1_000_000, "characters")] = 16_000


@section
class Gateway(Section):
    """``[gateway]``: how long a gateway call waits for its approval, and how many sessions one client may hold
    open (spec §8.6)."""

    wait_seconds: Annotated[float, Amount(3_600, "seconds (an hour)")] = 50
    #: a client's open sessions; one more ends its least recently used one
    sessions_per_client: Annotated[int, Whole(1_000, "sessions")] = 8


S = TypeVar("S", bound="Settings")


@section
class Settings(Section):
    """Validated settings (spec §10.4): the paths (:func:`palui.home.paths`), every key as a typed field of its
    section (``settings.caps.daily_tokens``), and ``models``, the ``[models.NAME]`` tables by name
    (:class:`~palui.config_models.ModelEntry`). Made by :func:`palui.config.load_settings`; frozen."""

    home: Path
    data_dir: Path
    config_file: Path
    #: the model string: PROVIDER:MODEL, script:PATH or @NAME; None: turns say how to configure one
    model: Annotated[str | None, Text(optional=True, secret=True, also=_model_form)] = None
    budgets: Budgets = field(default_factory=Budgets)
    caps: Caps = field(default_factory=Caps)
    approvals: Approvals = field(default_factory=Approvals)
    web: Web = field(default_factory=Web)
    mcp: MCP = field(default_factory=MCP)
    serve: Serve = field(default_factory=Serve)
    notify: Notify = field(default_factory=Notify)
    messages: Messages = field(default_factory=Messages)
    policy: Policy = field(default_factory=Policy)
    webhooks: Webhooks = field(default_factory=Webhooks)
    retention: Retention = field(default_factory=Retention)
    limits: Limits = field(default_factory=Limits)
    connectors: Connectors = field(default_factory=Connectors)
    gateway: Gateway = field(default_factory=Gateway)
    models: dict[str, ModelEntry] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "palui.db"

    @property
    def secrets_dir(self) -> Path:
        return self.data_dir / "secrets"

    def value(self, key: str) -> Any:
        """The value of a dotted key (``"caps.daily_tokens"``), for code that lists keys (the README table,
        ``palui status``); code that reads one key reads its attribute."""
        out: Any = self
        for part in key.split("."):
            out = getattr(out, part)
        return out

    def with_values(self: S, changes: dict[str, Any]) -> S:
        """A copy with the dotted keys of ``changes`` set, each value checked as a palui.toml value is
        (:func:`checked`). Raises ConfigError."""
        values = {k: checked("changed settings", k, v) for k, v in changes.items()}
        return build(type(self), values, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


class Key(NamedTuple):
    """One configuration key: its dotted ``name``, its ``rule`` and its ``default``."""

    name: str
    rule: Rule
    default: Any

    @property
    def section(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def leaf(self) -> str:
        return self.name.rpartition(".")[2]


def _keys(cls: type, prefix: str = "") -> dict[str, Key]:
    out: dict[str, Key] = {}
    for f in dataclasses.fields(cls):
        sub = section_type(f.type)
        if sub is not None:
            out.update(_keys(sub, f"{prefix}{f.name}."))
            continue
        rules = [m for m in get_args(f.type)[1:] if isinstance(m, Rule)] if get_origin(f.type) is Annotated else []
        if rules:
            default = f.default_factory() if callable(f.default_factory) else f.default
            out[prefix + f.name] = Key(prefix + f.name, rules[0], default)
    return out


#: Every configuration key by its dotted name, in the model's order.
KEYS: dict[str, Key] = _keys(Settings)
#: The largest value of each numeric key and its unit in words; the smallest is the rule's (above 0, or 0 for
#: a key where 0 is "off"). An expiry of 10^23 seconds once made an approval that no command could read: a
#: value the clock, SQLite or the machine cannot hold never gets past the start. The README shows each range.
RANGES: dict[str, tuple[int, str]] = {
    k: (key.rule.high, key.rule.unit) for k, key in KEYS.items() if isinstance(key.rule, (Whole, Amount))}
#: The sections (``"caps"``, ``"mcp.oauth"``): a table in palui.toml, never a value.
SECTIONS = frozenset(k.rpartition(".")[0] for k in KEYS) - {""}


def range_text(key: str) -> str:
    """The range of a numeric key in words, as the README's configuration table shows it:
    ``1 to 1,000 model steps``, ``0 (off) to 1,000 calls``, ``above 0, up to 2,592,000 seconds (30 days)``."""
    rule = KEYS[key].rule
    if not isinstance(rule, (Whole, Amount, Fraction)):
        raise KeyError(f"{key} has no range")
    return rule.range_text()


def example(key: str) -> str:
    """How the key is written in palui.toml, e.g. ``daily_tokens = 1000000 under [caps]``."""
    k = KEYS[key]
    kind = k.rule.kind
    if kind == "bool":
        value = "true" if not k.default else "false"
    elif kind == "frac?":
        value = "0.25"
    elif kind in NUMERIC_KINDS:
        value = str(k.default)
    elif kind == "strlist":
        value = '["json://localhost"]'
    else:
        value = '"…"'
    return f"{k.leaf} = {value}" + (f" under [{k.section}]" if k.section else "")


def checked(where: str, key: str, value: Any, *, from_env: bool = False) -> Any:
    """``value`` of ``key`` if its rule allows it; an environment variable's text (``from_env``) is parsed
    first, while a file value must already have its TOML type (``port = "8765"`` is refused: fail closed on a
    type error). Messages name the type in words and say how to write the key
    (docs/decisions/0122-messages-reworded.md), e.g. ``key 'caps.daily_tokens' has the wrong type: it must be a
    whole number, not the quoted string 'lots'; write it without quotes, e.g. daily_tokens = 1000000 under
    [caps]``. Raises ConfigError naming ``where`` (the file or variable) and the key."""
    rule = KEYS[key].rule
    if not from_env and isinstance(value, str) and not rule.text:
        shown = "" if rule.secret else f" {got(value)}"
        raise ConfigError(f"{where}: key '{key}' has the wrong type: it must be {KIND_WORDS[rule.kind]}, not the "
                          f"quoted string{shown}; write it without quotes, e.g. {example(key)}")
    try:
        parsed = rule.parse(value) if from_env else value
        if parsed is None and rule.kind in ("int+?", "frac?"):
            return None  # unset: its default is derived (palui.config)
        return rule.check(parsed)
    except Refused as e:
        shown = f" (got {got(value)})" if e.echo and rule.echoes(value) else ""
        raise ConfigError(f"{where}: key '{key}': {e}{shown}") from None


def option_value(key: str, text: str, *, echo: bool = True) -> Any:
    """A command-line option's or a form field's ``text`` as a value of ``key`` (``--timeout`` sets what
    ``mcp.call_timeout_seconds`` sets, for one connector), by the key's rule. Raises Refused saying what is
    allowed, followed (``echo``) by the text given (the person's own command line: shown, escaped)."""
    try:
        return KEYS[key].rule.check(KEYS[key].rule.parse(text))
    except Refused as e:
        raise Refused(f"{e} (got {got(text)})" if e.echo and echo else str(e), echo=False) from None


def value_for(key: str, value: Any, name: str) -> Any:
    """``value`` given for what ``key`` sets, at a door other than the configuration (a connector's own
    ``timeout_seconds``, a job's ``token_cap``): the same rule holds (spec §10.4). Raises UsageError naming
    ``name`` and what is allowed, with the value as every surface shows it."""
    try:
        return KEYS[key].rule.check(value)
    except Refused as e:
        raise UsageError(f"{name}: {e}" + (f" (got {got(value)})" if e.echo else "")) from None


def stored_value(key: str, value: Any) -> Any:
    """A value of what ``key`` sets, read back from storage (a connector's own timeout): the value if the rule
    allows it, else None, so the setting applies: a row written before the rule held (``--timeout inf``)
    reaches neither a clock nor a JSON answer."""
    if value is None:
        return None
    try:
        return KEYS[key].rule.check(value)
    except Refused:
        return None


def documented_keys() -> dict[str, Any]:
    """Every configuration key with its default (the README documents each one); a derived default is shown
    as it resolves with the other defaults (``caps.webhook_runs_per_hour`` = 20)."""
    return {k: key.default for k, key in KEYS.items()}
