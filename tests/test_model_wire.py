"""The real provider code path (spec §9): OpenAI and Anthropic wire APIs against a local fake.

Turns run through the CLI (``python -m palui run``) and the service API, with real provider
SDKs talking HTTP to ``tests/support/fake_llm.py``. Nothing here reaches a real provider.
"""

from __future__ import annotations

import json

import pytest

from palui import models
from support.fake_llm import FakeLLM

BUILTIN_TOOLS = {
    "recall__search_memories", "recall__add_memory", "recall__forget_memory",
    "tasks__list_tasks", "tasks__create_task", "tasks__update_task", "tasks__delete_task",
    "web__fetch_page", "messages__send_message",
}


@pytest.fixture
def fake():
    with FakeLLM() as f:
        yield f


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch):
    """A developer's real keys must never reach a test (the CLI fixture copies os.environ)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def openai_model(fake: FakeLLM) -> str:
    return f"openai:gpt-test@{fake.openai_url}"


def anthropic_model(fake: FakeLLM) -> str:
    return f"anthropic:claude-test@{fake.anthropic_url}"


def run_json(cli, *args: str, env: dict | None = None) -> tuple[int, dict]:
    r = cli("run", "--json", *args, env=env)
    assert r.stdout.strip(), r.stderr
    return r.returncode, json.loads(r.stdout)


# -- tool round trips -------------------------------------------------------------------------------


@pytest.mark.slow
def test_openai_tool_round_trip_through_cli(cli, svc, fake):
    fake.tool_call("recall__add_memory", {"text": "buy milk"}, input_tokens=31, output_tokens=7)
    fake.text("Saved: buy milk.", input_tokens=52, output_tokens=4)

    code, r = run_json(cli, "--model", openai_model(fake), "remember to buy milk")

    assert code == 0 and r["status"] == "done", r
    assert r["answer"] == "Saved: buy milk."
    assert r["usage"] == {**r["usage"], "steps": 2, "input_tokens": 31 + 52, "output_tokens": 7 + 4,
                          "tokens": 31 + 52 + 7 + 4}
    first, second = fake.requests
    assert first.path == second.path == "/v1/chat/completions"
    assert BUILTIN_TOOLS <= set(first.tool_names)
    assert first.body["messages"][-1] == {"role": "user", "content": "remember to buy milk"}
    call_id = first.response["choices"][0]["message"]["tool_calls"][0]["id"]
    [result] = second.tool_results
    assert result["id"] == call_id and "Saved memory" in result["content"]
    # The call really ran through the governed path: stored, and audited as a run.
    assert [m["text"] for m in svc.memories.list()] == ["buy milk"]
    [row] = svc.audit.rows()
    assert (row["tool"], row["verdict"], row["outcome"]) == ("recall__add_memory", "run", "ok")


@pytest.mark.slow
def test_disabled_tool_is_not_offered_and_a_call_to_it_is_refused(cli, svc, fake):
    assert cli("tools", "disable", "recall__add_memory").returncode == 0
    # The model calls the tool anyway (a hijacked or confused model would).
    fake.tool_call("recall__add_memory", {"text": "buy milk"})
    fake.text("I could not save that.")

    r = cli("run", "--model", openai_model(fake), "remember to buy milk")

    assert r.returncode == 0, r.stderr
    assert "I could not save that." in r.stdout
    first, second = fake.requests
    assert "recall__add_memory" not in first.tool_names
    assert BUILTIN_TOOLS - {"recall__add_memory"} <= set(first.tool_names)
    [result] = second.tool_results
    assert "cannot be called" in result["content"] and "switched off" in result["content"]
    assert svc.memories.list() == []
    [row] = svc.audit.rows()
    assert (row["verdict"], row["outcome"]) == ("off", "refused")


@pytest.mark.slow
async def test_anthropic_tool_round_trip(svc, fake):
    fake.tool_call("recall__add_memory", {"text": "buy milk"}, input_tokens=40, output_tokens=9)
    fake.text("Saved.", input_tokens=61, output_tokens=2)

    r = await svc.turns.send("remember to buy milk", model=anthropic_model(fake))

    assert r["status"] == "done", r
    assert r["answer"] == "Saved."
    assert (r["usage"]["input_tokens"], r["usage"]["output_tokens"]) == (40 + 61, 9 + 2)
    first, second = fake.requests
    assert first.path == second.path == "/v1/messages"
    assert BUILTIN_TOOLS <= set(first.tool_names)
    assert all("input_schema" in t for t in first.body["tools"])
    assert "Palui" in first.body["system"]
    assert first.body["max_tokens"] == models.ANTHROPIC_MAX_TOKENS  # non-streaming needs it
    tool_use = [b for b in first.response["content"] if b["type"] == "tool_use"][0]
    assert second.body["messages"][1]["content"][0]["id"] == tool_use["id"]
    [result] = second.tool_results
    assert result["id"] == tool_use["id"] and "Saved memory" in result["content"]
    assert [m["text"] for m in svc.memories.list()] == ["buy milk"]


@pytest.mark.slow
async def test_anthropic_base_url_written_with_v1_still_reaches_messages(svc, fake):
    fake.text("hello")
    r = await svc.turns.send("hi", model=f"anthropic:claude-test@{fake.openai_url}")  # ends in /v1
    assert r["status"] == "done", r
    assert [q.path for q in fake.requests] == ["/v1/messages"]


# -- provider errors, retries, time budget ---------------------------------------------------------


@pytest.mark.slow
async def test_429_then_success_is_retried(svc, fake):
    fake.error(429, message="slow down")  # no Retry-After: our own backoff (0.25-0.5 s) applies
    fake.text("ok", input_tokens=5, output_tokens=1)

    r = await svc.turns.send("hi", model=openai_model(fake))

    assert r["status"] == "done" and r["answer"] == "ok", r
    assert len(fake.requests) == 2
    assert (r["usage"]["steps"], r["usage"]["tokens"]) == (1, 6)  # failed attempts are not steps


@pytest.mark.slow
async def test_anthropic_overloaded_is_retried_honouring_retry_after(svc, fake, monkeypatch):
    waits = []
    backoff = models._backoff
    def recording(n, retry_after):
        waits.append((n, retry_after, backoff(n, retry_after)))
        return waits[-1][2]

    monkeypatch.setattr(models, "_backoff", recording)
    fake.error(529, retry_after="0").error(500, retry_after="0")
    fake.text("ok")

    r = await svc.turns.send("hi", model=anthropic_model(fake))

    assert r["status"] == "done", r
    assert waits == [(1, 0.0, 0.0), (2, 0.0, 0.0)]  # waited the provider's Retry-After, not our backoff
    assert len(fake.requests) == 3


@pytest.mark.slow
async def test_5xx_that_keeps_failing_ends_in_error_naming_it(svc, fake):
    fake.error(503, times=models.MAX_RETRIES + 1, message="upstream down", retry_after="0")

    r = await svc.turns.send("hi", model=openai_model(fake))

    assert r["status"] == "error"
    assert f"kept failing (HTTP 503) after {models.MAX_RETRIES + 1} attempts: upstream down" in r["error"]
    assert len(fake.requests) == models.MAX_RETRIES + 1


@pytest.mark.slow
async def test_retry_after_past_the_time_budget_ends_at_once(home, fake, monkeypatch):
    from palui.service import Service

    # Retry-After waits are capped at 60 s: a budget of 30 s leaves less than that at any load.
    monkeypatch.setenv("PALUI_BUDGETS__SECONDS", "30")
    svc = Service()
    fake.error(429, message="quota", retry_after="60")
    try:
        r = await svc.turns.send("hi", model=openai_model(fake))
    finally:
        svc.db.close()
    assert r["status"] == "error"
    assert "HTTP 429" in r["error"] and "no time left in the turn's budget" in r["error"]
    assert r["usage"]["seconds"] < 30  # did not sleep into the budget (it would have slept all of it)
    assert len(fake.requests) == 1


@pytest.mark.slow
async def test_unreachable_provider_fails_after_few_retries(svc):
    with FakeLLM() as gone:
        url = gone.openai_url
    r = await svc.turns.send("hi", model=f"openai:gpt-test@{url}")
    assert r["status"] == "error"
    assert f"cannot reach the provider after {models.CONNECT_RETRIES + 1} attempts" in r["error"]


@pytest.mark.slow
def test_400_ends_the_turn_in_error_with_the_providers_message(cli, fake):
    fake.error(400, message="Invalid value for 'model': no such model")

    code, r = run_json(cli, "--model", openai_model(fake), "hi")

    assert code == 1
    assert r["status"] == "error"
    assert "refused the request (HTTP 400): Invalid value for 'model': no such model" in r["error"]
    assert len(fake.requests) == 1  # a 400 is not retried


@pytest.mark.slow
def test_slow_provider_hits_the_time_budget(cli, fake):
    fake.text("too late", delay=600)

    code, r = run_json(cli, "--model", openai_model(fake), "hi", env={"PALUI_BUDGETS__SECONDS": "2"})

    assert code == 1
    assert r["status"] == "budget"
    assert "time budget" in r["budget"]
    assert r["answer"] != "too late"
    assert r["usage"]["seconds"] < 600  # cut at the budget, before the provider's answer


# -- no key, no base URL ------------------------------------------------------------------------------


def test_openai_without_key_or_base_url_refuses_and_mentions_script(cli):
    r = cli("run", "--model", "openai:gpt-4.1-mini", "hi")
    assert r.returncode == 1
    assert "OPENAI_API_KEY" in r.stderr and "script:" in r.stderr


async def test_anthropic_without_key_or_base_url_ends_in_error_mentioning_script(svc):
    r = await svc.turns.send("hi", model="anthropic:claude-sonnet-4-5")
    assert r["status"] == "error"
    assert "ANTHROPIC_API_KEY" in r["error"] and "script:" in r["error"]


@pytest.mark.slow
async def test_provider_key_is_redacted_from_error_messages(home, fake, monkeypatch):
    from palui.service import Service

    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("LOCAL_KEY", key)  # a base URL gets a key only when its [models.NAME] table names one
    (home / "palui.toml").write_text(f'[models.local]\nmodel = "openai:gpt-test"\nbase_url = "{fake.openai_url}"\n'
                                     'api_key_env = "LOCAL_KEY"\n', encoding="utf-8")
    svc = Service()
    fake.error(401, message=f"Incorrect API key provided: {key}.")
    try:
        r = await svc.turns.send("hi", model="@local")
        inbox = svc.notifier.inbox()
    finally:
        svc.db.close()

    assert r["status"] == "error"
    assert "@local: the provider refused the request (HTTP 401)" in r["error"]
    assert "Incorrect API key provided: [redacted]" in r["error"]
    assert key not in json.dumps(r) and key not in json.dumps(inbox)
    assert fake.requests[0].headers["authorization"] == f"Bearer {key}"  # the key really went out


@pytest.mark.slow
async def test_anthropic_refused_call_is_marked_is_error(svc, fake):
    svc.tools.set_enabled(["recall__add_memory"], False)
    fake.tool_call("recall__add_memory", {"text": "x"})
    fake.text("ok")
    r = await svc.turns.send("save x", model=anthropic_model(fake))
    assert r["status"] == "done"
    second = fake.requests[1]
    blocks = [b for m in second.body["messages"] if isinstance(m.get("content"), list)
              for b in m["content"] if b.get("type") == "tool_result"]
    assert blocks and blocks[-1]["is_error"] is True
