"""``/status`` as text (palui.text.status): one set of lines for the terminal, the web chat and the chat
channels; texts from elsewhere escaped; the webhooks' hold shown while it holds (spec §6.6)."""

from __future__ import annotations

from palui.channels.base import status_text as channel_status
from palui.text.status import status_lines
from palui.web.status import status_text as web_status


def status(**over):
    s = {"model": "script:x.json", "tokens_today": 10, "caps": {"daily_tokens": 100, "runs_per_hour": 60,
                                                                 "webhook_runs_per_hour": 20},
         "runs_last_hour": 3, "paused": False, "paused_reason": None, "paused_until": None,
         "webhook_runs_last_hour": 0, "webhooks_held": False, "webhooks_held_until": None,
         "connectors": [{"id": "web", "state": "connected"}], "pending_approvals": 0, "pending_elicitations": 0,
         "channels": [], "audit_head": None}
    s.update(over)
    return s


def test_the_three_surfaces_say_the_same_facts():
    s = status(pending_elicitations=2, channels=[{"name": "telegram", "state": "paired", "last_failure": None}])
    terminal = status_lines(s)
    assert terminal[:3] == ["model: script:x.json", "tokens today: 10 of 100", "runs in the last hour: 3 of 60"]
    assert "questions from MCP servers waiting: 2 (palui elicitations list)" in terminal
    assert "channel telegram: paired" in terminal and "audit head: no rows yet" in terminal
    assert web_status(s).split("\n")[:6] == terminal[:6]
    assert channel_status(s).split("\n")[:6] == terminal[:6]
    assert "questions from MCP servers waiting: 2 (/approvals)" in web_status(s)


def test_the_webhooks_hold_shows_only_while_it_holds():
    assert not any(line.startswith("webhook turns") for line in status_lines(status()))
    held = status(webhooks_held=True, webhook_runs_last_hour=20, webhooks_held_until="2026-12-01T15:00:00+00:00")
    assert ("webhook turns: held, 20 of 20 in the last hour (caps.webhook_runs_per_hour) until "
            "2026-12-01T15:00:00+00:00") in status_lines(held)
    assert "webhook turns: held" in web_status(held) and "webhook turns: held" in channel_status(held)


def test_texts_from_elsewhere_are_escaped():
    s = status(model="script:\x1b[31mX\u202eY.json",  # a model string from PALUI_MODEL, shown as set
               connectors=[{"id": "mcp-x", "state": "error: \x1b[31mred\u202e"}],
               channels=[{"name": "matrix", "state": "error", "last_failure": "bad\nline"}],
               paused=True, paused_reason="daily \u200btoken cap", paused_until="tomorrow")
    text = "\n".join(status_lines(s))
    assert "\x1b" not in text and "\u202e" not in text and "\u200b" not in text
    assert "\\u001b" in text and "\\u202e" in text
    assert "last delivery failure: bad" in text and "bad\nline" not in text
    assert "model: script:\\u001b[31mX\\u202eY.json" in text
