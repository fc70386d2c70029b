"""Limits mean what they say (spec §6.1)."""

from __future__ import annotations

import pytest

from palui.service import Service
from support.httpserver import PageServer
from support.scripts import call, calls, text, write_script


@pytest.mark.slow
async def test_no_call_reaches_a_connector_after_the_time_budget(home, tmp_path):
    """Ten 2-second calls in one response with budgets.seconds = 5: only those started within the
    budget reach the server; the rest are answered "not run" and audited as not dispatched."""
    (home / "palui.toml").write_text("[web]\nallow_private = true\n[budgets]\nseconds = 5\n")
    with PageServer({}, slow_seconds=2) as srv:
        svc = Service()
        model = write_script(tmp_path / "s.json",
                             calls(*[call("web__fetch_page", url=f"{srv.url}/slow/{i}") for i in range(10)]),
                             text("never"))
        r = await svc.turns.send("fetch them all", model=model)
        answered = list(srv.answered)  # before the server's waits end
        await svc.close()
        hits = list(srv.hits)
    assert r["status"] == "budget" and "time budget" in r["budget"]
    assert 2 <= len(hits) <= 3, hits  # two full calls, the third cut at 5 s
    results = [e for e in r["events"] if e["type"] == "tool_call"]
    not_run = [e for e in results if e.get("not_dispatched")]
    assert len(not_run) == 10 - len(hits)
    assert all(e["result"] == "Error: not run: the turn's time budget ran out." for e in not_run)
    outcomes = [a["outcome"] for a in svc.audit.rows(r["turn"])]
    assert outcomes.count("not run: time budget") == 10 - len(hits)
    assert len(answered) <= 2, answered  # a third call was cut at the budget, not waited for
