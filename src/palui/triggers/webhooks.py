"""Inbound webhooks: secrets, the replay store and the rate limit (spec §8.5).

A request to ``POST /hooks/<id>`` is checked in this order, and a refused request
stores nothing:

1. unknown ``<id>`` → 404;
2. body over :data:`MAX_BODY_BYTES` (262,144 bytes, counted while reading) → 413;
3. authentication → 401 (:mod:`palui.triggers.signing`: ``X-Palui-Signature`` /
   ``X-Hub-Signature-256`` HMAC of the body, Standard Webhooks ``webhook-id`` /
   ``webhook-timestamp`` / ``webhook-signature``, or ``Authorization: Bearer <secret>``);
4. a delivery seen before → answered ``duplicate`` (200), nothing started
   (:func:`delivery_key`: the hash of its signature and body was seen within ``retention.days``, or
   its delivery id within 24 h; an unsigned delivery-id header never makes a seen body new; for
   Standard Webhooks the signed ``webhook-id`` alone decides);
5. more than ``webhooks.rate_per_minute`` accepted deliveries of this webhook in the
   last 60 s → 429 (after authentication, so a stranger cannot use up a webhook's rate).

How long a replay is refused (spec §8.5): a signature over the body alone (``X-Palui-Signature``,
``X-Hub-Signature-256``) or the bearer secret says nothing about *when* it was made, so a captured
delivery stays valid forever; its content key is kept as long as the retention keeps delivery records
(``retention.days``, :mod:`palui.store.retention`), and only then can it be replayed. Only a signed
timestamp (Standard Webhooks, refused when more than 5 minutes off) bounds replay: those records are
dropped after 24 h, since the timestamp check refuses anything older.

Secrets are random, shown once by ``palui webhooks add`` and kept in
``<data dir>/secrets/webhooks/<id>.secret`` (mode 0600, directory 0700): HMAC needs the
secret itself, so it cannot be stored as a hash.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palui.errors import NotFound, UsageError, WebhookRefused
from palui.store.db import Database
from palui.text.display import named
from palui.triggers.signing import STANDARD_SCHEME, Authenticated
from palui.triggers.signing import authenticate as authenticate  # re-exported: the check of step 3

MAX_BODY_BYTES = 262_144
#: How long a Standard Webhooks delivery id (and an unsigned delivery-id header) makes a duplicate.
REPLAY_WINDOW_SECONDS = 86_400
RATE_WINDOW_SECONDS = 60
#: Delivery-id headers a sender may add next to a body signature or a bearer secret: not signed.
DELIVERY_HEADERS = ("x-palui-delivery", "x-github-delivery", "webhook-id")
EVENT_HEADERS = ("x-palui-event", "x-github-event")
NAME_RE = re.compile(r"\A\w[\w .-]{0,63}\Z")


@dataclass(frozen=True)
class Webhook:
    """A row of ``webhooks``: ``id`` (the URL's last segment), ``name``, ``created_at`` (epoch s)."""

    id: str
    name: str
    created_at: float


# -- secrets -------------------------------------------------------------------------------------


def secret_path(secrets_dir: Path, hook_id: str) -> Path:
    return secrets_dir / "webhooks" / f"{hook_id}.secret"


def _write_secret(secrets_dir: Path, hook_id: str, secret: str) -> None:
    d = secrets_dir / "webhooks"
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(secrets_dir, 0o700)
    os.chmod(d, 0o700)
    # here, like secrets below: commands that never touch a webhook skip them (docs/decisions/0085-a-light-cli-start.md)
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{hook_id}.", dir=d)  # mode 0600 from the start
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, secret_path(secrets_dir, hook_id))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_secret(secrets_dir: Path, hook_id: str) -> str | None:
    """The webhook's secret, or None when its file is missing or empty (then every request gets 401)."""
    try:
        s = secret_path(secrets_dir, hook_id).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return s or None


# -- the webhooks table ----------------------------------------------------------------------------


