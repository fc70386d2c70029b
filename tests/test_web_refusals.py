"""What the web page refuses (spec §8, §10), with plain httpx against a real ``palui serve``:
no token → the login page; a form post without the CSRF token → 403 and nothing changes; a
foreign Host header → 400; secrets never rendered back except once at creation."""

from __future__ import annotations

import base64
import re

import httpx
import pytest

from palui.server.app import csrf_value, session_value
from support.scripts import text

pytestmark = pytest.mark.slow


def served_setup(srv):  # the rig calls it once (support/web_rig.py)
    srv.script(text("Hi."))


@pytest.fixture
def anon(served):
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=10) as c:
        yield c


@pytest.fixture
def browser(served):
    """A client holding the session cookie, as a logged-in browser does."""
    with httpx.Client(base_url=served.url, follow_redirects=False, timeout=10,
                      cookies={"palui_session": session_value(served.token)}) as c:
        yield c


def tool_enabled(served, name: str) -> bool:
    rows = httpx.get(served.url + "/api/tools", headers=served.auth).json()
    return {t["name"]: t["enabled"] for t in rows}[name]


@pytest.mark.parametrize("path", ["/", "/chat", "/approvals", "/connectors", "/connectors/recall", "/jobs",
                                  "/webhooks", "/status", "/audit", "/memories", "/new"])
def test_no_token_leads_to_the_login_page(anon, path):
    r = anon.get(path)
    assert r.status_code == 303 and r.headers["location"] == "/login"
    page = anon.get("/login")
    assert page.status_code == 200 and 'name="token"' in page.text
    assert "palui-csrf" not in page.text  # the session's CSRF token is never given before login


def test_a_wrong_cookie_or_token_is_no_login(anon, served):
    r = httpx.get(served.url + "/chat", cookies={"palui_session": "0" * 64}, follow_redirects=False)
    assert r.status_code == 303
    assert anon.get("/chat", headers={"Authorization": "Bearer nope"}).status_code == 303
    r = anon.get("/login", params={"token": "nope"})
    assert r.status_code == 403 and "palui_session" not in r.headers.get("set-cookie", "")
    r = anon.get("/login", params={"token": served.token})
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert f"palui_session={session_value(served.token)}" in r.headers["set-cookie"]
    assert served.token not in r.headers["set-cookie"]  # the cookie is an HMAC, not the token


def test_the_login_form_needs_its_own_csrf_nonce(anon, served):
    r = anon.post("/login", data={"token": served.token})
    assert r.status_code == 403 and "palui_session" not in r.headers.get("set-cookie", "")
    form = anon.get("/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    assert anon.cookies.get("palui_login") == nonce
    r = anon.post("/login", data={"token": "wrong", "csrf": nonce})
    assert r.status_code == 403
    r = anon.post("/login", data={"token": served.token, "csrf": nonce})
    assert r.status_code == 303 and "palui_session=" in r.headers["set-cookie"]


def test_a_form_post_without_the_csrf_token_is_refused_and_changes_nothing(browser, served):
    name = "recall__add_memory"
    assert tool_enabled(served, name)
    for data in ({"on": "0"}, {"on": "0", "csrf": "0" * 64}):
        r = browser.post(f"/tools/{name}/switch", data=data)
        assert r.status_code == 403 and "CSRF" in r.text
    assert tool_enabled(served, name)
    for path, data in (("/connectors/recall/enable-read", {}), ("/tools/recall__add_memory/class", {"class": "read"}),
                       ("/webhooks/add", {"name": "x"}), ("/jobs/add", {"name": "j", "cron": "@daily", "prompt": "p"}),
                       ("/chat/send", {"message": "hello"}), ("/logout", {}), ("/approvals/a-1/approve", {})):
        assert browser.post(path, data=data).status_code == 403, path
    assert browser.post("/chat/command", json={"line": "/status"}).status_code == 403
    assert httpx.get(served.url + "/api/webhooks", headers=served.auth).json() == []
    # With the token the same post works.
    r = browser.post(f"/tools/{name}/switch", data={"on": "0", "csrf": csrf_value(served.token)})
    assert r.status_code == 303 and r.headers["location"].startswith("/connectors/recall")
    assert not tool_enabled(served, name)
    r = browser.post(f"/tools/{name}/switch", data={"on": "1", "csrf": csrf_value(served.token)})
    assert tool_enabled(served, name)


def test_a_cookie_api_state_change_needs_the_csrf_header(browser, served):
    r = browser.post("/api/tools/recall__add_memory/disable")
    assert r.status_code == 403
    assert tool_enabled(served, "recall__add_memory")


def test_a_foreign_host_header_is_refused(anon, browser, served):
    for client in (anon, browser):
        for path in ("/chat", "/login", "/static/palui.css"):
            r = client.get(path, headers={"Host": "evil.example"})
            assert r.status_code == 400, path
    r = anon.get("/chat", headers={"Host": f"rebind.example:{served.port}", **served.auth})
    assert r.status_code == 400


def test_a_cross_origin_form_post_is_refused(browser, served):
    r = browser.post("/tools/recall__add_memory/switch", headers={"Origin": "http://evil.example"},
                     data={"on": "0", "csrf": csrf_value(served.token)})
    assert r.status_code == 403
    assert tool_enabled(served, "recall__add_memory")


def test_pages_cannot_be_framed_and_run_no_inline_script(browser):
    r = browser.get("/chat")
    assert r.status_code == 200
    assert r.headers["x-frame-options"] == "DENY"
    csp = r.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert r.headers["cache-control"] == "no-store"
    assert "<script>" not in r.text and " onclick=" not in r.text


def test_a_webhook_secret_is_shown_once(browser, served):
    csrf = csrf_value(served.token)
    r = browser.post("/webhooks/add", data={"name": "ci", "csrf": csrf})
    assert r.status_code == 200
    secret = re.search(r'id="created-secret">([^<]+)<', r.text).group(1)
    assert len(secret) >= 20
    whsec = re.search(r'id="created-whsec">(whsec_[A-Za-z0-9+/=]+)<', r.text).group(1)  # Standard Webhooks form
    assert base64.b64decode(whsec[len("whsec_"):]) == secret.encode()
    listing = browser.get("/webhooks")
    assert "ci" in listing.text and secret not in listing.text and whsec not in listing.text
    assert secret not in browser.get("/status").text
    r = browser.post("/webhooks/ci/remove", data={"csrf": csrf})
    assert r.status_code == 303


def test_no_open_redirect_through_the_back_field(browser, served):
    r = browser.post("/tools/no_such_tool/switch", data={"on": "1", "csrf": csrf_value(served.token),
                                                          "back": "//evil.example/x"})
    assert r.status_code == 303 and r.headers["location"] == "/"
    r = browser.post("/tools/no_such_tool/switch", data={"on": "1", "csrf": csrf_value(served.token),
                                                          "back": "/connectors"})
    assert r.headers["location"] == "/connectors"
    # the error travels as a one-time message (a cookie the client keeps, as a browser does)
    page = browser.get("/connectors")
    assert "unknown tool" in page.text
    assert "unknown tool" not in browser.get("/connectors").text


def test_logout_forgets_the_session(browser, served):
    r = browser.post("/logout", data={"csrf": csrf_value(served.token)})
    assert r.status_code == 303 and r.headers["location"] == "/login"
    assert 'palui_session=""' in r.headers["set-cookie"]
