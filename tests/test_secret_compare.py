"""A token, cookie, CSRF value or bearer secret with non-ASCII text is refused, never a 500
(``hmac.compare_digest`` raises on non-ASCII ``str``; palui.text.secret_compare)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from palui.errors import WebhookRefused
from palui.server.app import create_app
from palui.text.secret_compare import same_secret
from palui.triggers.signing import authenticate

HOSTILE = ["toké", "é", "\udcff", "tok\u202e", "\x00"]


@pytest.mark.parametrize("given", HOSTILE + ["tok", b"\xff\xfe", ""])
def test_same_secret_never_raises(given):
    assert same_secret(given, "tok") is (given == "tok")


def test_a_non_ascii_bearer_token_or_cookie_is_refused_with_401(svc):
    with TestClient(create_app(svc, "tok", port=8765), base_url="http://127.0.0.1:8765",
                    follow_redirects=False) as c:
        for token in ("toké", "é"):
            r = c.get("/api/status", headers={"Authorization": ("Bearer " + token).encode()})
            assert r.status_code == 401, (token, r.status_code, r.text)
        raw = c.get("/api/status", headers=[(b"authorization", b"Bearer \xff\xfe")])
        assert raw.status_code == 401
        cookie = c.get("/api/status", headers=[(b"cookie", "palui_session=é".encode())])
        assert cookie.status_code == 401


def test_a_non_ascii_login_token_is_refused_not_a_500(client):
    r = client.get("/login", params={"token": "é"})
    assert r.status_code < 500, r.text
    page = client.get("/login")
    nonce = page.cookies.get("palui_login") or client.cookies.get("palui_login")
    r = client.post("/login", data={"token": "é\udcff".encode("utf-8", "surrogatepass").decode("latin-1"),
                                    "csrf": nonce or ""})
    assert r.status_code < 500, r.text
    r = client.post("/api/turns", json={"message": "hi"}, headers={"X-Palui-CSRF": "é".encode()})
    assert r.status_code == 403, r.text


def test_a_webhooks_non_ascii_bearer_is_a_401():
    with pytest.raises(WebhookRefused) as e:
        authenticate("secret", b"{}", {"authorization": "Bearer é"})
    assert e.value.status == 401
