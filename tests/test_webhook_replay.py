"""A replay is a replay (spec §8.5), against the real service process over HTTP.

- A delivery is a duplicate when the hash of its signature and body was seen while its record is
  kept (``retention.days``), or its delivery id within 24 h: an unsigned delivery-id header never
  makes a seen body new.
- Standard Webhooks (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``) are accepted;
  there the delivery id is signed and decides duplicates; a timestamp more than 5 minutes off
  is refused; ``palui webhooks add`` prints the secret as ``whsec_<base64>`` too.

One service for the module; each test makes its own webhook so replay records do not mix.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import subprocess
import time

import httpx
import pytest

from support import inprocess
from support.live_service import LiveService, wait_for
from support.scripts import text, write_script
from test_webhooks import AUDIT_HEAD_NOTICE

pytestmark = pytest.mark.slow

TABLES = ("turns", "conversations", "webhook_deliveries", "untrusted_content", "inbox", "runs", "approvals", "audit")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    home = tmp_path_factory.mktemp("webhook-replay") / "home"
    home.mkdir()
    model = write_script(home.parent / "script.json", text("Summarised."))
    (home / "palui.toml").write_text(f'model = "{model}"\n[caps]\nruns_per_hour = 500\n')
    with LiveService(home) as s:
        yield s


def palui(s: LiveService, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    """``palui ARGS`` on the service's home: in this process, or in a child with ``process=True``."""
    return inprocess.palui(s.home, *args, timeout=60, process=process)


def add_hook(s: LiveService, name: str) -> tuple[str, str]:
    """(url, secret) of a new webhook, made through the service API in-process."""
    from palui.config import load_settings
    from palui.service import Service

    svc = Service(load_settings({"PALUI_HOME": str(s.home)}))
    try:
        h = svc.webhooks.add(name)
    finally:
        svc.db.close()
    return h["url"], h["secret"]


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def sw_sign(key: bytes, msg_id: str, ts: int | str, body: bytes) -> str:
    """One Standard Webhooks ``v1,<base64>`` entry, computed as a sender does from the key bytes."""
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def sw_headers(secret: str, msg_id: str, body: bytes, ts: int | None = None, *extra_sigs: str) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    sigs = [*extra_sigs, sw_sign(secret.encode(), msg_id, ts, body)]
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": " ".join(sigs),
            "content-type": "application/json"}


def counts(s: LiveService) -> dict[str, int]:
    """Rows a delivery could add (the daily audit-head notice left out: see test_webhooks.AUDIT_HEAD_NOTICE)."""
    return {t: s.count(t, f"NOT ({AUDIT_HEAD_NOTICE})" if t == "inbox" else "1") for t in TABLES}


def hook_turns(s: LiveService, url: str) -> int:
    return s.count("turns", "webhook_id = ?", (url.rsplit("/", 1)[1],))


def settle(s: LiveService, turn_id: str) -> dict:
    t = s.wait_turn(turn_id)
    wait_for(lambda: s.count("inbox", "turn_id = ? AND kind = 'webhook'", (turn_id,)), what="the inbox summary")
    return t


def test_four_unsigned_delivery_headers_on_one_signed_body_start_one_turn(service):
    s = service
    url, secret = add_hook(s, "replayed")
    body = b'{"event": "payment", "amount": 1000}'
    answers = [httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body),
                                                       "X-Palui-Delivery": f"replay-{i}"}) for i in range(1, 5)]
    assert [a.status_code for a in answers] == [202, 200, 200, 200], [a.text for a in answers]
    first = answers[0].json()["turn"]
    assert all(a.json() == {"status": "duplicate", "turn": first} for a in answers[1:])
    settle(s, first)
    assert hook_turns(s, url) == 1
    assert s.count("runs", "turn_id = ?", (first,)) == 1
    # The same with GitHub's header names.
    gh_url, gh_secret = add_hook(s, "replayed-gh")
    for i in range(4):
        r = httpx.post(gh_url, content=body, headers={"X-Hub-Signature-256": sign(gh_secret, body),
                                                      "X-GitHub-Delivery": f"0000-{i}"})
        assert r.status_code == (202 if i == 0 else 200), r.text
    assert hook_turns(s, gh_url) == 1


