"""How an inbound webhook delivery proves it knows the secret (spec §8.5).

Three schemes, every credential present must be valid and at least one must be present:

- **HMAC of the body** ("GitHub-style"): ``X-Palui-Signature: sha256=<hex>`` or GitHub's
  ``X-Hub-Signature-256: sha256=<hex>``, HMAC-SHA256 of the raw body keyed with the secret's
  UTF-8 bytes. Nothing but the body is signed: a delivery-id header next to it is not covered.
- **Standard Webhooks** (https://www.standardwebhooks.com/): ``webhook-id``, ``webhook-timestamp``
  (integer Unix seconds) and ``webhook-signature`` (one or more space-separated ``v1,<base64>``;
  any one matching is enough), HMAC-SHA256 of ``<id>.<timestamp>.<body>`` keyed with the same
  secret bytes, which senders configure as ``whsec_<base64 of the secret bytes>``
  (:func:`whsec`). A timestamp more than :data:`TOLERANCE_SECONDS` (5 minutes) from this
  server's clock is refused. Here the delivery id is signed.
- **Bearer**: ``Authorization: Bearer <secret>`` (the weaker mode: the secret travels).

Every refusal is :class:`~palui.errors.WebhookRefused` (401) with a message that names the
header at fault and never echoes a credential (no secret, no signature value).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from palui.errors import WebhookRefused
from palui.text.secret_compare import same_secret

HMAC_HEADERS = ("x-palui-signature", "x-hub-signature-256")
STANDARD_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
TOLERANCE_SECONDS = 300
_SIG_RE = re.compile(r"\Asha256=([0-9a-fA-F]{64})\Z")
_TS_RE = re.compile(r"\A[0-9]{1,12}\Z")

HMAC_SCHEME = "hmac"
STANDARD_SCHEME = "standard"
BEARER_SCHEME = "bearer"


@dataclass(frozen=True)
class Authenticated:
    """A delivery that passed: ``scheme`` (``standard`` when Standard Webhooks headers were
    verified, else ``hmac``, else ``bearer``), ``signature`` (the verified HMAC header value, lower
    case, "" without one), ``delivery_id`` (the signed ``webhook-id`` for ``standard``, else None)."""

    scheme: str
    signature: str = ""
    delivery_id: str | None = None


def whsec(secret: str) -> str:
    """The secret as Standard Webhooks senders take it: ``whsec_<base64 of its UTF-8 bytes>``."""
    return "whsec_" + base64.b64encode(secret.encode()).decode("ascii")


def standard_signature(secret: str, delivery_id: str, timestamp: str, body: bytes) -> str:
    """One ``v1,<base64>`` entry of ``webhook-signature`` for this delivery (what a sender computes)."""
    mac = hmac.new(secret.encode(), f"{delivery_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def _check_hmac(secret: str, body: bytes, header: str, value: str) -> str:
    m = _SIG_RE.match(value.strip())
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not m or not same_secret(m.group(1).lower(), expected):
        raise WebhookRefused(401, f"the {header} signature does not match the body")
    return value.strip().lower()


def _check_standard(secret: str, body: bytes, headers: Mapping[str, str], now: float) -> str:
    """Verify the Standard Webhooks headers; returns the signed delivery id."""
    missing = [h for h in STANDARD_HEADERS if not (headers.get(h) or "").strip()]
    if missing:
        raise WebhookRefused(401, f"a Standard Webhooks delivery needs {', '.join(STANDARD_HEADERS)}; "
                                  f"missing: {', '.join(missing)}")
    delivery_id = (headers.get("webhook-id") or "").strip()
    timestamp = (headers.get("webhook-timestamp") or "").strip()
    if not _TS_RE.match(timestamp):
        raise WebhookRefused(401, "webhook-timestamp must be whole Unix seconds")
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        raise WebhookRefused(401, f"webhook-timestamp is more than {TOLERANCE_SECONDS // 60} minutes from this "
                                  "server's clock (a replay, or a clock that is off)")
    expected = base64.b64decode(standard_signature(secret, delivery_id, timestamp, body)[3:])
    for entry in (headers.get("webhook-signature") or "").split():
        version, _, value = entry.partition(",")
        if version != "v1":
            continue  # other versions (v1a: asymmetric) are not ours; another entry may match
        try:
            given = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(given, expected):
            return delivery_id
    raise WebhookRefused(401, "no webhook-signature entry matches (v1,<base64 of HMAC-SHA256 of id.timestamp.body>)")


def authenticate(secret: str | None, body: bytes, headers: Mapping[str, str],
                 now: float | None = None) -> Authenticated:
    """Check a delivery's credentials (``headers`` with lower-case names; ``now`` epoch seconds for
    the Standard Webhooks timestamp window). Returns :class:`Authenticated`.

    Raises WebhookRefused(401) when none is present or any present one is wrong.
    """
    if not secret:
        raise WebhookRefused(401, "this webhook has no secret on file; recreate it")
    now = time.time() if now is None else now
    signature = ""
    delivery_id = None
    presented = False
    for h in HMAC_HEADERS:
        value = headers.get(h)
        if value is not None:
            presented = True
            signature = signature or _check_hmac(secret, body, h, value)
    if headers.get("webhook-signature") is not None:
        presented = True
        delivery_id = _check_standard(secret, body, headers, now)
    auth = headers.get("authorization")
    if auth is not None:
        presented = True
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() != "bearer" or not same_secret(token.strip(), secret):
            raise WebhookRefused(401, "the bearer secret is wrong")
    if not presented:
        raise WebhookRefused(401, "the delivery is not signed (X-Palui-Signature or X-Hub-Signature-256: "
                                  "sha256=<HMAC of the body>, or the Standard Webhooks headers webhook-id, "
                                  "webhook-timestamp, webhook-signature) and carries no bearer secret")
    if delivery_id is not None:
        return Authenticated(STANDARD_SCHEME, signature, delivery_id)
    return Authenticated(HMAC_SCHEME if signature else BEARER_SCHEME, signature)
