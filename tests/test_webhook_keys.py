"""Replay keys of webhook deliveries (spec §8.5) at the module level, and migration 8 keeping the
deliveries recorded before it as duplicates."""

from __future__ import annotations

import hashlib
import hmac

from palui.store import db as db_module
from palui.store.db import Database
from palui.store.migrations import MIGRATIONS
from palui.triggers import signing
from palui.triggers import webhooks as wh

SECRET = "s3cret-s3cret-s3cret"


def signed(body: bytes, **extra: str) -> dict[str, str]:
    return {"x-palui-signature": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(), **extra}


def keys(body: bytes, headers: dict[str, str], now: float = 1_000_000.0) -> wh.DeliveryKeys:
    return wh.delivery_key(headers, signing.authenticate(SECRET, body, headers, now), body)


def test_an_unsigned_delivery_header_never_makes_a_seen_body_new(tmp_path):
    db = Database(tmp_path / "palui.db")
    body = b'{"n": 1}'
    assert wh.record(db, "h1", keys(body, signed(body, **{"x-palui-delivery": "a"})), body, 100, now=10.0) is None
    for other in ("b", "c", "webhook-id-looking"):
        assert wh.record(db, "h1", keys(body, signed(body, **{"x-palui-delivery": other})), body, 100, now=11.0)
    assert wh.record(db, "h1", keys(body, signed(body)), body, 100, now=11.0)  # no header: still the body
    # The same delivery id with another signed body is the same delivery too.
    other = b'{"n": 2}'
    assert wh.record(db, "h1", keys(other, signed(other, **{"x-palui-delivery": "a"})), other, 100, now=12.0)
    # Another webhook has its own records.
    assert wh.record(db, "h2", keys(body, signed(body)), body, 100, now=12.0) is None
    # After 24 h the body-only record is kept (retention prunes it, spec §8.5): the body is still seen; the
    # unsigned delivery id alone no longer makes another body the same delivery.
    assert wh.record(db, "h1", keys(body, signed(body)), body, 100, now=10.0 + 90_000)
    third = b'{"n": 3}'
    assert wh.record(db, "h1", keys(third, signed(third, **{"x-palui-delivery": "a"})), third, 100,
                     now=12.0 + 90_000) is None
    db.close()


def test_standard_webhooks_keys_are_the_signed_id_only():
    body = b"{}"
    ts = "1000000"
    headers = {"webhook-id": "msg_1", "webhook-timestamp": ts,
               "webhook-signature": signing.standard_signature(SECRET, "msg_1", ts, body)}
    k = keys(body, headers)
    assert k.content is None and k.delivery_id == "id:" + hashlib.sha256(b"msg_1").hexdigest()
    assert k.row == k.delivery_id
    # An unsigned webhook-id next to a body signature is only an unsigned delivery id.
    k = keys(body, signed(body, **{"webhook-id": "msg_1"}))
    assert k.content and k.content.startswith("sig:") and k.delivery_id


def test_migration_8_keeps_deliveries_recorded_before_it(tmp_path, monkeypatch):
    path = tmp_path / "palui.db"
    with monkeypatch.context() as m:
        m.setattr(db_module, "MIGRATIONS", [mig for mig in MIGRATIONS if mig[0] <= 7])
        old = Database(path)
    body = b'{"old": true}'
    old_content = "sig:" + hashlib.sha256(signed(body)["x-palui-signature"].encode() + b"\n" + body).hexdigest()
    old_id = "id:" + hashlib.sha256(b"gh-1").hexdigest()
    now = 5_000_000.0
    with old.write() as c:
        for key in (old_content, old_id):
            c.execute("INSERT INTO webhook_deliveries (webhook_id, delivery_key, body_sha256, body_bytes, turn_id,"
                      " received_at) VALUES ('h', ?, '', 0, ?, ?)", (key, "t-" + key[:3], now))
    old.close()
    db = Database(path)  # migration 8 runs
    assert db.one("SELECT number FROM schema_migrations WHERE number = 8")
    assert wh.record(db, "h", keys(body, signed(body)), body, 100, now=now + 1) == {"turn": "t-sig",
                                                                                   "received_at": now}
    other = b"other"
    assert wh.record(db, "h", keys(other, signed(other, **{"x-github-delivery": "gh-1"})), other, 100,
                     now=now + 1)["turn"] == "t-id:"
    db.close()
