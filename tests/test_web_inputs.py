"""The web page's rough edges, in a real browser (spec §8.1, docs/web.md): Playwright drives Debian's Chromium
against a real ``palui serve`` with a ``script:`` model.

- Stop updates the nav's Approvals count (the approvals it cancelled), without a reload;
- a failed "Add an MCP server" keeps what was typed in the form;
- ``/status`` and ``/channels`` fit a 390 px wide screen (no sideways scrolling);
- a long conversation title wraps in the sidebar.
"""

from __future__ import annotations

import re

import pytest

from support.scripts import call, calls, text
from support.web_rig import login, send

pytest.importorskip("playwright", reason="the playwright package is in the test extra")
from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.slow
expect.set_options(timeout=15_000)


def overflow(page) -> int:
    """How many pixels the page is wider than the window (0: no sideways scrolling)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def test_stop_updates_the_approvals_count_without_a_reload(page, served, web_pages):
    served.script(calls(call("web__fetch_page", url=web_pages.url + "/offer")),
                  calls(call("recall__add_memory", text="the IBAN")), text("never said"))
    turn = send(page, served, "read the offer and remember the IBAN")
    expect(turn.locator(".approval .state")).to_have_text("needs your approval")
    expect(page.locator("#pending-count")).to_have_text("1")
    page.click("form.stop button")
    expect(page.locator(".system-note").last).to_contain_text("Stopped t-")
    expect(page.locator("article.turn").last.locator(".status-word")).to_have_text("stopped")
    expect(page.locator("#pending-count")).to_have_count(0)  # the stop cancelled the one approval


def test_a_failed_add_keeps_what_was_typed(page, served, tmp_path):
    page.goto(served.url + "/connectors")
    form = page.locator("#add-server")
    form.locator('input[name="name"]').fill("broken notes")
    form.locator('input[name="command"]').fill(f"{tmp_path / 'no-such-server'} --notes ~/notes")
    form.locator('input[name="cwd"]').fill(str(tmp_path))
    form.locator('textarea[name="env"]').fill("NOTES_TOKEN=abc123")
    form.locator('input[name="timeout"]').fill("7")
    form.locator("button[type=submit]").click()
    expect(page.locator(".flash.error")).to_be_visible(timeout=30_000)
    expect(page).to_have_url(re.compile(r"/connectors$"))
    expect(form.locator('input[name="name"]')).to_have_value("broken notes")
    expect(form.locator('input[name="command"]')).to_have_value(f"{tmp_path / 'no-such-server'} --notes ~/notes")
    expect(form.locator('input[name="cwd"]')).to_have_value(str(tmp_path))
    expect(form.locator('textarea[name="env"]')).to_have_value("NOTES_TOKEN=abc123")
    expect(form.locator('input[name="timeout"]')).to_have_value("7")


@pytest.mark.parametrize("path", ["/status", "/channels"])
def test_the_page_fits_a_390_px_screen(context, served, web_pages, path):
    served.script(calls(call("web__fetch_page", url=web_pages.url + "/offer")), text("Read it."))
    setup = login(context, served, viewport={"width": 1280, "height": 900})
    send(setup, served, "read the offer")  # an audit row, whose hash /status shows
    expect(setup.locator("article.turn").last.locator(".status-word")).to_have_text("done")
    setup.close()
    pg = login(context, served, viewport={"width": 390, "height": 844})
    try:
        pg.goto(served.url + path)
        pg.wait_for_load_state("networkidle")
        assert overflow(pg) == 0, f"{path} is {overflow(pg)} px wider than a 390 px screen"
    finally:
        pg.close()


def test_a_long_conversation_title_wraps_in_the_sidebar(page, served):
    served.script(text("Fine."))
    long_word = "Lieferantenrechnungsabstimmungsverfahrensbeschleunigung" * 3  # no place to break a line
    turn = send(page, served, long_word)
    expect(turn.locator(".status-word")).to_have_text("done")
    page.reload()
    title = page.locator(".conversations li .title").first
    expect(title).to_be_visible()
    sidebar = page.locator("aside.conversations")
    fits = sidebar.evaluate("a => Array.from(a.querySelectorAll('.title')).every("
                            "t => t.scrollWidth <= t.clientWidth + 1 && t.getBoundingClientRect().right <= "
                            "a.getBoundingClientRect().right + 1)")
    assert fits, "a conversation title runs out of the sidebar"
