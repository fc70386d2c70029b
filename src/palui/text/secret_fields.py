"""Which fields of a server's form ask for a secret (spec §7.8). Pure.

MCP 2025-11-25 ("Elicitation", security considerations): servers MUST NOT request sensitive
information through form mode. Palui holds them to it: a field whose name, title, description or
``format`` speaks of a password, passphrase, token, API key, secret, PIN, card number, IBAN or
one-time code is a **secret field**. Palui refuses such a question unless the person allowed secret
questions for that connector; then the field is asked with hidden input and its value is never
stored, logged, put in a conversation or taken from a command line.

Words are matched whole, in names split at ``_``, ``-``, ``.`` and camelCase (``apiKey``,
``card_number``, ``OTP``) and in prose ("Your PIN", "one-time code"; "tokens", plural, is a count);
only fields the person types (text and numbers) count. A false alarm only declines a question the
person can allow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: (pattern over the lower-cased words joined by single spaces, what the person is told it asked for)
_KINDS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), what) for p, what in (
    (r"\b(password|passwd|pwd|passcode)s?\b", "a password"),
    (r"\bpass ?phrases?\b", "a passphrase"),
    (r"\b(api ?keys?|access ?keys?|secret ?keys?|private ?keys?|apikey)\b", "an API key"),
    (r"\b(one ?time|single ?use) ?(pass ?)?(codes?|passwords?|pins?|tokens?)\b|\b(otp|totp|hotp|2fa|mfa)\b",
     "a one-time code"),
    (r"\b(card ?numbers?|credit ?cards?|debit ?cards?|cc ?numbers?|cvv|cvc|pan)\b", "a card number"),
    (r"\biban\b", "an IBAN"),
    (r"\bpin( ?codes?| ?numbers?)?\b", "a PIN"),
    (r"\b(token|bearer)\b", "a token"),
    (r"\b(secrets?|client ?secret)\b", "a secret"),
))


def _words(text: str) -> str:
    """``apiKey_2FA-code`` -> ``api key 2fa code``: split camelCase, separators and punctuation; lower case."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return " ".join(re.split(r"[^0-9A-Za-z]+", spaced)).lower().strip()


def secret_kind(name: str, prop: Mapping[str, Any]) -> str | None:
    """What field ``name`` (its schema ``prop``) asks for when it looks like a secret ("a password"),
    else None. A string ``format`` of ``password`` counts (some servers send it). Only a field the person
    types can carry a secret: yes/no fields and choices from the server's own list never count."""
    if prop.get("type") not in ("string", "number", "integer") or "enum" in prop or "oneOf" in prop:
        return None
    texts = [name] + [str(prop.get(k)) for k in ("title", "description", "format") if isinstance(prop.get(k), str)]
    words = " | ".join(_words(t) for t in texts)
    for pattern, what in _KINDS:
        if pattern.search(words):
            return what
    return None


def secret_fields(schema: Mapping[str, Any] | None) -> dict[str, str]:
    """``{field name: what it asks for}`` for each secret field of a requested schema (empty: none)."""
    props = (schema or {}).get("properties")
    if not isinstance(props, Mapping):
        return {}
    out = {}
    for name, prop in props.items():
        what = secret_kind(str(name), prop if isinstance(prop, Mapping) else {})
        if what:
            out[str(name)] = what
    return out


def refusal_notice(server: str, connector_id: str, kinds: Mapping[str, str]) -> str:
    """The notice of a refused secret question: ``Notes (mcp-notes) asked for a password: refused; use the
    server's own sign-in. …`` (what it asked for, in words; never a value)."""
    what = sorted(set(kinds.values()))
    asked = what[0] if len(what) == 1 else ", ".join(what[:-1]) + " and " + what[-1]
    return (f"{server} ({connector_id}) asked for {asked}: refused; use the server's own sign-in. To answer such "
            f"questions from it with hidden input: palui connectors allow-secret-questions {connector_id}")
