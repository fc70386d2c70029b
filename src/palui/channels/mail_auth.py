"""Whose mail is it: ``Authentication-Results`` (RFC 8601) read the way the email channel trusts them (spec §8.3).

``From`` can be written by anyone, so the email channel takes a mail as the person's only when the
receiving server the person named (its *authserv-id*, e.g. ``mx.google.com``) vouches for it:

- the **topmost** ``Authentication-Results`` header whose authserv-id is the configured one is read, and
  only that one: headers of other ids, and any below it (a sender can write headers of any id into the
  mail before it reaches the receiving server, which puts its own on top), are ignored; a header of an
  unknown version (RFC 8601 §2.2) is skipped;
- it must say ``dmarc=pass`` with ``header.from`` the ``From`` domain, or ``dkim=pass`` with a signing
  domain (``header.d``, else the domain of ``header.i``) *aligned* with the ``From`` domain: the same, a
  parent of it with at least two labels, or a subdomain of it (DMARC's relaxed alignment, without the
  public suffix list). ``spf=pass`` alone never counts: SPF checks the envelope sender, not the ``From``
  the person sees;
- the mail has exactly one ``From`` header with exactly one address.

The channel then compares that address with the paired one (:mod:`palui.channels.mail`). Pure: no I/O.
DKIM and DMARC vouch for the domain, not the mailbox: a provider that let another user send with the
person's address would pass (large providers refuse it; docs/channels.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.headerregistry import HeaderRegistry

__all__ = ["AuthResult", "Judgement", "Method", "from_address", "judge", "parse_header"]

_KEYWORD = re.compile(r"^[A-Za-z0-9_.-]+$")
_REGISTRY = HeaderRegistry()


@dataclass(frozen=True)
class Method:
    """One result of a header: ``method`` (lower case, without a version), ``result`` (lower case) and its
    properties (``{"header.d": "example.org"}``; names lower case, values as written)."""

    method: str
    result: str
    props: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AuthResult:
    """One ``Authentication-Results`` header: its authserv-id (lower case) and results (empty for ``none``)."""

    authserv_id: str
    results: tuple[Method, ...]


@dataclass(frozen=True)
class Judgement:
    """Whether a mail is vouched for: ``address`` is the ``From`` address (lower case) when it is one address,
    ``trusted`` when the configured server vouches for its domain, ``why`` one line for the log."""

    trusted: bool
    address: str | None
    why: str


def _scan(text: str) -> tuple[str, list[str]]:
    """``text`` without comments (nested, with backslash escapes), each quoted string replaced by
    ``\\x00N\\x00`` (its unescaped content is ``strings[N]``)."""
    out: list[str] = []
    strings: list[str] = []
    i, depth, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if depth:
            if ch == "\\":
                i += 2
                continue
            depth += ch == "("
            depth -= ch == ")"
            i += 1
            continue
        if ch == "(":
            depth = 1
            out.append(" ")
        elif ch == '"':
            j, value = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                value.append(text[j])
                j += 1
            strings.append("".join(value))
            out.append(f"\x00{len(strings) - 1}\x00")
            i = j
        else:
            out.append(ch)
        i += 1
    if depth:
        out.append("\x00unterminated\x00")  # a comment never closed: the header does not parse
    return "".join(out), strings


def _value(token: str, strings: list[str]) -> str:
    return re.sub(r"\x00(\d+)\x00", lambda m: strings[int(m.group(1))], token)


def parse_header(value: str) -> AuthResult | None:
    """One header's value (after ``Authentication-Results:``), or None when it cannot be read or has a
    version other than 1 (RFC 8601 §2.2: such a header is ignored)."""
    cleaned, strings = _scan(value.replace("\r", " ").replace("\n", " "))
    if "\x00unterminated\x00" in cleaned:
        return None
    head, *rest = cleaned.split(";")
    words = head.split()
    if not words or len(words) > 2:
        return None
    authserv_id = _value(words[0], strings).strip().lower()
    if not authserv_id or (len(words) == 2 and words[1] != "1"):
        return None
    results: list[Method] = []
    for segment in rest:
        tokens = re.sub(r"\s*([=./])\s*", r"\1", segment).split()
        if not tokens:
            continue
        if tokens == ["none"] and not results:
            continue
        method, eq, result = tokens[0].partition("=")
        method = method.split("/")[0].lower()
        if not eq or not _KEYWORD.match(method) or not _KEYWORD.match(result):
            return None  # a result that does not parse: the header is not read (fail closed)
        props: dict[str, str] = {}
        for token in tokens[1:]:
            name, eq, raw = token.partition("=")
            if eq and name.lower() not in props:
                props[name.lower()] = _value(raw, strings).strip()
        results.append(Method(method, result.lower(), props))
    return AuthResult(authserv_id, tuple(results))


def _matches(authserv_id: str, wanted: str) -> bool:
    wanted = wanted.strip().lower()
    if wanted.startswith("*."):  # a provider whose receiving hosts differ (mx1.…, mx2.…): named by their domain
        return authserv_id.endswith(wanted[1:]) and len(authserv_id) > len(wanted) - 1
    return authserv_id == wanted


def aligned(signer: str, domain: str) -> bool:
    """DMARC's relaxed alignment without the public suffix list: the same domain, the signer a parent of the
    ``From`` domain (at least two labels), or a subdomain of it."""
    signer, domain = signer.strip().lower().rstrip("."), domain.strip().lower().rstrip(".")
    if not signer or not domain:
        return False
    if signer == domain or signer.endswith("." + domain):
        return True
    return domain.endswith("." + signer) and "." in signer


def from_address(values: Sequence[str]) -> str | None:
    """The one address of the ``From`` header(s), lower case; None for no ``From``, several headers, a group
    or several addresses, or one without a domain."""
    if len(values) != 1:
        return None
    try:
        header = _REGISTRY("from", values[0])
        addresses = header.addresses  # type: ignore[attr-defined]  # the registry makes an AddressHeader for "from"
    except Exception:  # noqa: BLE001 - an unparseable From is no address
        return None
    if len(addresses) != 1 or header.defects:
        return None
    a = addresses[0]
    if not a.username or not a.domain or "@" in a.domain:
        return None
    return f"{a.username}@{a.domain}".lower()


def judge(results: Sequence[str], froms: Sequence[str], authserv_id: str) -> Judgement:
    """Read a mail's ``Authentication-Results`` values (``results``, top to bottom as in the mail) and its
    ``From`` values as the module docstring says, for the receiving server ``authserv_id``."""
    address = from_address(froms)
    if address is None:
        return Judgement(False, None, "the mail has no single From address")
    domain = address.rpartition("@")[2]
    mine = next((r for r in (parse_header(v) for v in results) if r is not None
                 and _matches(r.authserv_id, authserv_id)), None)
    if mine is None:
        return Judgement(False, address, f"no Authentication-Results from {authserv_id}")
    for m in mine.results:
        if m.method == "dmarc" and m.result == "pass" and m.props.get("header.from", "").lower().rstrip(".") == domain:
            return Judgement(True, address, f"{mine.authserv_id}: dmarc=pass for {domain}")
    for m in mine.results:
        if m.method == "dkim" and m.result == "pass":
            signer = m.props.get("header.d") or m.props.get("header.i", "").rpartition("@")[2]
            if aligned(signer, domain):
                return Judgement(True, address, f"{mine.authserv_id}: dkim=pass by {signer.lower()}")
    said = ", ".join(f"{m.method}={m.result}" for m in mine.results) or "none"
    return Judgement(False, address, f"{mine.authserv_id} says {said}: no aligned dkim or dmarc pass for {domain}")
