"""Inbound webhooks against the real service process (spec §3 webhook column, §4, §8).

One service for the module (``webhooks.rate_per_minute = 3``); each test makes its own
webhook with ``palui webhooks add`` so rates and replay records do not mix.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import stat
import subprocess

import httpx
import pytest

from support import inprocess
from support.live_service import LiveService, wait_for
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow

PAYLOAD = {"action": "opened", "pull_request": {"title": "Fix the flaky test", "user": {"login": "ana"}}}
TABLES = ("turns", "conversations", "webhook_deliveries", "untrusted_content", "inbox", "runs", "approvals", "audit")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    home = tmp_path_factory.mktemp("webhooks") / "home"
    home.mkdir()
    # The model tries a tool first (a webhook turn offers none: the call is refused), then summarises.
    model = write_script(home.parent / "script.json", calls(call("recall__add_memory", text="pwned")),
                         text("Ana opened a pull request: Fix the flaky test."))
    (home / "palui.toml").write_text(f'model = "{model}"\n[webhooks]\nrate_per_minute = 3\n')
    with LiveService(home) as s:
        yield s


def palui(s: LiveService, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    """``palui ARGS`` on the service's home: in this process, or in a child with ``process=True``."""
    return inprocess.palui(s.home, *args, timeout=60, process=process)


def add_hook(s: LiveService, name: str, via_cli: bool = False) -> tuple[str, str]:
    """Create a webhook; returns (url, secret). The CLI path checks the two printed lines."""
    if not via_cli:  # in-process, same service API as the CLI (a subprocess per webhook is slow)
        from palui.config import load_settings
        from palui.service import Service

        svc = Service(load_settings({"PALUI_HOME": str(s.home)}))
        try:
            h = svc.webhooks.add(name)
        finally:
            svc.db.close()
        assert h["url"] == f"{s.url}/hooks/{h['id']}"
        return h["url"], h["secret"]
    r = palui(s, "webhooks", "add", name)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout  # url, secret, and the secret as Standard Webhooks' whsec_ (spec §8.5)
    m_url = re.fullmatch(r"url: (http://127\.0\.0\.1:(\d+)/hooks/([0-9a-f]+))", lines[0])
    m_secret = re.fullmatch(r"secret: (\S{20,})", lines[1])
    assert m_url and m_secret, r.stdout
    assert int(m_url.group(2)) == s.port  # the live service's real port
    return m_url.group(1), m_secret.group(1)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def settle(s: LiveService, turn_id: str) -> dict:
    """Wait until an accepted delivery's turn is over and its summary is in the inbox."""
    t = s.wait_turn(turn_id)
    wait_for(lambda: s.count("inbox", "turn_id = ? AND kind = 'webhook'", (turn_id,)), what="the inbox summary")
    return t


# The service posts the audit head to the inbox once a day (spec §10.3), on a tick of its own, once the
# audit has a row: a notice that comes whenever the tick does, not from a delivery, so it is not counted.
AUDIT_HEAD_NOTICE = "kind = 'notice' AND text LIKE 'Audit head on %'"


def counts(s: LiveService) -> dict[str, int]:
    """Rows a delivery could add, per table (the daily audit-head notice left out: it races the test)."""
    return {t: s.count(t, f"NOT ({AUDIT_HEAD_NOTICE})" if t == "inbox" else "1") for t in TABLES}


def test_signed_delivery_is_summarised_with_zero_tools_and_lands_in_the_inbox(service):
    s = service
    url, secret = add_hook(s, "github", via_cli=True)
    body = json.dumps(PAYLOAD).encode()
    r = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body),
                                               "Content-Type": "application/json"})
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "accepted"
    tid = r.json()["turn"]
    t = s.wait_turn(tid)
    assert t["status"] == "done" and t["origin"] == "webhook"
    assert t["answer"] == "Ana opened a pull request: Fix the flaky test."
    steps = [e for e in t["events"] if e["type"] == "step"]
    assert steps and all(e["tools_offered"] == [] for e in steps)  # zero tools, every step
    assert t["tainted"] and "webhook 'github' payload" in t["taint_source"]
    # The payload is stored as untrusted content of the turn's conversation.
    [(stored,)] = s.rows("SELECT text FROM untrusted_content WHERE turn_id = ?", (tid,))
    assert stored == body.decode()
    # The model's attempt at a tool was refused without reaching the connector.
    [row] = s.get("/api/audit", turn=tid)
    assert (row["tool"], row["verdict"], row["outcome"]) == ("recall__add_memory", "unavailable", "refused")
    assert s.count("memories") == 0
    summary = wait_for(lambda: [m for m in s.get("/api/inbox") if m["kind"] == "webhook" and m["turn"] == tid],
                       what="the summary in the inbox")
    assert "Fix the flaky test" in summary[0]["text"]


def test_github_header_and_delivery_id_are_processed_once(service):
    s = service
    url, secret = add_hook(s, "repo")
    body = json.dumps({**PAYLOAD, "n": 1}).encode()
    headers = {"X-Hub-Signature-256": sign(secret, body), "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
               "X-GitHub-Event": "pull_request"}
    first = httpx.post(url, content=body, headers=headers)
    assert first.status_code == 202, first.text
    settle(s, first.json()["turn"])
    before = counts(s)
    again = httpx.post(url, content=body, headers=headers)
    assert again.status_code == 200 and again.json() == {"status": "duplicate", "turn": first.json()["turn"]}
    # The same delivery id with another (validly signed) body is still the same delivery.
    other = b'{"n": 2}'
    dup = httpx.post(url, content=other, headers={**headers, "X-Hub-Signature-256": sign(secret, other)})
    assert dup.status_code == 200 and dup.json()["status"] == "duplicate"
    assert counts(s) == before


