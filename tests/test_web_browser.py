"""The web page in a real browser (spec §8.1, docs/web.md): Playwright drives Debian's Chromium against a real
``palui serve`` subprocess on a free loopback port, with a fresh PALUI_HOME and a ``script:`` model.

The service reads its script file on every model request of a turn, so each test writes
the steps it needs into that one file (``served.script(...)``) before sending its message.
The module's tests share one served home and the run's one browser (tests/support/web_rig.py); each
test starts its own conversation, so they do not depend on each other's turns.
"""

from __future__ import annotations

import json
import re

import pytest

from support.mcp_servers import python_server
from support.scripts import call, calls, text
from support.web_rig import IBAN, ServedHome, send

pytest.importorskip("playwright", reason="the playwright package is in the test extra")
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.slow
expect.set_options(timeout=15_000)


def test_login_with_the_token(context, served):
    context.clear_cookies()
    pg = context.new_page()
    try:
        pg.goto(served.url + "/chat")
        expect(pg).to_have_url(re.compile(r"/login$"))  # no token: the login page
        pg.fill("#token", "not-the-token")
        pg.click("button[type=submit]")
        expect(pg.locator(".error")).to_contain_text("not this service's")
        pg.fill("#token", served.token)
        pg.click("button[type=submit]")
        expect(pg).to_have_url(re.compile(r"/chat$"))
        expect(pg.locator("#composer")).to_be_visible()
        assert any(c["name"] == "palui_session" and c["httpOnly"] for c in context.cookies())
    finally:
        pg.close()


def test_chat_streams_the_answer_and_shows_the_tool_call_with_its_decision(page, served):
    served.script(calls(call("recall__add_memory", text="buy oat milk")), text("Saved: buy oat milk."))
    resp, turn = send(page, served, "remember to buy oat milk", response=True)
    assert resp.status == 200 and resp.headers["content-type"].startswith("application/x-ndjson")
    expect(turn.locator(".bubble.answer")).to_have_text("Saved: buy oat milk.")
    tool = turn.locator('.call[data-tool="recall__add_memory"]')
    expect(tool.locator(".verdict")).to_have_text("run")
    expect(tool.locator(".reason")).to_contain_text("write tool")
    expect(turn.locator(".status-word")).to_have_text("done")
    expect(page.locator("form.stop")).to_be_hidden()  # Stop shows only while a turn runs or waits
    expect(turn.locator("details.step").first).to_contain_text("tool(s) offered")
    expect(page).to_have_url(re.compile(r"/chat/c-[0-9a-f]+$"))  # the new conversation got its address
    # The page is the same service as the CLI: the memory is there.
    mems = json.loads(served.cli("memories", "list", "--json").stdout)
    assert "buy oat milk" in [m["text"] for m in mems]


