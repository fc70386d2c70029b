"""A server's question on the web page, in a real browser (spec §7.8): Playwright drives Debian's Chromium
against a real ``palui serve`` with our two eliciting test servers (``support/elicit_new.py`` speaks
2026-07-28, ``support/elicit_old.py`` asks inside the open call).

Shown: the question streams into the chat as a card with the server's words escaped and marked as the
server's; enum and boolean fields are buttons; the answer goes through the one door and the turn goes
on, streamed into the card (2026-07-28) or into the running turn (older era); Decline; the approvals
page lists a waiting question; ``/answer ID field=value`` typed in the chat answers it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from support.scripts import call, calls, text
from support.web_rig import send

pytest.importorskip("playwright", reason="the playwright package is in the test extra")
from playwright.sync_api import expect  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.mcp_in_process]
SUPPORT = Path(__file__).resolve().parent / "support"
expect.set_options(timeout=20_000)


def served_setup(srv):  # the rig calls it once (support/web_rig.py)
    """Our two eliciting servers, their tools switched on and trusted."""
    for name, server in (("new", "elicit_new.py"), ("old", "elicit_old.py")):
        r = srv.cli("connectors", "add", name, "--", sys.executable, str(SUPPORT / server))
        assert r.returncode == 0, r.stderr
        tools = json.loads(srv.cli("tools", "list", "--connector", f"mcp-{name}", "--json").stdout)
        assert srv.cli("tools", "enable", *[t["name"] for t in tools]).returncode == 0
        assert srv.cli("connectors", "trust", f"mcp-{name}").returncode == 0


def test_a_2026_question_streams_in_and_its_buttons_answer_it(page, served):
    served.script(calls(call("mcp-new__book_table", date="Friday\u202e")), text("Booked it."))
    turn = send(page, served, "book a table")
    card = turn.locator(".question")
    expect(card.locator(".state")).to_have_text("a question for you")
    # The server's words, escaped (the RLO from the model's argument is visible), labelled as the server's.
    expect(card.locator("blockquote.server-words")).to_contain_text("Book a table for Friday\\u202e?")
    expect(card.locator(".server-words-label")).to_contain_text("the server's words")
    expect(page.locator("#pending-count")).to_have_text("1")
    # Enum and boolean fields are buttons.
    confirm = card.locator('fieldset[data-name="confirm"]')
    expect(confirm.locator("label.choice")).to_have_text(["Yes", "No"])
    seating = card.locator('fieldset[data-name="seating"]')
    expect(seating.locator("label.choice")).to_have_text(["inside", "terrace"])
    confirm.get_by_text("Yes").click()
    seating.get_by_text("terrace").click()
    card.locator('fieldset[data-name="party_size"] input').fill("5")
    card.locator('button[value="accept"]').click()
    expect(card.locator(".state")).to_have_text("accepted")
    turn = page.locator("article.turn").last
    # The card says the turn finished until the page swaps the streamed turn for the server's (when it
    # settles): either is the answer's outcome; a check of the card's text alone races the swap.
    expect(card.locator(".live", has_text="Turn finished").or_(turn.locator(".status-word", has_text="done")).first
           ).to_be_visible()
    expect(turn.locator(".status-word")).to_have_text("done")
    expect(turn.locator('.call[data-tool="mcp-new__book_table"] details.result pre')).to_contain_text(
        '"party_size": 5, "seating": "terrace"')
    [q] = json.loads(served.cli("elicitations", "list", "--all", "--json").stdout)[-1:]
    assert (q["status"], q["answered_via"]) == ("accepted", "web")


def test_an_older_era_question_declined_while_the_call_waits(page, served):
    served.script(calls(call("mcp-old__book_table", date="Sunday")), text("Fine, no table."))
    turn = send(page, served, "book a table on sunday")
    card = turn.locator(".question")
    expect(card.locator(".sub").first).to_contain_text("the call waits")
    card.locator('button[value="decline"]').click()
    expect(card.locator(".state")).to_have_text("declined")
    turn = page.locator("article.turn").last
    expect(card.locator(".live", has_text="the call goes on").or_(turn.locator(".status-word", has_text="done")).first
           ).to_be_visible()
    expect(turn.locator(".status-word")).to_have_text("done")
    expect(turn.locator('.call[data-tool="mcp-old__book_table"] details.result pre')).to_contain_text(
        "book_table(Sunday): decline")


def test_the_approvals_page_lists_a_question_and_answer_in_the_chat(page, served):
    served.script(calls(call("mcp-new__book_table", date="Monday")), text("Booked Monday."))
    turn = send(page, served, "book monday")
    expect(turn.locator(".question .state")).to_have_text("a question for you")
    qid = turn.locator(".question").get_attribute("data-question")
    chat_url = page.url
    page.goto(served.url + "/approvals")
    listed = page.locator(f"#questions #question-{qid}")
    expect(listed.locator("blockquote.server-words")).to_have_text("Book a table for Monday?")
    page.goto(chat_url)
    page.fill("#composer textarea", f"/answer {qid} confirm=yes party_size=3")
    page.click("#composer button[type=submit]")
    expect(page.locator(".system-note").last).to_contain_text(f"Answered {qid}")
    turn = page.locator("article.turn").last
    expect(turn.locator(".status-word")).to_have_text("done")
    expect(turn.locator(".bubble.answer").last).to_have_text("Booked Monday.")
    q = json.loads(served.cli("elicitations", "show", qid, "--json").stdout)
    assert q["status"] == "accepted"
