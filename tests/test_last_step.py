"""A guard that ends a turn's tool use lets the model answer (spec §6.3): one last step without tools.

Through the CLI with the real provider SDKs against the local fake provider (what the last request
carries), scripted turns (a token cap already crossed, a last step cut short by a killed process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from support.fake_llm import FakeLLM
from support.scripts import call, calls, text, write_script

# A write repeated: a read whose results came back identical is answered from them at its 3rd time (spec §6.3).
SEARCH = ("recall__add_memory", {"text": "networking event"})
REPEATS = "budgets.repeat_calls: recall__add_memory was called a 3rd time with the same arguments in this turn"
LINE = f"Palui has ended this turn's tool use: {REPEATS}. You have no tools now and this is your last step"


@pytest.fixture
def fake():
    with FakeLLM() as f:
        yield f


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def run_json(cli, model: str) -> dict:
    r = cli("run", "--json", "--model", model, "who else is invited to the networking event?")
    assert r.stdout.strip(), r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow
def test_openai_last_step_sends_no_usable_tools_and_says_why(cli, fake):
    for _ in range(3):
        fake.tool_call(*SEARCH)
    fake.text("Nobody else is in your memories for that event.")
    r = run_json(cli, f"openai:gpt-test@{fake.openai_url}")
    assert r["status"] == "budget" and r["budget"] == REPEATS, r
    assert r["answer"] == "Nobody else is in your memories for that event."
    assert r["usage"]["steps"] == 4 and len(fake.requests) == 4
    last = fake.requests[-1].body
    assert last["tool_choice"] == "none" and SEARCH[0] in fake.requests[-1].tool_names
    assert all(q.body.get("tool_choice") != "none" for q in fake.requests[:-1])
    after_results = last["messages"][max(i for i, m in enumerate(last["messages"]) if m["role"] == "tool") + 1:]
    assert [m["role"] for m in after_results] in (["system"], ["developer"])
    assert after_results[0]["content"].startswith(LINE)
    # The line went to that one request only: the next turn's history has the answer, not the line.
    fake.text("You're welcome.")
    nxt = json.loads(cli("run", "--json", "--model", f"openai:gpt-test@{fake.openai_url}", "--conversation",
                         r["conversation"], "thanks").stdout)
    assert nxt["status"] == "done"
    sent = json.dumps(fake.requests[-1].body)
    assert "Nobody else is in your memories for that event." in sent and "Palui has ended" not in sent


@pytest.mark.slow
def test_anthropic_last_step_sends_no_usable_tools_and_says_why(cli, fake):
    for _ in range(3):
        fake.tool_call(*SEARCH)
    fake.text("Nobody else is in your memories for that event.")
    r = run_json(cli, f"anthropic:claude-test@{fake.anthropic_url}")
    assert r["status"] == "budget" and r["budget"] == REPEATS, r
    assert r["answer"] == "Nobody else is in your memories for that event."
    last = fake.requests[-1]
    assert last.body["tool_choice"] == {"type": "none"} and SEARCH[0] in last.tool_names
    assert LINE in json.dumps(last.body)
    assert len(last.tool_results) == 3  # the history of tool calls goes along with the definitions


def test_no_last_step_once_a_token_cap_is_crossed(cli, home, tmp_path):
    (home / "palui.toml").write_text('[caps]\ndaily_tokens = 250\ntimezone = "UTC"\n')
    step = calls(call(SEARCH[0], **SEARCH[1]), usage={"input_tokens": 90, "output_tokens": 10})
    model = write_script(tmp_path / "s.json", step, step, step, text("never", usage={"input_tokens": 1,
                                                                                   "output_tokens": 1}))
    r = json.loads(cli("run", "--json", "--model", model, "go").stdout)
    assert r["status"] == "budget"
    assert r["budget"] == (f"{REPEATS}; no last step: daily token cap reached (300 tokens used today; "
                           "the cap is 250)")
    assert r["answer"] is None and r["usage"]["steps"] == 3
    assert not [e for e in r["events"] if e["type"] == "last_step"]


@pytest.mark.slow
def test_a_last_step_cut_short_is_made_again_without_tools(cli, home, tmp_path):
    """The process running the last step dies (kill -9): the turn is taken up again with its last step,
    not an ordinary step with tools."""
    search = calls(call(SEARCH[0], **SEARCH[1]))
    path = tmp_path / "s.json"
    write_script(path, search, search, search, {"text": "slow", "delay_seconds": 600})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")} | {"PALUI_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "palui", "run", "--json", "--model", f"script:{path}", "go"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from palui.service import Service

    svc = Service()
    try:
        while not svc.db.all("SELECT 1 FROM turn_events WHERE event LIKE '%\"last_step\"%'"):
            assert proc.poll() is None, "palui run ended before its last step"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    write_script(path, search, search, search, text("Here is what I found."), text("never"))
    import asyncio

    [r] = asyncio.run(svc.turns.resume_ready())
    svc.db.close()
    assert r["status"] == "budget" and r["budget"] == REPEATS and r["answer"] == "Here is what I found.", r
    steps = [e for e in r["events"] if e["type"] == "step"]
    assert [(e["step"], e["tools_offered"]) for e in steps] == [(4, [])]
    assert len([e for e in r["events"] if e["type"] == "last_step"]) == 0  # stored once, by the first run
    audit = cli.json("audit", "--json", "--turn", r["turn"])
    assert [a["outcome"] for a in audit] == ["ok", "ok", "not run: loop stopped"]


def test_a_last_step_that_runs_out_of_time_ends_with_the_rule_and_says_so(cli, home, tmp_path):
    (home / "palui.toml").write_text("[budgets]\nseconds = 4\n")
    search = calls(call(SEARCH[0], **SEARCH[1]))
    model = write_script(tmp_path / "s.json", search, search, search, {"text": "slow", "delay_seconds": 600})
    r = run_json(cli, model)
    assert r["status"] == "budget"
    assert r["budget"] == f"{REPEATS}; the last step ran out of time (4 s)"
    assert r["answer"] is None
    assert [e["type"] for e in r["events"]].count("last_step") == 1