def test_approve_a_pending_write_on_the_approvals_page_and_see_the_turn_finish(page, served, web_pages):
    served.script(calls(call("web__fetch_page", url=web_pages.url + "/offer")),
                  calls(call("recall__add_memory", text=f"IBAN {IBAN}")), text("Noted the IBAN."))
    turn = send(page, served, "read the offer and remember the IBAN")
    expect(turn.locator(".taint-mark")).to_contain_text("web__fetch_page")
    inline = turn.locator(".approval")
    expect(inline.locator(".state")).to_have_text("needs your approval")
    expect(inline.locator("button.approve")).to_be_visible()
    expect(page.locator("#pending-count")).to_have_text("1")  # the nav badge counted the streamed approval
    aid = inline.get_attribute("data-approval")
    chat_url = page.url

    page.goto(served.url + "/approvals")
    card = page.locator(f"#approval-{aid}")
    expect(card.locator("code.tool")).to_have_text("recall__add_memory")
    expect(card.locator(".class-badge")).to_have_text("write")
    expect(card.locator(".reason")).to_contain_text("tainted by web__fetch_page")
    expect(card.locator(".left")).to_contain_text("left")
    expect(card.locator("pre.args mark.untrusted")).to_contain_text(IBAN)  # the hijackable value, marked
    expect(card.locator(".untrusted-list")).to_contain_text("web__fetch_page")
    card.locator("button.approve").click()
    expect(card.locator(".result-line")).to_contain_text("Turn finished")
    expect(card.locator(".live")).to_contain_text("Noted the IBAN.")
    expect(card.locator(".live").get_by_text("Noted the IBAN.")).to_have_count(1)  # the answer once, not twice
    expect(card.locator(".state")).to_have_text("approved")

    page.reload()
    expect(page.locator(f"#approval-{aid}")).to_have_count(0)
    expect(page.locator("#history")).to_contain_text("approved")
    page.goto(chat_url)
    expect(page.locator("article.turn").last.locator(".status-word")).to_have_text("done")
    approved = page.locator("article.turn").last.locator('.call[data-tool="recall__add_memory"] .verdict')
    expect(approved).to_have_text("approved · ran")  # the outcome, not the orange "ask" of the question
    mems = json.loads(served.cli("memories", "list", "--json").stdout)
    assert [m["provenance"] for m in mems if m["text"] == f"IBAN {IBAN}"] == ["untrusted"]


def test_deny_a_pending_write_inline_in_the_chat(page, served, web_pages):
    served.script(calls(call("web__fetch_page", url=web_pages.url + "/offer")),
                  calls(call("recall__add_memory", text="deny this one")), text("Understood: not saved."))
    turn = send(page, served, "read the offer and save a note")
    card = turn.locator(".approval")
    expect(card.locator("button.deny")).to_be_visible()
    card.locator("button.deny").click()
    turn = page.locator("article.turn").last
    expect(turn.locator(".status-word")).to_have_text("done")
    expect(turn.locator(".approval .state")).to_have_text("denied")
    expect(turn.locator('.call[data-tool="recall__add_memory"] .verdict')).to_have_text("denied")
    expect(turn.locator(".bubble.answer").last).to_have_text("Understood: not saved.")
    mems = json.loads(served.cli("memories", "list", "--json").stdout)
    assert "deny this one" not in [m["text"] for m in mems]
    audit = json.loads(served.cli("audit", "--json").stdout)
    assert any(r["tool"] == "recall__add_memory" and r["outcome"] == "denied" for r in audit)


def test_stop_a_running_turn_then_new_starts_a_clean_conversation(page, served, web_pages):
    served.script(calls(call("web__fetch_page", url=web_pages.url + "/slow")), text("never said"))
    turn = send(page, served, "fetch the slow page")
    expect(turn.locator("details.step")).to_have_count(1)  # the turn runs: the slow call is in flight
    expect(turn).to_have_attribute("data-status", "running")
    expect(page.locator("form.stop")).to_be_visible()
    page.click("form.stop button")
    expect(page.locator(".system-note").last).to_contain_text("Stopped t-")
    turn = page.locator("article.turn").last
    expect(turn.locator(".status-word")).to_have_text("stopped")
    expect(turn.locator(".bubble.answer")).to_have_count(0)
    expect(page.locator("form.stop")).to_be_hidden()
    audit = json.loads(served.cli("audit", "--json").stdout)
    assert any(r["tool"] == "web__fetch_page" and r["outcome"] == "cancelled; may have run" for r in audit)
    page.fill("#composer textarea", "/bogus")
    page.press("#composer textarea", "Enter")
    err = page.locator(".system-note.error").last
    expect(err).to_contain_text("unknown command")
    expect(err).to_have_css("background-color", "rgb(253, 236, 236)")  # styled as an error, not a plain note
    page.fill("#composer textarea", "/new")
    page.press("#composer textarea", "Enter")
    expect(page).to_have_url(re.compile(r"/chat$"))
    expect(page.locator("#chat-title")).to_have_text("New conversation")
    expect(page.locator("form.stop")).to_be_hidden()


