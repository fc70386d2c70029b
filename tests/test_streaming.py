"""Answers stream piece by piece (spec §9.3): the runner hands each piece of text to the front end as
the provider sends it (the model library's streaming request), for the OpenAI and Anthropic wires
(server-sent events from the fake provider) and the ``script:`` model; text of an attempt that is
retried is reported discarded, and only the final response's text stays."""

from __future__ import annotations

import pytest

from palui.types import shows_text
from support.fake_llm import FakeLLM, Reply
from support.scripts import call, calls, text, write_script


@pytest.fixture
def fake():
    with FakeLLM() as f:
        yield f


def wire_model(fake: FakeLLM, wire: str) -> str:
    return f"openai:gpt-test@{fake.openai_url}" if wire == "openai" else f"anthropic:claude-test@{fake.anthropic_url}"


async def send(svc, message: str, model: str):
    """Send as a front end that shows text as it arrives (the terminal, the page): requests are streamed."""
    events: list[dict] = []

    def sink(e: dict) -> None:
        events.append(e)

    r = await svc.turns.send(message, model=model, on_event=shows_text(sink))
    await svc.close()
    return r, events


def deltas(events):
    return [e["text"] for e in events if e["type"] == "text_delta"]


@pytest.mark.slow
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_a_provider_answer_arrives_in_pieces(svc, fake, wire):
    fake.replies.append(Reply(text="Hello there, world.", chunks=["Hel", "lo there", ", world."],
                              input_tokens=21, output_tokens=6))
    r, events = await send(svc, "hi", wire_model(fake, wire))
    assert r["status"] == "done" and r["answer"] == "Hello there, world."
    assert deltas(events) == ["Hel", "lo there", ", world."]
    assert fake.requests[0].body.get("stream") is True
    assert (r["usage"]["input_tokens"], r["usage"]["output_tokens"]) == (21, 6)  # the provider's own counts
    # Pieces are live only: the stored events keep the whole text once.
    stored = [e for e in r["events"] if e["type"] in ("text", "text_delta")]
    assert [(e["type"], e["text"]) for e in stored] == [("text", "Hello there, world.")]


@pytest.mark.slow
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_streamed_tool_calls_round_trip(svc, fake, wire):
    fake.replies.append(Reply(text="Saving it.", tool_calls=[("recall__add_memory", {"text": "buy milk"})]))
    fake.text("Saved: buy milk.")
    r, events = await send(svc, "remember to buy milk", wire_model(fake, wire))
    assert r["status"] == "done" and r["answer"] == "Saved: buy milk.", r
    kinds = [e["type"] for e in events if e["type"] in ("text_delta", "tool_start", "tool_call", "text")]
    # Ordered as it happened: the words sent with the call, then the call, then the answer.
    first_call = kinds.index("tool_start")
    assert "text_delta" in kinds[:first_call] and kinds[first_call + 1] == "tool_call"
    assert "".join(deltas(events)) == "Saving it.Saved: buy milk."
    assert svc.memories.list()[0]["text"] == "buy milk"


@pytest.mark.slow
async def test_text_streamed_before_a_retry_is_discarded(svc, fake):
    fake.replies.append(Reply(text="This answer breaks off", cut_after=2))
    fake.replies.append(Reply(text="The whole answer.", chunks=["The whole ", "answer."]))
    r, events = await send(svc, "hi", wire_model(fake, "openai"))
    assert r["status"] == "done" and r["answer"] == "The whole answer."
    kinds = [e["type"] for e in events]
    i = kinds.index("text_discarded")
    assert deltas(events[:i]) == ["This ", "answer "]
    assert events[i]["reason"] == "retrying"
    assert kinds[i + 1] == "retry" and events[i + 1]["reason"] == "the connection failed"
    assert deltas(events[i:]) == ["The whole ", "answer."]
    assert len(fake.requests) == 2


@pytest.mark.slow
async def test_a_provider_retry_is_an_event_with_its_wait(svc, fake):
    fake.error(429, retry_after="0")
    fake.text("After the wait.")
    r, events = await send(svc, "hi", wire_model(fake, "openai"))
    assert r["answer"] == "After the wait."
    [retry] = [e for e in events if e["type"] == "retry"]
    assert retry["reason"] == "HTTP 429" and retry["in_seconds"] == 0 and retry["attempt"] == 1
    assert "text_discarded" not in [e["type"] for e in events]  # nothing had streamed
    assert [e["type"] for e in r["events"]].count("retry") == 1  # stored: the turn's record shows the retry


async def test_the_script_model_streams_word_by_word(svc, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("tasks__list_tasks")),
                         {"text": "No tasks are open today.", "stream_delay_seconds": 0.01})
    r, events = await send(svc, "what is open?", model)
    assert r["answer"] == "No tasks are open today."
    assert deltas(events) == ["No ", "tasks ", "are ", "open ", "today."]
    assert r["usage"]["steps"] == 2


async def test_a_script_step_with_text_and_calls_streams_the_text_first(svc, tmp_path):
    step = calls(call("tasks__list_tasks"))
    step["text"] = "Looking."
    model = write_script(tmp_path / "s.json", step, text("Nothing open."))
    r, events = await send(svc, "what is open?", model)
    order = [e["type"] for e in events if e["type"] in ("text_delta", "tool_call")]
    assert order == ["text_delta", "tool_call", "text_delta", "text_delta"]
    assert r["answer"] == "Nothing open."


async def test_stored_events_have_their_index(svc, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("tasks__list_tasks")), text("Done."))
    r, _events = await send(svc, "list", model)
    assert [e["seq"] for e in r["events"]] == list(range(len(r["events"])))


@pytest.mark.slow
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_only_a_front_end_that_shows_text_gets_a_streamed_request(fake, wire, cli):
    """``palui run`` prints the answer as it arrives: streamed. ``palui run --json`` prints it at the end, as a
    job, a webhook or a chat channel does: the plain request (the streamed one costs several times as much)."""
    model = wire_model(fake, wire)
    fake.replies.append(Reply(text="Hello there, world.", chunks=["Hel", "lo there", ", world."]))
    r = cli("run", "hi", "--model", model)
    assert r.returncode == 0 and "Hello there, world." in r.stdout, r.stderr
    fake.replies.append(Reply(text="Hello there, world.", chunks=["Hel", "lo there", ", world."]))
    out = cli.json("run", "hi", "--model", model, "--json")
    assert out["answer"] == "Hello there, world."
    assert not [e for e in out["events"] if e["type"] == "text_delta"]
    shown, plain = fake.requests
    assert shown.body.get("stream") is True
    assert not plain.body.get("stream")


@pytest.mark.slow
async def test_a_turn_nobody_follows_is_not_streamed(svc, fake):
    events: list[dict] = []
    fake.replies.append(Reply(text="Hello there, world.", chunks=["Hel", "lo there", ", world."]))
    r = await svc.turns.send("hi", model=wire_model(fake, "openai"), on_event=events.append)
    await svc.close()
    assert r["answer"] == "Hello there, world."
    assert not [e for e in events if e["type"] == "text_delta"]
    assert [e["text"] for e in events if e["type"] == "text"] == ["Hello there, world."]
    assert not fake.requests[0].body.get("stream")
