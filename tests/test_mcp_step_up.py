"""Scope step-up (spec §7.11) against the project's OAuth test server (``support/oauth_server.py``): its
``admin_echo`` needs ``mcp:admin`` beyond the ``mcp offline_access`` a first sign-in gets (a ``403
insufficient_scope`` for that call alone), its ``root_echo`` needs ``mcp:root``, which its protected-resource
metadata does not list.

Shown: the refused call is answered "needs more access" and the connector's other tools keep working; the
person is asked once on their channel, with the exact sign-in; the sign-in asks for the union of the granted
and needed scopes and shows it before the browser opens, never a scope the metadata does not list; after it the
tool runs. Declining (``/deny s-…``) switches the tool off with the reason; ``/approve s-…`` says how to sign in.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from palui.errors import UsageError
from palui.text.mcp_config import ServerConfig
from palui.types import SignIn
from support.oauth_server import OAuthTestServer
from support.scripts import call, calls, text, write_script
from support.signin_cli import sign_in, signed_in

pytestmark = pytest.mark.slow


@pytest.fixture
def oauth():
    with OAuthTestServer(step_up=True) as srv:
        yield srv


def browser(seen: list[str] | None = None) -> SignIn:
    """A person who approves at once; the authorization URLs shown are kept in ``seen``."""

    async def show(url: str) -> None:
        if seen is not None:
            seen.append(url)

        async def go() -> None:
            async with httpx.AsyncClient(follow_redirects=True, timeout=10) as http:
                await http.get(url)

        asyncio.get_running_loop().create_task(go())

    return SignIn(show=show, timeout=30)


def asked(url: str) -> list[str]:
    return (parse_qs(urlsplit(url).query).get("scope") or [""])[0].split()


def sheet(svc, cid: str) -> str:
    """The connector's web sheet, rendered by the app in-process (no lifespan: the service's background and
    its drain are this test's, not the page's)."""
    from starlette.testclient import TestClient

    from palui.server.app import create_app, session_value

    client = TestClient(create_app(svc, "tok", port=8765), base_url="http://127.0.0.1:8765",
                        cookies={"palui_session": session_value("tok")})
    page = client.get(f"/connectors/{cid}").text
    start = page.find('id="scope-waiting"')
    assert start >= 0, "the sheet lists the waiting request"
    return page[start:page.find("</p>", start)]


def results(r) -> dict[str, dict]:
    return {e["tool"]: e for e in r["events"] if e["type"] == "tool_call"}


async def added(svc, oauth) -> None:
    seen: list[str] = []
    await svc.connectors.add_async("work", ServerConfig("http", url=oauth.mcp_url(0)), sign_in=browser(seen))
    assert asked(seen[0]) == ["mcp", "offline_access"]  # what the server's 401 named, and offline_access
    svc.tools.set_enabled(["mcp-work__echo", "mcp-work__admin_echo", "mcp-work__root_echo"], True)


async def test_one_tool_needs_more_the_others_keep_working_and_the_sign_in_asks_for_the_union(svc, oauth, tmp_path):
    await added(svc, oauth)
    model = write_script(tmp_path / "s.json", calls(call("mcp-work__admin_echo", text="a"),
                                                    call("mcp-work__echo", text="b"),
                                                    call("mcp-work__root_echo", text="c")), text("ok"))
    r = await svc.turns.send("do it", model=model)
    got = results(r)
    admin = got["mcp-work__admin_echo"]
    assert admin["is_error"] and "needs more access" in admin["result"] and "mcp:admin" in admin["result"]
    assert (got["mcp-work__echo"]["is_error"], got["mcp-work__echo"]["result"]) == (False, "b")  # still works
    root = got["mcp-work__root_echo"]
    assert root["is_error"] and "does not list" in root["result"]  # never asked for
    state = {c["id"]: c["state"] for c in svc.connectors.list()}["mcp-work"]
    assert state == "connected"  # not "sign in again": one tool needs more, not the connector
    [notice] = [n["text"] for n in svc.notifier.inbox() if "needs `" in n["text"]]
    assert "mcp-work__admin_echo needs `mcp:admin` beyond `mcp offline_access`: sign in again for both?" in notice
    assert "palui connectors login mcp-work" in notice and "`mcp offline_access mcp:admin`" in notice
    [waiting] = svc.connectors.oauth_state("mcp-work")["waiting"]
    assert waiting["id"] in notice and waiting["needed"] == ["mcp:admin"]
    assert "mcp:root" not in notice
    assert "mcp-work__admin_echo needs mcp:admin" in sheet(svc, "mcp-work")  # the web sheet says it too
    await svc.turns.send("again", model=write_script(tmp_path / "t.json", calls(call("mcp-work__admin_echo", text="a")),
                                                     text("ok")))
    assert len([n for n in svc.notifier.inbox() if "needs `" in n["text"]]) == 1  # asked once
    with pytest.raises(UsageError, match="palui connectors login mcp-work"):
        svc.approvals.answer(waiting["id"], True, via="cli")  # yes is a sign-in

    seen: list[str] = []
    login = await svc.signin.login_async("mcp-work", browser(seen))
    assert asked(seen[0]) == ["mcp", "offline_access", "mcp:admin"]  # the union, never mcp:root
    assert oauth.auth.events("authorize")[-1].detail["scopes"] == ["mcp", "offline_access", "mcp:admin"]
    assert login["granted"] == [waiting["id"]] and login["waiting"] == []
    assert set(login["scopes"]) == {"mcp", "offline_access", "mcp:admin"}
    script = write_script(tmp_path / "u.json", calls(call("mcp-work__admin_echo", text="a")), text("ok"))
    r = await svc.turns.send("now", model=script)
    assert results(r)["mcp-work__admin_echo"]["result"] == "admin: a"
    await svc.close()


async def test_declined_scope_switches_the_tool_off_with_the_reason(svc, oauth, tmp_path):
    await added(svc, oauth)
    script = write_script(tmp_path / "s.json", calls(call("mcp-work__admin_echo", text="a")), text("ok"))
    r = await svc.turns.send("do it", model=script)
    [waiting] = svc.connectors.oauth_state("mcp-work")["waiting"]
    done = svc.approvals.answer(waiting["id"][:8], False, via="telegram", reason="not for a bot")
    assert done["status"] == "declined" and done["turn"] == r["turn"]
    assert "mcp:admin, which you declined (not for a bot)" in done["reason"]
    assert not svc.tools.get("mcp-work__admin_echo").enabled and svc.tools.get("mcp-work__echo").enabled
    assert any("mcp-work__admin_echo is switched off: it needs mcp:admin, which you declined" in n["text"]
               for n in svc.notifier.inbox())
    assert svc.connectors.oauth_state("mcp-work")["waiting"] == []
    await svc.close()


def test_the_cli_sign_in_shows_the_scopes_before_the_browser(cli, home, oauth, tmp_path):
    r, answer = sign_in(home, "connectors", "add", "work", "--url", oauth.mcp_url(0))
    signed_in(r, answer)
    assert cli("tools", "enable", "mcp-work__admin_echo").returncode == 0
    model = write_script(tmp_path / "s.json", calls(call("mcp-work__admin_echo", text="a")), text("ok"))
    assert cli("run", "--model", model, "do it").returncode == 0
    r, answer = sign_in(home, "connectors", "login", "mcp-work")
    signed_in(r, answer)
    lines = r.stdout.splitlines()
    shown = next(i for i, line in enumerate(lines) if line.startswith("The sign-in asks for:"))
    url = next(i for i, line in enumerate(lines) if "/authorize?" in line)
    assert shown < url and lines[shown] == "The sign-in asks for: mcp offline_access mcp:admin"
    assert "granted (the tool that asked for more access can run)" in r.stdout
