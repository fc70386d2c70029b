"""A secret compared in constant time, whatever text an attacker sent.

``hmac.compare_digest`` raises ``TypeError`` on a ``str`` holding any non-ASCII character, so a token, cookie,
CSRF value or OAuth ``state`` compared as text would answer a request carrying ``é`` with a 500 instead of a
refusal. Both sides are compared as UTF-8 bytes (lone surrogates kept, never an error).
"""

from __future__ import annotations

import hmac


def _raw(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def same_secret(given: str | bytes, expected: str | bytes) -> bool:
    """Whether ``given`` (from a request: hostile, any text) equals ``expected``, in constant time for equal
    lengths (``hmac.compare_digest`` on the UTF-8 bytes). Never raises."""
    return hmac.compare_digest(_raw(given), _raw(expected))