def test_without_a_delivery_id_the_same_signed_body_is_a_duplicate_and_bearer_mode_works(service):
    s = service
    url, secret = add_hook(s, "plain")
    body = b"deploy finished: ok"
    r1 = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
    assert r1.status_code == 202, r1.text
    settle(s, r1.json()["turn"])
    before = counts(s)
    r2 = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
    assert r2.status_code == 200 and r2.json()["status"] == "duplicate"
    assert counts(s) == before
    r3 = httpx.post(url, content=b"backup done", headers={"Authorization": f"Bearer {secret}"})
    assert r3.status_code == 202, r3.text
    assert settle(s, r3.json()["turn"])["status"] == "done"


def _chunks(n: int):
    for _ in range(n):
        yield b"x" * 1024


@pytest.mark.parametrize("case", ["unsigned", "wrong signature", "malformed signature", "wrong bearer",
                                  "good signature with a wrong bearer", "changed body with the old signature",
                                  "oversized (Content-Length)", "oversized (chunked, no Content-Length)",
                                  "unknown id"])
def test_refused_deliveries_store_nothing(service, case):
    s = service
    url, secret = add_hook(s, "refuse-" + re.sub(r"\W+", "-", case))
    body = b'{"ok": true}'
    good = {"X-Palui-Signature": sign(secret, body)}
    if case == "changed body with the old signature":
        original = httpx.post(url, content=body, headers=good)  # the original delivery
        assert original.status_code == 202
        settle(s, original.json()["turn"])
    before = counts(s)
    expect = 401
    if case == "unsigned":
        r = httpx.post(url, content=body)
    elif case == "wrong signature":
        r = httpx.post(url, content=body, headers={"X-Palui-Signature": sign("not-the-secret", body)})
    elif case == "malformed signature":
        r = httpx.post(url, content=body, headers={"X-Hub-Signature-256": hmac.new(secret.encode(), body,
                                                                                     hashlib.sha256).hexdigest()})
    elif case == "wrong bearer":
        r = httpx.post(url, content=body, headers={"Authorization": "Bearer " + secret[:-1] + "x"})
    elif case == "good signature with a wrong bearer":
        r = httpx.post(url, content=body, headers={**good, "Authorization": "Bearer nope"})
    elif case == "changed body with the old signature":
        r = httpx.post(url, content=b'{"ok": false}', headers=good)
    elif case == "oversized (Content-Length)":
        big = b"x" * 262_145
        r, expect = httpx.post(url, content=big, headers={"X-Palui-Signature": sign(secret, big)}), 413
    elif case == "oversized (chunked, no Content-Length)":
        big = b"x" * (300 * 1024)
        r, expect = httpx.post(url, content=_chunks(300), headers={"X-Palui-Signature": sign(secret, big)}), 413
        assert "content-length" not in {k.lower() for k in r.request.headers}
    else:
        r, expect = httpx.post(url.rsplit("/", 1)[0] + "/0123456789abcdef01234567", content=body, headers=good), 404
    assert r.status_code == expect, r.text
    assert secret not in r.text
    assert counts(s) == before


def test_exactly_262144_bytes_is_accepted(service):
    s = service
    url, secret = add_hook(s, "size")
    body = b"y" * 262_144
    r = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
    assert r.status_code == 202, r.text
    settle(s, r.json()["turn"])


def test_rate_limit_per_webhook(service):
    s = service
    url, secret = add_hook(s, "flood")
    other_url, other_secret = add_hook(s, "calm")
    accepted = []
    for i in range(3):
        body = f"event {i}".encode()
        r = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
        assert r.status_code == 202, r.text
        accepted.append(r.json()["turn"])
    for tid in accepted:
        settle(s, tid)
    before = counts(s)
    body = b"event 3"
    r = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert counts(s) == before
    # A duplicate of an accepted delivery is still answered as one, and another webhook has its own rate.
    body = b"event 0"
    r = httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)})
    assert r.json()["status"] == "duplicate"
    body = b"other"
    r = httpx.post(other_url, content=body, headers={"X-Palui-Signature": sign(other_secret, body)})
    assert r.status_code == 202
    settle(s, r.json()["turn"])


def test_webhooks_cli_never_shows_the_secret_again_and_remove_gives_404(service):
    s = service
    url, secret = add_hook(s, "listed", via_cli=True)
    hook_id = url.rsplit("/", 1)[1]
    path = s.home / "secrets" / "webhooks" / f"{hook_id}.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    r = palui(s, "webhooks", "list", "--json", process=True)  # a real process: --json on a pipe
    assert r.returncode == 0 and secret not in r.stdout
    [h] = [h for h in json.loads(r.stdout) if h["name"] == "listed"]
    assert h["url"] == url and h["id"] == hook_id and "secret" not in h
    assert secret not in palui(s, "webhooks", "list").stdout
    served = s.http.get("/api/webhooks")
    assert secret not in served.text
    assert [h["url"] for h in served.json() if h["name"] == "listed"] == [url]  # the service knows its own address
    r = palui(s, "webhooks", "add", "listed")
    assert r.returncode == 2 and "already exists" in r.stderr
    assert palui(s, "webhooks", "remove", "listed").returncode == 0
    assert not path.exists()
    body = b"late"
    assert httpx.post(url, content=body, headers={"X-Palui-Signature": sign(secret, body)}).status_code == 404
