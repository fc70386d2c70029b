"""Caps count tokens the way the provider bills them (spec §6.4): cached input counts at
``caps.cached_input_weight`` (by default the provider's: Anthropic 0.1, OpenAI 0.5), is kept apart in the stored
usage, and ``palui status`` and ``palui report`` show it apart. A fake provider on 127.0.0.1 answers in each wire
format with 30,000 of a turn's input tokens read from its cache (``support/fake_llm.py``), so the real client
libraries read the usage as they would from the provider.
"""

from __future__ import annotations

import json

import pytest

from support.fake_llm import FakeLLM

pytestmark = pytest.mark.slow


@pytest.fixture
def fake():
    with FakeLLM() as f:
        yield f


@pytest.mark.parametrize("wire,counted", [("anthropic", 50 + 3_000 + 3), ("openai", 50 + 15_000 + 3)])
def test_cached_input_counts_at_the_providers_weight_and_is_shown_apart(cli, home, fake, wire, counted):
    (home / "palui.toml").write_text("[caps]\ndaily_tokens = 50000\n")
    model = f"openai:gpt-test@{fake.openai_url}" if wire == "openai" else f"anthropic:claude-test@{fake.anthropic_url}"
    for _ in range(3):
        fake.text("Hi.", input_tokens=30_050, output_tokens=3, cached_input_tokens=30_000)
    for word in ("hello", "thanks", "bye"):  # under a full count, the second would pause Palui for the day
        out = json.loads(cli("run", "--json", "--model", model, word).stdout)
        assert out["status"] == "done", out
    status = json.loads(cli("status", "--json").stdout)
    assert (status["tokens_today"], status["cached_tokens_today"]) == (3 * counted, 90_000)
    assert not status["paused"]
    text = cli("status").stdout
    assert f"tokens today: {3 * counted} of 50000; cached input read: 90000 tokens, counted at the provider's " \
           "weight" in text
    report = json.loads(cli("report", "--json").stdout)["tokens"]
    assert (report["counted"], report["cached_input"]) == (3 * counted, 90_000)
    assert "cached input among them: 90,000 tokens" in cli("report").stdout


def test_the_weight_is_a_setting(cli, home, fake):
    (home / "palui.toml").write_text("[caps]\ndaily_tokens = 50000\ncached_input_weight = 1\n")
    model = f"anthropic:claude-test@{fake.anthropic_url}"
    for _ in range(2):
        fake.text("Hi.", input_tokens=30_050, output_tokens=3, cached_input_tokens=30_000)
    for word in ("hello", "thanks"):
        assert json.loads(cli("run", "--json", "--model", model, word).stdout)["status"] == "done"
    status = json.loads(cli("status", "--json").stdout)
    assert status["tokens_today"] == 2 * 30_053 and status["paused"]  # counted in full: the cap is reached
    assert "cached input read: 60000 tokens, counted at 1 each" in cli("status").stdout
    (home / "palui.toml").write_text("[caps]\ncached_input_weight = 1.5\n")
    r = cli("status")
    assert r.returncode == 1 and "key 'caps.cached_input_weight': must be a number from 0 to 1" in r.stderr
