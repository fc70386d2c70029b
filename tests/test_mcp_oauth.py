"""OAuth 2.1 sign-in to remote MCP servers (spec §7.9), against an MCP server protected by the SDK's
own server auth on 127.0.0.1 and a small authorization server of ours (``support/oauth_server.py``).

Shown: sign-in by a pasted redirect address (``palui connectors add --url``) and through the loopback
listener (``palui connectors login``); refresh ahead of expiry, also in a new process; an expired grant
leading to ``error: sign in again`` (tools not offered, told once, no request to the server after that);
an issuer change dropping the old tokens; two connectors of one issuer sharing a registration but never
a token; a client registered by the person (``--client-id``, secret from a file); logout revoking; the
web sheet's sign-in with ``/oauth/callback`` checking the session cookie and the state; and no token or
client secret in any output, log, error message, the database or a page.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from palui.text.mcp_config import ServerConfig
from palui.types import SignIn
from support.oauth_server import AuthServerOptions, OAuthTestServer, PreRegisteredClient
from support.scripts import call, calls, text, write_script
from support.signin_cli import sign_in

pytestmark = pytest.mark.slow


@pytest.fixture
def oauth():
    with OAuthTestServer(AuthServerOptions(), resource_servers=2) as srv:
        yield srv


def browser() -> SignIn:
    """A person who approves at once: the browser follows the authorization URL to the loopback listener."""

    async def show(url: str) -> None:
        async def go() -> None:
            async with httpx.AsyncClient(follow_redirects=True, timeout=10) as http:
                await http.get(url)

        asyncio.get_running_loop().create_task(go())

    return SignIn(show=show, timeout=30)


def everything_said(home: Path, *outputs: str) -> str:
    """All a person or an attacker could read: the outputs given, the database, every log and file but the secrets."""
    parts = list(outputs)
    for p in home.rglob("*"):
        if p.is_file() and "secrets" not in p.parts:
            parts.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def assert_no_secret(oauth: OAuthTestServer, said: str) -> None:
    leaked = [v for v in oauth.auth.token_values() if v in said]
    assert not leaked, f"{len(leaked)} token value(s) leaked"
    for client in oauth.auth.clients():
        c = oauth.auth._clients[client]
        assert not c.client_secret or c.client_secret not in said


def add_by_paste(home: Path, name: str, url: str, *extra: str,
                 timeout: float = 60) -> tuple[subprocess.CompletedProcess, str]:
    """``palui connectors add NAME --url URL --no-browser``: read the printed address, "open" it, paste back where
    the browser ended (the loopback address, which nothing needs to serve): :func:`support.signin_cli.sign_in`."""
    r, answer = sign_in(home, "connectors", "add", name, "--url", url, *extra, timeout=timeout)
    assert answer is not None, r.stdout + r.stderr
    location = answer.headers["location"]
    assert location.startswith("http://127.0.0.1:") and "/oauth/callback?" in location
    return r, location


def token_file(home: Path, cid: str) -> dict:
    [p] = list((home / "secrets" / "oauth" / "tokens").glob(f"{cid}.*.json"))
    assert stat.S_IMODE(p.stat().st_mode) == 0o600 and stat.S_IMODE(p.parent.stat().st_mode) == 0o700
    return json.loads(p.read_text())


def test_sign_in_by_pasted_redirect_and_no_token_anywhere(cli, home, oauth):
    r, location = add_by_paste(home, "remote", oauth.mcp_url(0))
    assert r.returncode == 0, r.stderr
    assert "mcp-remote: connected, 3 tool(s)" in r.stdout
    assert "Open this address in a browser" in r.stdout
    assert oauth.auth.count("register") == 1 and oauth.auth.count("token", grant_type="authorization_code") == 1
    saved = token_file(home, "mcp-remote")
    assert saved["issuer"] == oauth.issuer and saved["resource"] == oauth.mcp_url(0)
    assert saved["token"]["access_token"] in oauth.auth.token_values()
    shown = [cli("connectors", "show", "mcp-remote").stdout, cli("connectors", "list", "--json").stdout,
             cli("status", "--json").stdout, cli("tools", "list", "--json").stdout]
    assert json.loads(cli("connectors", "show", "mcp-remote", "--json").stdout)["oauth"]["signed_in"] is True
    assert_no_secret(oauth, everything_said(home, r.stdout, r.stderr, location, *shown))


def test_a_refused_code_is_told_without_the_servers_body(home, oauth):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    proc = subprocess.Popen([sys.executable, "-m", "palui", "connectors", "add", "remote", "--url", oauth.mcp_url(0),
                             "--no-browser"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout is not None
    auth_url = next(line.strip() for line in proc.stdout if "/authorize?" in line)
    state = re.search(r"state=([^&]+)", auth_url).group(1)  # type: ignore[union-attr]
    from urllib.parse import quote

    pasted = f"http://127.0.0.1:1/oauth/callback?code=bogus&state={state}&iss={quote(oauth.issuer, safe='')}"
    out, err = proc.communicate(pasted + "\n", timeout=60)
    assert proc.returncode == 1
    assert "the token endpoint refused the sign-in: HTTP 400, invalid_grant (unknown authorization code)" in err
    assert '{"error"' not in err and "Traceback" not in everything_said(home)
    assert not list(home.glob("secrets/oauth/tokens/*"))  # nothing stored for a failed add


async def test_login_through_the_loopback_listener_and_logout_revokes(svc, oauth):
    await svc.connectors.add_async("remote", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser())
    assert (await svc.signin.logout_async("mcp-remote"))["revocation"] == "revoked"
    assert oauth.auth.count("revoke", ok=True) == 2 and oauth.auth.active_access_tokens() == 0
    assert not svc.connectors.oauth_state("mcp-remote")["signed_in"]
    assert svc.connectors.config("mcp-remote")["state"] == "error: sign in again"
    r = await svc.signin.login_async("mcp-remote", browser())
    cfg = svc.connectors.config("mcp-remote")  # not kept live after the sign-in (spec §7.7), so idle here
    assert r["signed_in"] and cfg["state"] in ("connected", "idle") and cfg["last_state"] == "connected"
    assert oauth.auth.count("register") == 1  # the registration of this issuer was kept and used again
    await svc.close()


async def test_refresh_ahead_of_expiry_also_in_a_new_process(svc, oauth):
    oauth.auth.set_options(access_token_ttl=4)  # margin min(max(60 s, 10 %), 50 %) = 2 s
    await svc.connectors.add_async("remote", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser())
    issued = time.time()
    conn = await svc._hub.get("mcp-remote")  # a connector for turns: nobody can sign in
    assert not (await conn.call_tool("whoami", {})).is_error
    assert oauth.auth.count("token", grant_type="refresh_token") == 0
    await asyncio.sleep(max(0.0, issued + 2.6 - time.time()))  # past the margin, before the expiry
    r = await conn.call_tool("echo", {"text": "hi"})
    assert (r.is_error, r.text) == (False, "hi")
    assert oauth.auth.count("token", grant_type="refresh_token", ok=True) == 1
    assert time.time() < issued + 4  # it was refreshed ahead of the expiry
    await svc.close()
    # A new process (a new hub, the stored tokens): it refreshes at the authorization server's token
    # endpoint before sending an expired token; no sign-in, no 401 answered by a full flow.
    await asyncio.sleep(2.0)
    from palui.service import Service

    fresh = Service()
    conn = await fresh._hub.get("mcp-remote")
    assert not (await conn.call_tool("whoami", {})).is_error
    assert oauth.auth.count("token", grant_type="refresh_token", ok=True) == 2
    assert oauth.auth.count("authorize") == 1
    await fresh.close()
    fresh.db.close()


async def test_expired_grant_is_sign_in_again_and_its_tools_are_not_offered(svc, oauth, tmp_path):
    """Turns are offered tools from the catalog without starting servers: the first turn learns of the ended
    grant when it calls the tool (refused with the fix); from then on the connector waits for a
    sign-in, its tools are not offered and each turn says why, with no request to the server."""
    await svc.connectors.add_async("remote", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser())
    svc.tools.set_enabled(["mcp-remote__echo"], True)
    oauth.auth.expire_access_tokens()
    oauth.auth.revoke_refresh_tokens()
    model = write_script(tmp_path / "s.json", calls(call("mcp-remote__echo", text="x")), text("ok"))
    r = await svc.turns.send("echo", model=model)
    [ev] = [e for e in r["events"] if e["type"] == "tool_call"]
    assert ev["is_error"] and "mcp-remote is not available" in ev["result"] and "sign in again" in ev["result"]
    assert {c["id"]: c["state"] for c in svc.status.get()["connectors"]}["mcp-remote"] == "error: sign in again"
    asked = len(oauth.auth.events())
    model = write_script(tmp_path / "t.json", calls(call("mcp-remote__echo", text="y")), text("ok"))
    r = await svc.turns.send("echo again", model=model)
    [step] = [e for e in r["events"] if e["type"] == "step"][:1]
    assert "mcp-remote__echo" not in step["tools_offered"]
    assert [e for e in r["events"] if e["type"] == "connector_error"][0]["error"].count("sign in again")
    [ev] = [e for e in r["events"] if e["type"] == "tool_call"]
    assert ev["verdict"] == "unavailable" and "its connector mcp-remote is not available" in ev["result"]
    assert len(oauth.auth.events()) == asked  # no further request: it refuses at once until a sign-in
    told = [n for n in svc.notifier.inbox() if "sign in again" in n["text"]]
    assert len(told) == 1 and "palui connectors login mcp-remote" in told[0]["text"]  # told once
    assert_no_secret(oauth, everything_said(svc.settings.data_dir, json.dumps(r)))
    await svc.close()


async def test_an_issuer_change_drops_the_old_tokens(svc, oauth):
    await svc.connectors.add_async("remote", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser())
    old_tokens = set(oauth.auth.token_values())
    old_client = token_file(svc.settings.data_dir, "mcp-remote")["client_id"]
    as2 = oauth.add_authorization_server(AuthServerOptions(consent="deny"))
    oauth.move_resource_server(0, as2)
    with pytest.raises(Exception, match="refused the sign-in"):
        await svc.signin.login_async("mcp-remote", browser())
    # The sign-in at the new issuer was refused, and still the old issuer's tokens are gone.
    assert not list((svc.settings.data_dir / "secrets" / "oauth" / "tokens").glob("mcp-remote.*"))
    as2.set_options(consent="approve")
    await svc.signin.login_async("mcp-remote", browser())
    saved = token_file(svc.settings.data_dir, "mcp-remote")
    assert saved["issuer"] == as2.issuer and saved["token"]["access_token"] not in old_tokens
    assert old_client not in [e.client_id for e in as2.events()]  # AS1's client never reached AS2
    assert as2.count("register") == 1
    await svc.close()


async def test_two_connectors_of_one_issuer_share_a_registration_never_a_token(svc, oauth):
    await svc.connectors.add_async("a", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser())
    await svc.connectors.add_async("b", ServerConfig("http", url=oauth.mcp_url(1)), sign_in=browser())
    assert oauth.auth.count("register") == 1  # the issuer's registration, shared
    home = svc.settings.data_dir
    a, b = token_file(home, "mcp-a"), token_file(home, "mcp-b")
    assert a["client_id"] == b["client_id"] and a["token"]["access_token"] != b["token"]["access_token"]
    assert a["resource"] == oauth.mcp_url(0) and b["resource"] == oauth.mcp_url(1)
    for cid, url in (("mcp-a", oauth.mcp_url(0)), ("mcp-b", oauth.mcp_url(1))):
        conn = await svc._hub.get(cid)
        who = json.loads((await conn.call_tool("whoami", {})).text)
        assert who["resource"] == url  # each server got the token issued for it
    # A's token is refused by B's server (the SDK's server checks the resource): it is B's alone.
    r = httpx.post(oauth.mcp_url(1), headers={"Authorization": f"Bearer {a['token']['access_token']}",
                                              "Accept": "application/json, text/event-stream"},
                   json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert r.status_code == 401
    await svc.close()


def test_a_client_registered_by_the_person(cli, home, tmp_path):
    pre = PreRegisteredClient("palui-test", "s3cret-value-987", "client_secret_basic")
    with OAuthTestServer(AuthServerOptions(dynamic_registration=False, pre_registered=(pre,))) as srv:
        secret = tmp_path / "secret.txt"
        secret.write_text("s3cret-value-987\n")
        r, _ = add_by_paste(home, "remote", srv.mcp_url(0), "--client-id", "palui-test",
                            "--client-secret-file", str(secret))
        assert r.returncode == 0, r.stderr
        assert srv.auth.count("register") == 0
        assert srv.auth.count("token", grant_type="authorization_code", ok=True) == 1
        said = everything_said(home, r.stdout, r.stderr)
        assert "s3cret-value-987" not in said
        assert_no_secret(srv, said)


def test_web_sign_in_checks_the_session_cookie_and_the_state(home, oauth):
    from support.live_service import LiveService

    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    with LiveService(home) as live:
        cookies = httpx.get(f"{live.url}/login?token={live.token}", follow_redirects=False).cookies
        page = httpx.Client(base_url=live.url, cookies=cookies, timeout=30)
        csrf = re.search(r'name="palui-csrf" content="([0-9a-f]+)"', page.get("/connectors").text).group(1)
        r = page.post("/connectors/add", data={"csrf": csrf, "transport": "http", "name": "web",
                                               "url": oauth.mcp_url(0)})
        assert r.status_code == 303  # added without a sign-in: the page says how to sign in
        r = page.post("/connectors/mcp-web/sign-in", data={"csrf": csrf}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith(oauth.issuer + "/authorize?")
        location = httpx.get(r.headers["location"], follow_redirects=False).headers["location"]
        assert location.startswith(f"{live.url}/oauth/callback?")
        callback = location.removeprefix(live.url)
        assert httpx.get(live.url + callback, follow_redirects=False).headers["location"] == "/login"  # no cookie
        forged = re.sub(r"state=[^&]+", "state=forged", callback)
        assert page.get(forged, follow_redirects=False).status_code == 404
        r = page.get(callback, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/connectors/mcp-web"
        sheet = page.get("/connectors/mcp-web").text
        assert "signed in" in sheet and 'id="sign-out"' in sheet
        assert_no_secret(oauth, everything_said(home, sheet))


async def test_a_grant_ending_mid_session_and_a_job_never_signs_in(svc, oauth, tmp_path):
    from palui.types import Origin

    await svc.connectors.add_async("remote", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser())
    conn = await svc._hub.get("mcp-remote")
    assert not (await conn.call_tool("whoami", {})).is_error  # connected, in a session
    oauth.auth.expire_access_tokens()
    oauth.auth.revoke_refresh_tokens()
    r = await conn.call_tool("echo", {"text": "x"})
    assert r.is_error and "needs you to sign in again (palui connectors login mcp-remote)" in r.text
    assert conn.state() == "error: sign in again"
    svc.tools.set_enabled(["mcp-remote__echo"], True)
    svc.tools.set_class("mcp-remote__echo", "read")
    authorizations = oauth.auth.count("authorize")
    tid = svc.turns.start("nightly", origin=Origin.JOB,
                          model=write_script(tmp_path / "s.json", calls(call("mcp-remote__echo", text="x")),
                                             text("ok")))
    r = await svc.turns.run(tid)
    assert oauth.auth.count("authorize") == authorizations  # no sign-in from a job
    assert [e for e in r["events"] if e["type"] == "tool_call"][0]["verdict"] == "unavailable"
    # the one connector the job needed was down: the job failed and says so (spec §8.4), never "done"
    assert r["status"] == "failed"
    await svc.close()


async def test_after_an_issuer_switch_no_refresh_goes_to_the_old_issuer(svc, oauth, tmp_path):
    """spec §7.9: the resource server moves to another authorization server while Palui holds tokens of the old
    one, due for a refresh. Inside a turn nobody signs in: the old issuer's tokens are dropped at once, no
    refresh is asked of it (not ahead of expiry, not after the 401), the person is told once to sign in, and
    the sign-in goes to the new issuer."""
    oauth.auth.set_options(access_token_ttl=4)  # refreshed ahead when less than 2 s is left
    await svc.connectors.add_async("remote", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser())
    svc.tools.set_enabled(["mcp-remote__whoami"], True)
    grants = oauth.auth.count("token")
    as2 = oauth.add_authorization_server()
    oauth.move_resource_server(0, as2)
    await asyncio.sleep(2.6)  # past the refresh margin, before the expiry
    model = write_script(tmp_path / "s.json", calls(call("mcp-remote__whoami")), text("ok"))
    for _ in range(3):
        await svc.turns.send("who am I", model=model)
        await svc.close()  # a new session each time, as separate processes would
    assert oauth.auth.count("token") == grants  # nothing asked of the old issuer after the switch
    assert not svc.connectors.oauth_state("mcp-remote")["signed_in"]  # its tokens were dropped
    assert svc.connectors.config("mcp-remote")["last_state"] == "error: sign in again"
    told = [n["text"] for n in svc.notifier.inbox() if "sign in again" in n["text"]]
    assert len(told) == 1 and "another authorization server" in told[0]
    await svc.signin.login_async("mcp-remote", browser())
    saved = token_file(svc.settings.data_dir, "mcp-remote")
    assert saved["issuer"] == as2.issuer and oauth.auth.count("token") == grants
    r = await svc.turns.send("who am I", model=model)
    [ev] = [e for e in r["events"] if e["type"] == "tool_call"]
    assert not ev["is_error"] and json.loads(ev["result"])["client_id"] in as2.clients()
    await svc.close()