def offered_in(turn) -> list[str]:
    return turn.locator("details.step").first.locator("ul.offered code").all_text_contents()


def test_a_tool_switched_off_vanishes_from_the_next_turns_offered_tools(page, served):
    served.script(text("Looked."))
    turn = send(page, served, "search my memories")
    expect(turn.locator(".status-word")).to_have_text("done")
    assert "recall__search_memories" in offered_in(turn)

    page.goto(served.url + "/connectors/recall")
    switch = page.locator('tr[data-tool="recall__search_memories"] button.switch')
    expect(switch).to_have_attribute("aria-checked", "true")
    switch.click()
    expect(page.locator('tr[data-tool="recall__search_memories"] button.switch')).to_have_attribute(
        "aria-checked", "false")
    try:
        turn = send(page, served, "search my memories")
        expect(turn.locator(".status-word")).to_have_text("done")
        offered = offered_in(turn)
        assert "recall__search_memories" not in offered and "recall__add_memory" in offered
    finally:
        page.goto(served.url + "/connectors/recall")
        page.locator('tr[data-tool="recall__search_memories"] button.switch').click()
        expect(page.locator('tr[data-tool="recall__search_memories"] button.switch')).to_have_attribute(
            "aria-checked", "true")


def test_add_an_mcp_server_and_enable_all_read_tools_on_its_sheet(page, served):
    page.goto(served.url + "/connectors")
    form = page.locator("#add-server")
    form.locator('input[name="name"]').fill("time")
    form.locator('input[name="transport"][value="stdio"]').check()
    form.locator('input[name="command"]').fill(f"{python_server('mcp-server-time')} --local-timezone UTC")
    form.locator('textarea[name="env"]').fill("PALUI_TEST_SECRET=s3cret-value-xyz")
    form.locator("button[type=submit]").click()
    expect(page).to_have_url(re.compile(r"/connectors/mcp-time$"), timeout=30_000)
    rows = page.locator("#tools tr[data-tool]")
    expect(rows).to_have_count(2)
    expect(page.locator("#tools button.switch[aria-checked=true]")).to_have_count(0)  # new MCP tools start off
    expect(page.locator('tr[data-tool="mcp-time__get_current_time"] .source')).to_have_text("hints")
    assert "s3cret-value-xyz" not in page.content()  # a secret is never rendered back
    expect(page.locator(".sheet-head")).to_contain_text("PALUI_TEST_SECRET=***")

    page.click("#enable-read")
    expect(page.locator(".flash.ok")).to_contain_text("Switched on 2 read tool(s)")
    expect(page.locator("#tools button.switch[aria-checked=true]")).to_have_count(2)
    tools = json.loads(served.cli("tools", "list", "--connector", "mcp-time", "--json").stdout)
    assert {t["name"]: t["enabled"] for t in tools} == {"mcp-time__convert_time": True,
                                                         "mcp-time__get_current_time": True}


def test_change_a_class_and_policy_explain_agrees(page, served):
    name = "recall__search_memories"
    page.goto(served.url + "/connectors/recall")
    row = page.locator(f'tr[data-tool="{name}"]')
    expect(row.locator(".source")).to_have_text("builtin")
    row.locator('select[name="class"]').select_option("destructive")  # submits on change
    row = page.locator(f'tr[data-tool="{name}"]')
    expect(row.locator(".source")).to_have_text("user")
    expect(row.locator('select[name="class"]')).to_have_value("destructive")
    shown = row.locator(".verdicts .verdict").all_inner_texts()  # chat, tainted chat, job, webhook
    assert shown == ["ask", "ask", "unavailable", "unavailable"]
    for args, expected in (((), shown[0]), (("--tainted",), shown[1]), (("--origin", "job"), shown[2]),
                           (("--origin", "webhook"), shown[3])):
        out = json.loads(served.cli("policy", "explain", name, *args, "--json").stdout)
        assert (out["class"], out["class_source"], out["verdict"]) == ("destructive", "user", expected)
    # Drop the choice again: the builtin class comes back, on the page and in the CLI.
    row.locator('select[name="class"]').select_option("reset")
    expect(page.locator(f'tr[data-tool="{name}"] .source')).to_have_text("builtin")
    out = json.loads(served.cli("policy", "explain", name, "--json").stdout)
    assert (out["class"], out["class_source"], out["verdict"]) == ("read", "builtin", "run")