def test_a_body_only_delivery_replayed_25_hours_later_is_a_duplicate_until_retention_prunes_it(service):
    """A signature over the body alone says nothing about when it was made: its record is kept for
    retention.days (spec §8.5), not 24 h (a capture was accepted again 25 h later, once a day)."""
    s = service
    url, secret = add_hook(s, "github-twice")
    hook_id = url.rsplit("/", 1)[1]
    body = json.dumps({"action": "completed", "check_run": {"name": "ci", "conclusion": "success"}}).encode()
    # A sender sends the very same body twice, each time signed and with a fresh delivery id.
    one = httpx.post(url, content=body, headers={"X-Hub-Signature-256": sign(secret, body),
                                                 "X-GitHub-Delivery": "b1f2-1", "X-GitHub-Event": "check_run"})
    assert one.status_code == 202, one.text
    settle(s, one.json()["turn"])
    bearer = b'{"bearer": true}'
    first_bearer = httpx.post(url, content=bearer, headers={"Authorization": f"Bearer {secret}"})
    assert first_bearer.status_code == 202, first_bearer.text
    settle(s, first_bearer.json()["turn"])
    before = counts(s)
    two = httpx.post(url, content=body, headers={"X-Hub-Signature-256": sign(secret, body),
                                                 "X-GitHub-Delivery": "b1f2-2", "X-GitHub-Event": "check_run"})
    assert two.status_code == 200 and two.json() == {"status": "duplicate", "turn": one.json()["turn"]}
    # 25 h later a captured delivery is still refused, with a new delivery id or none, and so is the bearer one.
    s.rows("UPDATE webhook_deliveries SET received_at = received_at - 25 * 3600 WHERE webhook_id = ?", (hook_id,))
    for headers in ({"X-Hub-Signature-256": sign(secret, body), "X-GitHub-Delivery": "b1f2-3"},
                    {"X-Hub-Signature-256": sign(secret, body)}):
        replay = httpx.post(url, content=body, headers=headers)
        assert replay.status_code == 200 and replay.json()["status"] == "duplicate", replay.text
    replay = httpx.post(url, content=bearer, headers={"Authorization": f"Bearer {secret}"})
    assert replay.json() == {"status": "duplicate", "turn": first_bearer.json()["turn"]}
    assert counts(s) == before
    # Once retention.days (90) have passed the service prunes the record: the body is a new delivery.
    s.rows("UPDATE webhook_deliveries SET received_at = received_at - 90 * 86400 WHERE webhook_id = ?", (hook_id,))
    wait_for(lambda: s.count("webhook_deliveries", "webhook_id = ?", (hook_id,)) == 0, what="the retention prune")
    three = httpx.post(url, content=body, headers={"X-Hub-Signature-256": sign(secret, body),
                                                   "X-GitHub-Delivery": "b1f2-4"})
    assert three.status_code == 202, three.text
    settle(s, three.json()["turn"])
    assert hook_turns(s, url) == 3


def test_palui_prune_keeps_replay_keys_until_their_own_retention(service):
    """``palui prune --before DATE`` deletes delivery records older than DATE, but not a replay key before its
    retention (spec §8.5): pruning once let a captured delivery in again (202, a second turn)."""
    s = service
    url, secret = add_hook(s, "pruned")
    body = b'{"event": "deploy", "env": "prod"}'
    one = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
    assert one.status_code == 202, one.text
    settle(s, one.json()["turn"])
    msg_id = "msg_pruned_1"
    sw = httpx.post(url, content=body, headers=sw_headers(secret, msg_id, body))
    assert sw.status_code == 202, sw.text
    settle(s, sw.json()["turn"])
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + 86400))
    r = palui(s, "prune", "--before", tomorrow, "--json")
    assert r.returncode == 0, r.stderr
    again = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
    assert again.json() == {"status": "duplicate", "turn": one.json()["turn"]}, again.text
    again = httpx.post(url, content=body, headers=sw_headers(secret, msg_id, body))
    assert again.json() == {"status": "duplicate", "turn": sw.json()["turn"]}, again.text
    assert hook_turns(s, url) == 2
    assert json.loads(r.stdout)["replay_keys_kept"] >= 2
    assert "kept" in palui(s, "prune", "--before", tomorrow).stdout


def test_webhooks_show_says_what_bounds_replay(service):
    s = service
    add_hook(s, "shown")
    r = palui(s, "webhooks", "show", "shown")
    assert r.returncode == 0, r.stderr
    assert "Only a signed timestamp (Standard Webhooks) bounds replay" in r.stdout
    assert "retention.days = 90" in r.stdout
    assert palui(s, "webhooks", "show", "nope").returncode != 0


def test_standard_webhooks_delivery_with_several_signatures_one_matching_is_accepted(service):
    s = service
    url, secret = add_hook(s, "standard")
    body = json.dumps({"type": "invoice.paid", "data": {"id": "in_1"}}).encode()
    ts = int(time.time())
    other = sw_sign(b"an old rotated secret", "msg_1", ts, body)
    headers = sw_headers(secret, "msg_1", body, ts, other, "v1a,c29tZSBhc3ltbWV0cmljIHNpZ25hdHVyZQ==",
                         "v1,not-base64!")
    r = httpx.post(url, content=body, headers=headers)
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "accepted"
    t = settle(s, r.json()["turn"])
    assert t["status"] == "done" and t["origin"] == "webhook" and t["tainted"]
    assert t["answer"] == "Summarised."