def add(db: Database, secrets_dir: Path, name: str) -> tuple[Webhook, str]:
    """Create a webhook and its secret. Returns (webhook, secret); the secret is not shown again.

    Raises UsageError for a bad or taken name.
    """
    name = (name or "").strip()
    if not NAME_RE.match(name):
        raise UsageError("a webhook name must be 1-64 letters, digits, spaces, dots, dashes or underscores")
    import secrets

    hook_id = secrets.token_hex(12)
    secret = secrets.token_urlsafe(32)
    with db.write() as c:
        if c.execute("SELECT 1 FROM webhooks WHERE name = ?", (name,)).fetchone():
            raise UsageError(f"a webhook named {named(name)} already exists "
                             f"(remove it first: palui webhooks remove {name})")
        # The secret file is written inside the transaction: no row ever exists without its secret.
        _write_secret(secrets_dir, hook_id, secret)
        c.execute("INSERT INTO webhooks (id, name, created_at) VALUES (?,?,?)", (hook_id, name, time.time()))
    return get(db, name), secret


def get(db: Database, name: str) -> Webhook:
    """The webhook named ``name`` (its id is accepted too). Raises NotFound."""
    r = db.one("SELECT * FROM webhooks WHERE name = ? OR id = ? ORDER BY name = ? DESC LIMIT 1", (name, name, name))
    if r is None:
        raise NotFound(f"unknown webhook {named(name)} (see: palui webhooks list)")
    return Webhook(r["id"], r["name"], r["created_at"])


def by_id(db: Database, hook_id: str) -> Webhook | None:
    r = db.one("SELECT * FROM webhooks WHERE id = ?", (hook_id,))
    return Webhook(r["id"], r["name"], r["created_at"]) if r else None


def all_hooks(db: Database) -> list[Webhook]:
    return [Webhook(r["id"], r["name"], r["created_at"]) for r in db.all("SELECT * FROM webhooks ORDER BY name")]


def remove(db: Database, secrets_dir: Path, name: str) -> Webhook:
    """Delete a webhook, its secret file and its delivery records. Raises NotFound."""
    hook = get(db, name)
    with db.write() as c:
        c.execute("DELETE FROM webhooks WHERE id = ?", (hook.id,))
        c.execute("DELETE FROM webhook_deliveries WHERE webhook_id = ?", (hook.id,))
    secret_path(secrets_dir, hook.id).unlink(missing_ok=True)
    return hook


# -- checking a delivery ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryKeys:
    """What names a delivery for replay protection (spec §8.5), each ``None`` when absent:

    - ``content``: ``"sig:" + sha256(signature + "\\n" + body)`` (hex), for deliveries signed over
      the body alone or sent with the bearer secret (then the signature is "");
    - ``delivery_id``: ``"id:" + sha256(id)`` (hex) of the sender's delivery id: the signed
      ``webhook-id`` of a Standard Webhooks delivery, else an unsigned delivery-id header.

    A delivery is a duplicate when its ``content`` key was seen within ``retention.days`` (the
    records kept), or its ``delivery_id`` within 24 h. A Standard Webhooks delivery has no
    ``content`` key: its id is signed, so the id alone decides (a sender may send the same body
    twice under two ids), and its timestamp bounds replay, so its record goes after 24 h.
    """

    content: str | None
    delivery_id: str | None

    @property
    def row(self) -> str:
        """The name of the delivery's row (``webhook_deliveries.delivery_key``)."""
        name = self.content or self.delivery_id
        assert name is not None  # every delivery has one of the two
        return name


def _hash_id(value: str) -> str:
    return "id:" + hashlib.sha256(value.strip().encode("utf-8", "replace")).hexdigest()


def delivery_key(headers: Mapping[str, str], auth: Authenticated, body: bytes) -> DeliveryKeys:
    """The keys of a delivery that passed :func:`authenticate` (see :class:`DeliveryKeys`)."""
    if auth.scheme == STANDARD_SCHEME and auth.delivery_id is not None:
        return DeliveryKeys(content=None, delivery_id=_hash_id(auth.delivery_id))
    content = "sig:" + hashlib.sha256(auth.signature.encode() + b"\n" + body).hexdigest()
    for h in DELIVERY_HEADERS:
        value = headers.get(h)
        if value and value.strip():
            return DeliveryKeys(content=content, delivery_id=_hash_id(value))
    return DeliveryKeys(content=content, delivery_id=None)


