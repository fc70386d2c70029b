"""The web chat on any screen (docs/decisions/0124-web-chat-on-a-phone.md): a real browser at 390×844 (a
phone) and at desktop width, against a real ``palui serve`` with a ``script:`` model.

On a phone the conversation list folds away under a button, and an approval card — its buttons and
its full arguments — fits the screen without horizontal scrolling; at desktop width the list stands
beside the conversation. On both, the answer streams in piece by piece.
"""

from __future__ import annotations

import pytest

from support.scripts import call, calls, text
from support.web_rig import IBAN, login, send

pytest.importorskip("playwright", reason="the playwright package is in the test extra")
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.slow
expect.set_options(timeout=20_000)
SCREENS = {"phone": {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True,
                     "has_touch": True},
           "desktop": {"viewport": {"width": 1280, "height": 860}}}
TITLE = "Pay Acme Supplies GmbH invoice 2291 for the office chairs, desks and the meeting-room screen (1,240.00 EUR)"
NOTES = f"to IBAN {IBAN} before Friday; reference ACME-2291-OFFICE-FURNITURE-AND-SCREENS-DELIVERY-NOVEMBER"


@pytest.fixture(params=list(SCREENS))
def screen(request, browser, served):
    """A logged-in page on a phone or at desktop width, in a browser context of its own."""
    ctx = browser.new_context(**SCREENS[request.param])
    yield request.param, login(ctx, served)
    ctx.close()


def no_horizontal_scroll(page) -> None:
    width = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate("document.body.scrollWidth") <= width


def inside(page, locator) -> None:
    """The element is visible and lies within the screen's width."""
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box is not None, "the element went away while it was measured"
    assert box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"] + 0.5, box


def test_an_approval_card_fits_the_screen_with_its_buttons_and_full_arguments(screen, served, web_pages):
    kind, page = screen
    served.script(calls(call("web__fetch_page", url=web_pages.url + "/invoice")),
                  calls(call("tasks__create_task", title=TITLE, notes=NOTES)), text("Made the task."))
    send(page, served, "read the invoice and make a task to pay it")
    turn = page.locator("article.turn").last
    # The turn as the server renders it once the stream ended (the page swaps the streamed one for it).
    expect(turn.locator(".status-word")).to_have_text("awaiting approval")
    card = turn.locator(".approval")
    expect(card.locator(".state")).to_have_text("needs your approval")
    no_horizontal_scroll(page)
    for button in ("button.approve", "button.deny"):
        inside(page, card.locator(button))
    args = card.locator("pre.args")
    inside(page, args)
    assert args.evaluate("e => e.scrollWidth <= e.clientWidth")  # nothing hidden to the right
    shown = args.inner_text()
    assert TITLE in shown and "ACME-2291-OFFICE-FURNITURE-AND-SCREENS-DELIVERY-NOVEMBER" in shown  # in full
    expect(args.locator("mark.untrusted")).to_contain_text(IBAN)
    inside(page, page.locator("#composer textarea"))
    inside(page, page.locator("#composer button[type=submit]"))
    page.screenshot(path=str(served.home / f"approval-{kind}.png"), full_page=True)
    card.locator("button.approve").click()
    expect(turn.locator(".status-word")).to_have_text("done")
    expect(page.locator("article.turn").last.locator(".bubble.answer").last).to_have_text("Made the task.")
    no_horizontal_scroll(page)
    # The approvals page fits too.
    served.script(calls(call("tasks__delete_task", id=1)), text("Deleted."))
    send(page, served, "delete task 1")
    expect(page.locator("article.turn").last.locator(".status-word")).to_have_text("awaiting approval")
    page.goto(served.url + "/approvals")
    card = page.locator(".approval").first
    no_horizontal_scroll(page)
    inside(page, card.locator("button.approve"))
    inside(page, card.locator("button.deny"))
    card.locator("button.deny").click()
    expect(card.locator(".result-line")).to_contain_text("Turn finished")


def test_the_conversation_list_folds_away_on_a_phone(screen, served):
    kind, page = screen
    served.script(text("Hello."))
    send(page, served, "hello")
    expect(page.locator("article.turn").last.locator(".status-word")).to_have_text("done")
    page.reload()
    conv_list, toggle = page.locator("#conversation-list"), page.locator("#conversations-toggle")
    if kind == "phone":
        expect(conv_list).to_be_hidden()
        inside(page, toggle)
        toggle.click()
        expect(conv_list).to_be_visible()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        inside(page, conv_list.locator("li").first)
        toggle.click()
        expect(conv_list).to_be_hidden()
    else:
        expect(toggle).to_be_hidden()
        expect(conv_list).to_be_visible()
        aside, chat = page.locator("aside.conversations").bounding_box(), page.locator("#chat").bounding_box()
        assert aside["x"] + aside["width"] <= chat["x"]  # side by side
    no_horizontal_scroll(page)


def test_the_answer_streams_in_pieces(screen, served):
    _kind, page = screen
    words = "Here is the answer, arriving word by word as the model writes it."
    served.script({"text": words, "stream_delay_seconds": 0.25})
    send(page, served, "stream something")
    bubble = page.locator("article.turn").last.locator(".bubble.answer").first
    expect(bubble).to_contain_text("Here is")
    partial = bubble.inner_text()
    assert partial != words and words.startswith(partial.strip()), partial  # a piece, not the whole
    expect(page.locator("article.turn").last.locator(".live-status")).to_have_text("writing")
    expect(page.locator("article.turn").last.locator(".status-word")).to_have_text("done")
    expect(page.locator("article.turn").last.locator(".bubble.answer")).to_have_text(words)


def test_left_out_tools_and_discarded_text_render_compactly(screen, served):
    _kind, page = screen
    page.goto(served.url + "/chat")
    out = page.evaluate("""() => {
        const box = document.createElement("div");
        document.getElementById("turns").append(box);
        const node = window.PaluiChat.renderEvent({type: "tools_left_out", reason: "left out by budgets.tools (30)",
                                                   tools: ["mcp-a__one", "mcp-a__two", "mcp-b__three"]});
        box.append(node);
        window.PaluiChat.streamInto(box, "first try \u202e ");
        window.PaluiChat.discardStream(box);
        window.PaluiChat.streamInto(box, "kept" + " ".repeat(9));
        const held = box.querySelector(".bubble.streaming").textContent;
        window.PaluiChat.endStream(box, "kept" + " ".repeat(9) + "end");
        return {summary: node.querySelector("summary").textContent, names: node.querySelectorAll("code").length,
                discarded: box.querySelector(".bubble.discarded").textContent,
                held: held, kept: box.querySelector(".bubble.answer:not(.discarded)").textContent};
    }""")
    assert out["summary"] == "3 tool(s) left out by budgets.tools (30)" and out["names"] == 3
    assert "discarded (retrying)" in out["discarded"] and "\\u202e" in out["discarded"]  # escaped while streaming
    assert out["held"] == "kept"  # a run of spaces waits until it is complete
    assert out["kept"] == "kept␠×9end"  # the whitespace-run rule, once the text is complete