def test_standard_webhooks_same_id_is_a_duplicate_and_a_new_id_with_the_same_body_is_a_new_turn(service):
    s = service
    url, secret = add_hook(s, "standard-ids")
    body = b'{"type": "ping"}'
    first = httpx.post(url, content=body, headers=sw_headers(secret, "msg_a", body))
    assert first.status_code == 202, first.text
    settle(s, first.json()["turn"])
    before = counts(s)
    # The same id again (a retry, newly timestamped and signed): the same delivery.
    again = httpx.post(url, content=body, headers=sw_headers(secret, "msg_a", body, int(time.time()) + 1))
    assert again.status_code == 200 and again.json() == {"status": "duplicate", "turn": first.json()["turn"]}
    assert counts(s) == before
    # Another id with the very same body: a new event (the id is signed, so it decides).
    second = httpx.post(url, content=body, headers=sw_headers(secret, "msg_b", body))
    assert second.status_code == 202, second.text
    assert second.json()["turn"] != first.json()["turn"]
    settle(s, second.json()["turn"])
    assert hook_turns(s, url) == 2


REFUSALS = ["wrong signature", "signature over another id", "signature over another timestamp",
            "timestamp 6 minutes old", "timestamp 6 minutes ahead", "no webhook-timestamp", "no webhook-id",
            "timestamp not a number", "changed body"]


@pytest.mark.parametrize("case", REFUSALS)
def test_standard_webhooks_refusals_are_401_store_nothing_and_echo_no_credential(service, case):
    s = service
    url, secret = add_hook(s, "sw-" + re.sub(r"\W+", "-", case))
    body = b'{"type": "order.created", "id": 7}'
    now = int(time.time())
    good = sw_headers(secret, "msg_r", body, now)
    bad, send = dict(good), body
    if case == "wrong signature":
        bad["webhook-signature"] = sw_sign(b"not the secret", "msg_r", now, body)
    elif case == "signature over another id":
        bad["webhook-signature"] = sw_sign(secret.encode(), "msg_other", now, body)
    elif case == "signature over another timestamp":
        bad["webhook-signature"] = sw_sign(secret.encode(), "msg_r", now - 1, body)
    elif case == "timestamp 6 minutes old":
        bad = sw_headers(secret, "msg_r", body, now - 360)
    elif case == "timestamp 6 minutes ahead":
        bad = sw_headers(secret, "msg_r", body, now + 360)
    elif case == "no webhook-timestamp":
        del bad["webhook-timestamp"]
    elif case == "no webhook-id":
        del bad["webhook-id"]
    elif case == "timestamp not a number":
        bad["webhook-timestamp"] = "2026-01-01T00:00:00Z"
    else:
        send = b'{"type": "order.created", "id": 8}'
    before = counts(s)
    r = httpx.post(url, content=send, headers=bad)
    assert r.status_code == 401, r.text
    assert counts(s) == before  # nothing stored: no turn, no delivery record, no inbox entry
    whsec = base64.b64encode(secret.encode()).decode()
    for credential in (secret, whsec, good["webhook-signature"][3:], bad.get("webhook-signature", "-")[3:] or "-"):
        assert credential not in r.text
    if "minutes" in case:
        assert "5 minutes" in r.json()["error"]
    # The refusal was for that flaw alone: the delivery made right is accepted (and the refused
    # one left no record that would make it a duplicate).
    ok = httpx.post(url, content=body, headers=good)
    assert ok.status_code == 202, ok.text
    settle(s, ok.json()["turn"])


def test_webhooks_add_prints_the_whsec_secret_and_a_standard_sender_signing_with_it_is_accepted(service):
    s = service
    r = palui(s, "webhooks", "add", "whsec-cli", process=True)  # a real process beside the service
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout
    url = re.fullmatch(r"url: (http://127\.0\.0\.1:\d+/hooks/[0-9a-f]+)", lines[0]).group(1)
    secret = re.fullmatch(r"secret: (\S{20,})", lines[1]).group(1)
    whsec = re.fullmatch(r"standard webhooks secret: (whsec_[A-Za-z0-9+/]+=*)", lines[2]).group(1)
    key = base64.b64decode(whsec[len("whsec_"):], validate=True)
    assert key == secret.encode()  # the stored secret's bytes
    assert "Standard Webhooks" in r.stderr and "24 h" in r.stderr
    # A sender configured with the whsec_ secret, as a Standard Webhooks library uses it.
    body = b'{"type": "user.created"}'
    ts = int(time.time())
    headers = {"webhook-id": "msg_cli", "webhook-timestamp": str(ts), "webhook-signature": sw_sign(key, "msg_cli", ts,
                                                                                                   body)}
    ok = httpx.post(url, content=body, headers=headers)
    assert ok.status_code == 202, ok.text
    settle(s, ok.json()["turn"])
    listed = palui(s, "webhooks", "list", "--json")
    assert secret not in listed.stdout and whsec not in listed.stdout
