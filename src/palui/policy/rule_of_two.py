"""The Rule of Two for reads that reach outside (spec §4.5). Pure: the facts come in, a reason goes out.

A hijacked model can carry private data out through a *read*: it fetches an address the attacker
chose, with the data in the URL. So in a tainted turn a call to a tool that reaches outside
(``web__fetch_page``, an MCP tool with ``openWorldHint: true``, a tool the person flagged) asks when

1. an argument carries an address or host that appears in untrusted content of the conversation but
   not in the person's own messages, nor was reached by an earlier call of the conversation that this
   rule let run (the attacker picks the destination), or
2. an argument carries text from the person's private stores (memories, tasks, results of connectors
   the person marked private) seen in this conversation, and that text is neither in the person's own
   messages nor in untrusted content (private data going out).

When retention (``retention.days``, spec §10.2) deleted some of the conversation's untrusted content, the
rule no longer sees every address that content named, while the turns the model is sent still hold it:
then every address that is not the person's, nor reached earlier, asks (it fails closed).

Hosts are taken from URLs (``scheme://host``), e-mail addresses and bare domain names (``a.example``;
a last label that is a common file extension such as ``.pdf`` or ``.json`` is not a domain) in every
string argument, after URL-decoding. A host *appears in* untrusted content when it, a parent domain of
at least two labels, or a subdomain of it stands there as a host; it is *the person's* when it or a
parent domain of it is a host in their own messages (so ``blog.example.com`` is theirs after they wrote
``example.com``, and ``evil.co.uk`` is not theirs after ``bbc.co.uk``). Private text is compared word by
word: a word of an argument counts when it has at least 4 characters and a digit, or at least 8
characters, and is a whole word of a private result (a PIN, an IBAN, a name that is not common); whole
addresses from private results count too. Encodings other than percent-encoding (base64…) are not
looked through.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from palui.text.escape import normalize_for_marks

_URL = re.compile(r"[a-z][a-z0-9+.-]*://(?:[^/\s?#@]*@)?(\[[0-9a-f:.]+\]|[^/\s?#:\"'<>\\]+)")
_EMAIL = re.compile(r"[a-z0-9._%+-]+@((?:[a-z0-9-]+\.)+[a-z]{2,63})\b")
_DOMAIN = re.compile(r"(?<![a-z0-9@._-])((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+([a-z]{2,63}))(?![a-z0-9-])")
_IP = re.compile(r"(?<![0-9.])((?:\d{1,3}\.){3}\d{1,3})(?![0-9.])")
_TOKEN = re.compile(r"[^\W_]+")
_PERCENT = re.compile(r"(?:%[0-9a-fA-F]{2})+")
_YEAR = re.compile(r"(?:19|20)\d\d")
# Endings that are file extensions and not top-level domains: "report.pdf" is a file, not a host.
NOT_TLDS = frozenset({"pdf", "txt", "html", "htm", "json", "csv", "png", "jpg", "jpeg", "gif", "svg", "xml",
                      "yaml", "yml", "toml", "log", "exe", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "tar",
                      "gz", "tgz", "bz2", "js", "ts", "css", "mp3", "mp4", "wav", "webp", "ini", "cfg", "conf",
                      "bak", "tmp", "lock", "pyc", "md5", "sha", "jsonl", "ndjson"})
#: Built-in tools that reach outside (MCP tools say so with ``openWorldHint``, the person with a flag).
BUILTIN_OUTSIDE = frozenset({"web__fetch_page"})
MIN_TOKEN_DIGIT = 4
MIN_TOKEN_WORD = 8


@dataclass(frozen=True)
class OutsideFacts:
    """What the rule looks at, gathered by the runner for one call.

    ``untrusted``: (source, text) of the conversation's untrusted content (``"web__fetch_page at step 1"``);
    ``own``: the person's own messages (chat and job inputs of the conversation);
    ``private``: (source, text) of private-store results the model saw (``"recall__search_memories at step 1"``);
    ``private_connectors``: the connectors whose results are private (an MCP connector marked private is
    untrusted too: its own results do not make its text "already written by others");
    ``reached``: the arguments (as JSON text) of earlier calls of this conversation to tools that reach
    outside and ran: their hosts were let through by this rule (or reached before any taint, or approved by
    the person), so reaching them again does not ask (a page's own ``URL:`` line names the host it came from);
    ``pruned``: retention deleted some of the conversation's untrusted content, so ``untrusted`` is not all of it;
    ``unknown_context``: why Palui cannot see what the caller's model has read (a gateway session, spec §8.6):
    then every address that is not the person's, nor reached earlier, asks (it fails closed), with this why.
    """

    untrusted: Sequence[tuple[str, str]]
    own: Sequence[str]
    private: Sequence[tuple[str, str]]
    private_connectors: frozenset[str] = frozenset()
    reached: Sequence[str] = ()
    pruned: bool = False
    unknown_context: str | None = None


def reaches_outside(name: str, annotations: Any, flagged: bool) -> bool:
    """Whether the tool reaches outside: a built-in that does (``web__fetch_page``), an MCP tool whose raw
    annotations have ``openWorldHint`` as the JSON boolean ``true`` (a string ``"true"`` is absent, as for
    every hint, spec §2), or a tool the person flagged "reaches outside"."""
    return (flagged or name in BUILTIN_OUTSIDE
            or (isinstance(annotations, dict) and annotations.get("openWorldHint") is True))


def _norm(text: str) -> str:
    return normalize_for_marks(text)


def unquote(text: str) -> str:
    """``text`` with percent-escapes decoded (UTF-8, bad bytes replaced) and ``+`` read as a space, as a URL's
    query string means them."""
    def one(m: re.Match[str]) -> str:
        raw = m.group(0)
        return bytes(int(raw[i + 1:i + 3], 16) for i in range(0, len(raw), 3)).decode("utf-8", "replace")

    return _PERCENT.sub(one, text.replace("+", " "))


def hosts(text: str) -> list[str]:
    """The hosts named in ``text`` (already normalised: lower case), in order, without duplicates."""
    out: list[str] = []
    for m in _URL.finditer(text):
        out.append(m.group(1).strip("[]").rstrip("."))
    out += [m.group(1) for m in _EMAIL.finditer(text)]
    out += [m.group(1) for m in _DOMAIN.finditer(text) if m.group(2) not in NOT_TLDS]
    out += [m.group(1) for m in _IP.finditer(text)]
    seen: dict[str, None] = {}
    for h in out:
        if h:
            seen.setdefault(h, None)
    return list(seen)


def _parents(host: str) -> list[str]:
    """``a.b.example`` → ``[a.b.example, b.example]`` (parents of two labels or more); an IP or a
    one-label host is only itself."""
    labels = host.split(".")
    if len(labels) < 2 or host.replace(".", "").isdigit():
        return [host]
    return [".".join(labels[i:]) for i in range(len(labels) - 1)]


def _appears_in(host: str, text: str) -> bool:
    for name in _parents(host):
        if re.search(rf"(?<![a-z0-9-]){re.escape(name)}(?![a-z0-9-])", text):
            return True
    return False


def _strings(args: Any) -> Iterable[str]:
    if isinstance(args, str):
        yield args
    elif isinstance(args, dict):
        for k, v in args.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(args, list):
        for v in args:
            yield from _strings(v)


def _distinctive(token: str) -> bool:
    """A word that says something about the person: 4+ characters with a digit (not a year), or 8+."""
    if len(token) >= MIN_TOKEN_WORD:
        return True
    return len(token) >= MIN_TOKEN_DIGIT and any(c.isdigit() for c in token) and not _YEAR.fullmatch(token)


def _has_word(word: str, text: str) -> bool:
    return re.search(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", text) is not None


def rule_of_two(tool: str, args: Any, facts: OutsideFacts) -> str | None:
    """Why this call to a tool that reaches outside, in a tainted turn, must ask — or None when it may run.

    The reason names which half of the rule held and where the content came from, e.g. ``Rule of Two:
    fetching an address that came from untrusted content: web__fetch_page at step 1 (evil.example)``.
    """
    values = [_norm(v) for s in _strings(args) for v in ((s, unquote(s)) if "%" in s or "+" in s else (s,))]
    text = " ".join(values)
    own = [_norm(t) for t in facts.own]
    own_hosts = {h for t in own for h in hosts(t)}
    known = own_hosts | {h for t in facts.reached for h in hosts(_norm(t))}
    untrusted = [(src, _norm(t)) for src, t in facts.untrusted]
    verb = "fetching" if tool == "web__fetch_page" else "reaching"
    for host in hosts(text):
        if any(p in known for p in _parents(host)):
            continue
        src = next((s for s, t in untrusted if _appears_in(host, t)), None)
        if src is not None:
            return f"Rule of Two: {verb} an address that came from untrusted content: {src} ({host})"
        if facts.pruned:
            return (f"Rule of Two: {verb} an address you did not write, and this conversation's older untrusted "
                    f"content was pruned by retention.days ({host})")
        if facts.unknown_context:
            return (f"Rule of Two: {verb} an address not reached earlier by this client, and "
                    f"{facts.unknown_context} ({host})")
    if not facts.private:
        return None
    public = [t for src, t in untrusted if src.split("__", 1)[0] not in facts.private_connectors]
    own_text = " ".join(own)
    own_words = set(_TOKEN.findall(own_text))
    tokens = {t for t in _TOKEN.findall(text) if _distinctive(t) and t not in own_words}
    addresses = {a for a in set(hosts(text)) | set(re.findall(r"[a-z0-9._%+-]+@[a-z0-9.-]+", text))
                 if len(a) >= MIN_TOKEN_WORD and a not in own_text}
    for src, raw in facts.private:
        priv = _norm(raw)
        priv_words = set(_TOKEN.findall(priv))
        found = sorted(t for t in tokens if t in priv_words) + sorted(a for a in addresses if a in priv)
        for item in found:
            if any(_has_word(item, t) for t in public):
                continue  # already in text written by others: not the person's private data going out
            return f"Rule of Two: sending text from your private stores outside: {src} ({item!r})"
    return None