def test_jobs_and_webhooks_pages(page, served):
    served.script(text("Morning brief: nothing due."))
    page.goto(served.url + "/jobs")
    form = page.locator("#add-job")
    form.locator('input[name="name"]').fill("brief")
    form.locator('input[name="cron"]').fill("0 8 * * *")
    form.locator('textarea[name="prompt"]').fill("Summarise my day")
    form.locator("button[type=submit]").click()
    expect(page.locator('tr[data-job="brief"]')).to_contain_text("0 8 * * *")
    page.locator('tr[data-job="brief"] button', has_text="Run now").click()
    expect(page).to_have_url(re.compile(r"/chat/c-[0-9a-f]+#t-"))  # the job's turn, watched until done
    turn = page.locator("article.turn").last
    expect(turn.locator(".status-word")).to_have_text("done")
    expect(turn.locator(".bubble.answer")).to_have_text("Morning brief: nothing due.")
    expect(turn.locator(".msg.trigger .origin-label")).to_have_text("scheduled job")  # not the person's bubble
    expect(turn.locator(".msg.user")).to_have_count(0)
    page.goto(served.url + "/jobs")
    expect(page.locator('tr[data-job="brief"]')).to_contain_text("done")
    page.once("dialog", lambda d: d.accept())
    page.locator('tr[data-job="brief"] button', has_text="Remove").click()
    expect(page.locator('tr[data-job="brief"]')).to_have_count(0)

    page.goto(served.url + "/webhooks")
    page.locator('#add-webhook input[name="name"]').fill("github")
    page.locator("#add-webhook button[type=submit]").click()
    secret = page.locator("#created-secret").inner_text().strip()
    url = page.locator("#created-url").inner_text().strip()
    assert len(secret) >= 20 and re.search(r"/hooks/[\w-]+$", url)
    page.goto(served.url + "/webhooks")  # shown once: never again
    expect(page.locator('tr[data-hook="github"]')).to_be_visible()
    assert secret not in page.content()
    page.once("dialog", lambda d: d.accept())
    page.locator('tr[data-hook="github"] button', has_text="Remove").click()
    expect(page.locator('tr[data-hook="github"]')).to_have_count(0)


def test_a_cap_pause_shows_on_the_status_page(context, tmp_path_factory):
    srv = ServedHome(tmp_path_factory.mktemp("capped-home"), "\n[caps]\nruns_per_hour = 1\n").start()
    srv.script(text("Hello."))
    # "localhost", not 127.0.0.1: cookies ignore ports, and this service has its own token.
    base = f"http://localhost:{srv.port}"
    pg = context.new_page()
    try:
        pg.goto(f"{base}/login?token={srv.token}")
        for message, status in (("first", "done"), ("second", "queued")):
            pg.fill("#composer textarea", message)
            pg.click("#composer button[type=submit]")
            expect(pg.locator("article.turn").last.locator(".status-word")).to_have_text(status)
        expect(pg.locator("article.turn").last.locator(".turn-meta")).to_contain_text("runs per hour cap")
        pg.goto(base + "/status")
        pause = pg.locator("#pause")
        expect(pause).to_contain_text("Paused")
        expect(pause).to_contain_text("runs per hour cap")
        expect(pause).to_contain_text("until")
        expect(pg.locator("#runs")).to_contain_text("1 of 1")
        status = json.loads(srv.cli("status", "--json", process=True).stdout)  # the CLI says the same
        assert status["paused"] and status["paused_reason"] == "runs per hour cap"
    finally:
        pg.close()
        srv.stop()
