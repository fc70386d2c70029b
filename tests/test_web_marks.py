"""The web page's approval card shows the marks' spans (spec §4.6): only the parts of a longer value that came
from untrusted content are highlighted and quoted, numbers too, everything escaped. Through HTTP: a real
turn that read a page asks for a write, and the approvals page and the card are fetched."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from palui.server.app import create_app, session_value
from support.httpserver import PageServer
from support.scripts import call, calls, text, write_script

PAGE = ("<html><body><h1>Hotels in Paris</h1><ul><li>Le Marais Boutique</li><li>Luxury Palace</li></ul>"
        "<p>Luxury Palace: 1 Rue de la Paix, 75002 Paris, France</p><p>Booking id: 7</p></body></html>")
TITLE = "<b>Stay</b> at Luxury Palace, address: 1 Rue de la Paix, 75002 Paris"
SOURCE = "web__fetch_page at step 1"


@pytest.fixture
def asked(home, tmp_path):
    """A turn that read the page and asks to update task 7 with a title made from it: (service, approval)."""
    import asyncio

    from palui.service import Service

    (home / "palui.toml").write_text("[web]\nallow_private = true\n")
    with PageServer({"/hotels": PAGE}) as srv:
        svc = Service()
        model = write_script(tmp_path / "s.json", calls(call("web__fetch_page", url=srv.url + "/hotels")),
                             calls(call("tasks__update_task", id=7, title=TITLE)), text("done"))
        r = asyncio.run(svc.turns.send("find me a hotel in Paris", model=model))
        [a] = r["pending_approvals"]
        yield svc, a
        svc.db.close()


def card(svc, aid: str) -> str:
    app = create_app(svc, "tok", port=8765)
    with TestClient(app, base_url="http://127.0.0.1:8765", cookies={"palui_session": session_value("tok")}) as c:
        page = c.get("/approvals")
        assert page.status_code == 200
        html = c.get(f"/approvals/{aid}/card").text
    assert html.split('<div class="buttons">')[0] in page.text  # the page shows the same card
    return html


@pytest.mark.slow
def test_the_card_highlights_only_the_spans_of_a_longer_value_and_the_number(asked):
    svc, a = asked
    marks = {m["path"]: m for m in a["untrusted_args"]}
    assert marks["id"]["spans"] == ["7"]
    assert marks["title"]["spans"] != [TITLE]  # parts of the value, not all of it
    html = card(svc, a["id"])
    args = html.split('<pre class="args">')[1].split("</pre>")[0]
    mark = f'<mark class="untrusted" title="from untrusted content: {SOURCE}">'
    assert f"&#34;id&#34;: {mark}7</mark>" in args  # a number mark is highlighted too
    assert (f"&#34;&lt;b&gt;Stay&lt;/b&gt; at {mark}Luxury Palace</mark>, address: "
            f"{mark}1 Rue de la Paix, 75002 Paris</mark>&#34;") in args
    assert "<b>" not in html
    listed = re.sub(r"\s+", " ", html.split('<ul class="untrusted-list">')[1].split("</ul>")[0])
    assert ("<code>title</code>: “Luxury Palace” and “1 Rue de la Paix, 75002 Paris” came from untrusted content: "
            f"<strong>{SOURCE}</strong>") in listed
    assert "<code>id</code> = “7” came from untrusted content" in listed
    assert "&lt;b&gt;Stay" not in listed  # the whole value is not said to have come from the page


def test_spans_of_two_sources_overlapping_repeated_or_missing():
    from palui.web.base import args_html

    value = "pay DE89 3704 now, then pay DE89 3704 again"
    marks = [{"path": "note", "value": value, "source": "a", "spans": ["pay DE89 3704", "pay DE89 3704"]},
             {"path": "note", "value": value, "source": "b", "spans": ["DE89 3704 now"]}]
    html = str(args_html({"note": value}, marks))
    both, only_a = ('<mark class="untrusted" title="from untrusted content: a, b">',
                    '<mark class="untrusted" title="from untrusted content: a">')
    assert f"&#34;{both}pay DE89 3704 now</mark>, then {only_a}pay DE89 3704</mark> again&#34;" in html
    # a mark stored before spans were, or a span the value does not hold: the whole value, never nothing
    for m in ({"path": "note", "value": value, "source": "a"},
              {"path": "note", "value": value, "source": "a", "spans": ["not in it"]}):
        assert f"{only_a}&#34;{value}&#34;</mark>" in str(args_html({"note": value}, [m]))
