"""Sign-in faults (spec §7.9), from the command line, against ``support/oauth_server.py``.

Shown: a refresh answered 503 keeps the tokens (no "sign in again") and a later refresh succeeds; two
processes refreshing at once make one refresh, both succeed, nobody is told to sign in again; a refused
refresh deletes the tokens (``connectors show``: not signed in); an authorization server on a loopback
address named by a "public" MCP server is never contacted (``PALUI_TEST_ADDRESS_CLASSES`` gives
127.0.0.2 the class ``public``; the authorization server stays on 127.0.0.1, loopback); and the loopback
page of a sign-in whose answer names another issuer (a mix-up) says it was refused, not "Signed in".
The rule of addresses itself is a table (pure).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from support.oauth_server import AuthServerOptions, OAuthTestServer
from support.signin_cli import sign_in, signed_in

pytestmark = pytest.mark.slow


def show(cli, cid: str) -> dict:
    r = cli("connectors", "show", cid, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def refresh(home: Path, cid: str, env: dict | None = None) -> subprocess.Popen:
    """``palui connectors refresh CID`` in a child: two of them at once are two processes."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    e.update(PALUI_HOME=str(home), **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "palui", "connectors", "refresh", cid], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=e)


def done(p: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def told_to_sign_in(cli) -> list[str]:
    r = cli("inbox", "--json")
    assert r.returncode == 0, r.stderr
    return [m["text"] for m in json.loads(r.stdout) if "sign in again" in m["text"]]


@pytest.fixture
def oauth():
    with OAuthTestServer(AuthServerOptions(access_token_ttl=2)) as srv:  # refreshed from 1 s before expiry
        yield srv


def test_a_503_refresh_keeps_the_tokens_and_a_later_one_succeeds(cli, home, oauth):
    signed_in(*sign_in(home, "connectors", "add", "remote", "--url", oauth.mcp_url(0)))
    time.sleep(2.2)  # the access token is gone: a refresh is needed
    oauth.auth.set_options(refresh_status=503)
    r = cli("connectors", "refresh", "mcp-remote")
    assert r.returncode == 1
    assert "could not refresh its sign-in: the token endpoint answered HTTP 503, temporarily_unavailable" in r.stderr
    assert "tokens are kept" in r.stderr and "sign in again" not in r.stderr
    state = show(cli, "mcp-remote")
    assert state["oauth"]["signed_in"] is True and state["last_state"] != "error: sign in again"
    oauth.auth.set_options(refresh_status=None)
    r = cli("connectors", "refresh", "mcp-remote")
    assert r.returncode == 0, r.stderr
    assert oauth.auth.count("token", grant_type="refresh_token", ok=True) == 1
    assert oauth.auth.count("authorize") == 1  # no new sign-in
    assert told_to_sign_in(cli) == []


def test_two_processes_refreshing_at_once_make_one_refresh(cli, home, oauth):
    signed_in(*sign_in(home, "connectors", "add", "remote", "--url", oauth.mcp_url(0)))
    time.sleep(2.2)
    oauth.auth.set_options(token_delay=5.0)  # the first refresh is still on its way when the second starts
    first, second = refresh(home, "mcp-remote"), refresh(home, "mcp-remote")
    a, b = done(first), done(second)
    assert (a.returncode, b.returncode) == (0, 0), a.stderr + b.stderr
    assert oauth.auth.count("token", grant_type="refresh_token") == 1  # the second took the first's tokens
    assert oauth.auth.count("token", grant_type="refresh_token", ok=False) == 0
    assert told_to_sign_in(cli) == []
    assert show(cli, "mcp-remote")["last_state"] == "connected"


def test_a_refused_refresh_deletes_the_tokens(cli, home, oauth):
    signed_in(*sign_in(home, "connectors", "add", "remote", "--url", oauth.mcp_url(0)))
    assert show(cli, "mcp-remote")["oauth"]["signed_in"] is True
    oauth.auth.revoke_refresh_tokens()
    time.sleep(2.2)
    r = cli("connectors", "refresh", "mcp-remote")
    assert r.returncode == 1 and "sign in again" in r.stderr
    state = show(cli, "mcp-remote")
    assert state["oauth"]["signed_in"] is False and state["state"] == "error: sign in again"
    assert not list((home / "secrets" / "oauth" / "tokens").glob("mcp-remote.*"))
    assert '"signed_in": false' in cli("connectors", "show", "mcp-remote").stdout


def test_a_public_servers_metadata_cannot_send_palui_to_loopback(home):
    with OAuthTestServer(AuthServerOptions(), resource_host="127.0.0.2") as srv:
        r, answer = sign_in(home, "connectors", "add", "remote", "--url", srv.mcp_url(0),
                            env={"PALUI_TEST_ADDRESS_CLASSES": "127.0.0.2=public"})
        assert answer is None and r.returncode == 1
        assert ("Palui refused to connect to 127.0.0.1: the address is loopback, and the MCP server 127.0.0.2 is "
                "not (public)") in r.stderr, r.stderr
        assert srv.auth.events() == []  # no metadata request, no registration reached it
        # Without the override both are loopback: the same class, so the sign-in goes ahead.
        r, answer = sign_in(home, "connectors", "add", "remote", "--url", srv.mcp_url(0))
        signed_in(r, answer)


def test_the_loopback_page_speaks_after_the_check(home):
    with OAuthTestServer(AuthServerOptions(iss_value="http://evil.example")) as srv:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        env["PALUI_HOME"] = str(home)
        proc = subprocess.Popen([sys.executable, "-m", "palui", "connectors", "add", "remote", "--url",
                                 srv.mcp_url(0), "--no-browser"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        auth_url = next(line.strip() for line in proc.stdout if "/authorize?" in line)
        location = httpx.get(auth_url, follow_redirects=False, timeout=10).headers["location"]
        assert "iss=http%3A%2F%2Fevil.example" in location
        page = httpx.get(location, timeout=90)  # the browser comes back to the loopback listener
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1
        assert "Signed in" not in page.text and "The sign-in was refused" in page.text
        assert srv.auth.count("token") == 0  # the code was never exchanged


@pytest.mark.parametrize(("server", "address", "allowed"), [
    ("public", "93.184.215.14", True),
    ("public", "127.0.0.1", False),
    ("public", "10.0.0.5", False),
    ("public", "169.254.169.254", False),
    ("public", "::ffff:127.0.0.1", False),
    ("loopback", "127.0.0.1", True),
    ("loopback", "::1", True),
    ("loopback", "192.168.1.10", False),
    ("loopback", "93.184.215.14", True),
    ("private", "192.168.1.10", True),
    ("private", "10.1.2.3", True),
    ("private", "127.0.0.1", False),
    ("private", "169.254.169.254", False),
    ("link-local", "fe80::1", True),
    ("not public", "100.64.0.7", True),  # a CGNAT (Tailscale) server and its authorization server
    ("private", "100.64.0.7", False),
])
def test_the_address_rule(server, address, allowed):
    from palui.connectors.mcp.oauth.netcheck import connect_refusal

    assert (connect_refusal(ipaddress.ip_address(address), frozenset({server})) is None) is allowed