def event_name(headers: Mapping[str, str]) -> str | None:
    """The sender's event name (``X-GitHub-Event``/``X-Palui-Event``), cut to a safe short word."""
    for h in EVENT_HEADERS:
        value = headers.get(h)
        if value:
            clean = re.sub(r"[^\w.-]", "", value)[:64]
            return clean or None
    return None


def record(db: Database, hook_id: str, keys: DeliveryKeys, body: bytes, rate_per_minute: int,
           now: float | None = None) -> dict[str, Any] | None:
    """In one transaction: forget Standard Webhooks deliveries older than 24 h, answer a duplicate
    (the content key seen in the records kept, or the delivery id in the last 24 h; spec §8.5),
    check the rate, record the new delivery under both keys. Body-only records are pruned by the
    retention (:mod:`palui.store.retention`), not here.

    Returns None for a new delivery, or the earlier delivery ``{"turn","received_at"}`` for a
    duplicate. Raises WebhookRefused(429) when the webhook is over its rate.
    """
    now = time.time() if now is None else now
    with db.write() as c:
        since = now - REPLAY_WINDOW_SECONDS
        # through the partial index webhook_deliveries_timed: the body-only records kept are not scanned
        c.execute("DELETE FROM webhook_deliveries WHERE content_key IS NULL AND received_at <= ?", (since,))
        # two lookups, each through its own index (webhook_id, content_key / delivery_id): an OR
        # would read every record kept for the webhook
        found = [c.execute("SELECT turn_id, received_at FROM webhook_deliveries WHERE webhook_id = ?"
                           " AND content_key = ? ORDER BY received_at LIMIT 1", (hook_id, keys.content)).fetchone(),
                 c.execute("SELECT turn_id, received_at FROM webhook_deliveries WHERE webhook_id = ?"
                           " AND delivery_id = ? AND received_at > ? ORDER BY received_at LIMIT 1",
                           (hook_id, keys.delivery_id, since)).fetchone()]
        seen = min((r for r in found if r is not None), key=lambda r: r["received_at"], default=None)
        if seen:
            return {"turn": seen["turn_id"], "received_at": seen["received_at"]}
        recent = c.execute(
            "SELECT received_at FROM webhook_deliveries WHERE webhook_id = ? AND received_at > ? ORDER BY received_at",
            (hook_id, now - RATE_WINDOW_SECONDS),
        ).fetchall()
        if len(recent) >= rate_per_minute:
            oldest = recent[len(recent) - rate_per_minute][0]
            wait = max(1, int(oldest + RATE_WINDOW_SECONDS - now + 0.999))
            raise WebhookRefused(
                429,
                f"this webhook is over its rate ({rate_per_minute} deliveries per minute); retry in {wait} s",
                retry_after=wait,
            )
        c.execute(
            "INSERT INTO webhook_deliveries (webhook_id, delivery_key, content_key, delivery_id, body_sha256,"
            " body_bytes, received_at) VALUES (?,?,?,?,?,?,?)",
            (hook_id, keys.row, keys.content, keys.delivery_id, hashlib.sha256(body).hexdigest(), len(body), now),
        )
    return None


def attach_turn(db: Database, hook_id: str, keys: DeliveryKeys, turn_id: str) -> None:
    with db.write() as c:
        c.execute(
            "UPDATE webhook_deliveries SET turn_id = ? WHERE webhook_id = ? AND delivery_key = ?",
            (turn_id, hook_id, keys.row),
        )


def forget(db: Database, hook_id: str, keys: DeliveryKeys) -> None:
    """Drop a delivery record whose turn could not be created (so a retry is not a duplicate)."""
    with db.write() as c:
        c.execute("DELETE FROM webhook_deliveries WHERE webhook_id = ? AND delivery_key = ?", (hook_id, keys.row))


def stats(db: Database, hook_id: str, now: float | None = None) -> dict[str, Any]:
    """``{"deliveries_24h","last_delivery"}`` (epoch seconds or None)."""
    now = time.time() if now is None else now
    r = db.row(
        "SELECT COUNT(*), MAX(received_at) FROM webhook_deliveries WHERE webhook_id = ? AND received_at > ?",
        (hook_id, now - REPLAY_WINDOW_SECONDS),
    )
    return {"deliveries_24h": int(r[0]), "last_delivery": r[1]}
