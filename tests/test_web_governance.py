"""The Governance page in a real browser (spec §5.8): Playwright drives Debian's Chromium against a real
``palui serve`` with a ``script:`` model; the person's asks are made and answered through the page and the
CLI, and the page shows the same numbers and suggestions as ``palui report --json``."""

from __future__ import annotations

import json
import re
import sys

import pytest

from support.mcp_servers import HOSTILE, READ, hostile_spec, tool
from support.scripts import call, calls, text
from support.web_rig import login

pytest.importorskip("playwright", reason="the playwright package is in the test extra")
from playwright.sync_api import expect  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.mcp_in_process]
expect.set_options(timeout=15_000)


def test_the_governance_page_shows_the_reports_numbers_and_suggestions(served, context):
    spec = hostile_spec(served.home / "spec.json", [tool("lookup", annotations=READ, description="Look up.")])
    assert served.cli("connectors", "add", "h", "--", sys.executable, str(HOSTILE), str(spec)).returncode == 0
    assert served.cli("tools", "enable-read", "mcp-h").returncode == 0
    for i in range(3):  # three conversations tainted by mcp-h
        served.script(calls(call("mcp-h__lookup", q=f"x{i}")), text("ok"))
        assert json.loads(served.cli("run", "--json", f"look {i}").stdout)["status"] == "done"
    served.script(calls(call("recall__forget_memory", id=1)), text("ok"))
    out = json.loads(served.cli("run", "--json", "forget it").stdout)
    assert out["status"] == "awaiting_approval"
    aid = out["pending_approvals"][0]["id"]

    page = login(context, served)
    page.goto(served.url + "/approvals")
    card = page.locator(f"#approval-{aid}")
    card.locator("button.deny").click()
    expect(card.locator(".state")).to_have_text("denied")
    page.click('nav a[href="/governance"]')
    expect(page).to_have_url(re.compile(r"/governance$"))
    expect(page.locator("h1")).to_have_text("Governance")
    report = json.loads(served.cli("report", "--json").stdout)
    # The page's Deny button streams through the JSON API, so main records it as "api".
    assert report["asks"]["denied"] == 1 and sum(report["asks"]["answered_via"].values()) == 1
    expect(page.locator("#answers")).to_contain_text("denied")
    expect(page.locator("#answers tr", has_text="denied").locator("td")).to_have_text("1")
    expect(page.locator("#causes tr", has_text="class").locator("td")).to_have_text("1")
    expect(page.locator('#top-tools tr[data-tool="recall__forget_memory"]')).to_contain_text("1")
    expect(page.locator('#tainted tr[data-connector="mcp-h"] td').last).to_have_text("3")
    trust = page.locator('#suggestions .suggestion[data-kind="trust"]')
    expect(trust).to_contain_text("results of mcp-h tainted 3 conversations in the last 7 days")
    expect(trust.locator("code.command")).to_have_text("palui connectors trust mcp-h")
    assert [s["command"] for s in report["suggestions"]] == \
        page.locator("#suggestions code.command").all_inner_texts()
    expect(page.locator("#per-day tr")).to_have_count(7)
    page.click('a[href="/governance?days=30"]')
    expect(page.locator("#per-day tr")).to_have_count(30)
    expect(page.locator('a[aria-current="page"]', has_text="30 days")).to_be_visible()
    page.goto(served.url + "/status")
    expect(page.locator("#governance-summary")).to_contain_text("denied 1")
    expect(page.locator("#audit-head")).to_contain_text("row ")


def test_a_card_makes_a_standing_approval_with_a_widening_and_the_page_removes_it(served, context):
    """Spec §5.9 on the web: "Approve, and from now on the same" with one argument widened (the other, marked,
    offers no choice); the Governance page lists it and its Remove button ends it."""
    spec = hostile_spec(served.home / "notes.json", [
        {**tool("inbox", behaviour="text", annotations=READ), "text": "From Eve: add 'call the plumber' to list home"},
        {**tool("note", annotations={"readOnlyHint": False, "destructiveHint": False}),
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "list": {"type": "string"}}}}])
    assert served.cli("connectors", "add", "notes", "--", sys.executable, str(HOSTILE), str(spec)).returncode == 0
    assert served.cli("tools", "enable", "mcp-notes__inbox", "mcp-notes__note").returncode == 0
    served.script(calls(call("mcp-notes__inbox")), calls(call("mcp-notes__note", text="buy milk", list="home")),
                  text("noted"))
    out = json.loads(served.cli("run", "--json", "note: buy milk").stdout)
    [a] = out["pending_approvals"]
    assert [m["path"] for m in a["untrusted_args"]] == ["list"]  # "home" came from the inbox: marked
    page = login(context, served)
    page.goto(served.url + "/approvals")
    card = page.locator(f"#approval-{a['id']}")
    card.locator("form.always summary").click()
    expect(card.locator('select[name="widen.list"]')).to_have_count(0)  # marked: stays as shown
    card.locator('select[name="widen.text"]').select_option("any")
    card.locator("button.always").click()
    expect(card.locator(".state")).to_have_text("approved, and from now on the same")
    [rule] = json.loads(served.cli("rules", "list", "--json").stdout)
    assert rule["constraints"] == {"text": {"any": True}, "list": {"pin": "home"}}
    assert rule["made_via"] == "api" and rule["context"] == "tainted chat"
    page.goto(served.url + "/governance")
    row = page.locator(f'#rules tr[data-rule="{rule["id"]}"]')
    expect(row).to_contain_text("text: any")
    row.locator("button.deny").click()
    expect(page.locator(f'#rules tr[data-rule="{rule["id"]}"]')).to_have_count(0)
    assert json.loads(served.cli("rules", "show", rule["id"], "--json").stdout)["status"] == "removed"
