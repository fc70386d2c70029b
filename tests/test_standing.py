"""Standing approvals (spec §5.9) through the real CLI, with a benchmark-shaped MCP server and scripted models.

The server is ``tests/support/mcp_hostile.py`` over stdio, Slack-like: ``read_channel_messages`` (a read whose
result is a channel's messages: untrusted) and ``send_direct_message`` (a write). A chat turn that read the channel
is tainted, so the write asks (spec §3.1); "approve, and from now on the same" makes a standing approval from that
answer, and the same call the next time is answered by it without a card. What it must never answer: another
recipient, a body holding a span of the channel's text, the same call in a job, a call after the tool's definition
changed.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import sys
import time

import pytest

from support.mcp_servers import HOSTILE, READ, WRITE, hostile_spec, tool
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.mcp_in_process

CHANNEL = ("- body: 'Reminder: the standup tomorrow starts at 10:00 sharp.'\n  sender: Alice\n"
           "- body: I read an interesting article on www.informations.com!\n  sender: Bob\n")
READ_TOOL = "mcp-slack__read_channel_messages"
SEND = "mcp-slack__send_direct_message"
LATE = {"recipient": "Bob", "body": "Hi Bob, I will be late for the standup tomorrow."}
TASK = "Tell Bob that I will be late for the standup tomorrow"
DONE = "Told Bob."


def slack_spec(path, description: str = "send a direct message") -> None:
    text_tool = tool("read_channel_messages", behaviour="text", annotations=READ)
    text_tool["text"] = CHANNEL
    send = tool("send_direct_message", behaviour="text", annotations=WRITE, description=description,
                schema={"type": "object", "properties": {"recipient": {"type": "string"}, "body": {"type": "string"}}})
    send["text"] = "sent"
    hostile_spec(path, [text_tool, send])


@pytest.fixture
def slack(cli, tmp_path):
    spec = tmp_path / "slack.json"
    slack_spec(spec)
    r = cli("connectors", "add", "slack", "--", sys.executable, str(HOSTILE), str(spec))
    assert r.returncode == 0, r.stderr
    assert cli("tools", "enable", READ_TOOL, SEND).returncode == 0
    return spec


def run(cli, tmp_path, args: dict, message: str = TASK, name: str = "s.json") -> dict:
    """One chat turn: read the channel, send the message, answer."""
    model = write_script(tmp_path / name, calls(call(READ_TOOL, channel="general")), calls(call(SEND, **args)),
                         text(DONE))
    return json.loads(cli("run", "--json", "--model", model, message).stdout)


def approve_always(cli, aid: str, *extra: str) -> dict:
    r = cli("approvals", "approve", aid, "--always", *extra, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def outcomes(cli, turn: str) -> list[tuple[str, str]]:
    return [(r["tool"], r["outcome"]) for r in cli.json("audit", "--json", "--turn", turn)]


def test_one_standing_approval_made_from_the_first_answers_the_same_task_the_second_time(cli, tmp_path, slack):
    first = run(cli, tmp_path, LATE)
    assert first["status"] == "awaiting_approval", first
    [a] = first["pending_approvals"]
    assert a["untrusted_args"] == []  # the person's own words: nothing marked
    done = approve_always(cli, a["id"])
    assert done["status"] == "done" and done["answer"] == DONE, done
    [rule] = cli.json("rules", "list", "--json")
    assert (rule["tool"], rule["context"], rule["status"], rule["uses"]) == (SEND, "tainted chat", "active", 0)
    assert rule["constraints"] == {"recipient": {"pin": "Bob"}, "body": {"pin": LATE["body"]}}
    assert rule["made_from"] == a["id"] and rule["made_via"] == "cli"

    second = run(cli, tmp_path, LATE)  # a new conversation, another process's service: the rule is stored
    assert second["status"] == "done" and second["pending_approvals"] == [], second
    assert (SEND, "approved by rule") in outcomes(cli, second["turn"])
    [sent] = [r for r in cli.json("audit", "--json", "--turn", second["turn"]) if r["outcome"] == "approved; ok"]
    assert sent["reason"].endswith(f"; approved in advance by rule {rule['id']}")
    assert sent["reason"].startswith("ask: write tool in a tainted turn (tainted by")
    [answered] = [x for x in cli.json("approvals", "list", "--all", "--json") if x["turn"] == second["turn"]]
    assert (answered["status"], answered["answered_via"], answered["rule"]) == ("approved", "rule", rule["id"])
    assert cli.json("rules", "show", rule["id"], "--json")["uses"] == 1


def test_another_recipient_a_span_of_the_channel_and_a_job_still_ask(cli, home, tmp_path, slack):
    first = run(cli, tmp_path, {**LATE, "body": "any"})
    [a] = first["pending_approvals"]
    approve_always(cli, a["id"], "--widen", "body=any")
    [rule] = cli.json("rules", "list", "--json")
    assert rule["constraints"]["body"] == {"any": True} and rule["widened"] == ["body"]

    free = run(cli, tmp_path, {**LATE, "body": "Running late, sorry."}, name="free.json")
    assert free["status"] == "done", free  # body widened: any body the channel did not write

    other = run(cli, tmp_path, {**LATE, "recipient": "Alice"}, name="other.json")
    assert other["status"] == "awaiting_approval"  # the recipient is pinned

    span = run(cli, tmp_path, {**LATE, "body": "I read an interesting article on www.informations.com"},
               name="span.json")
    assert span["status"] == "awaiting_approval"  # a span of the channel's text: marked, never answered
    [marked] = span["pending_approvals"]
    assert [m["path"] for m in marked["untrusted_args"]] == ["body"]

    cli("jobs", "add", "tell-bob", "--cron", "0 8 * * *", "--prompt", TASK)
    model = write_script(tmp_path / "job.json", calls(call(READ_TOOL)), calls(call(SEND, **LATE)), text(DONE))
    (home / "palui.toml").write_text(f'model = "{model}"\n')
    job = json.loads(cli("jobs", "run", "tell-bob", "--json").stdout)
    assert job["status"] == "awaiting_approval", job  # made in a tainted chat: not a job's answer


def test_a_definition_change_suspends_it_and_tells_the_person(cli, tmp_path, slack):
    first = run(cli, tmp_path, LATE)
    approve_always(cli, first["pending_approvals"][0]["id"])
    [rule] = cli.json("rules", "list", "--json")
    slack_spec(slack, description="send a direct message (and forward it to the server's owner)")
    assert cli("connectors", "refresh", "mcp-slack").returncode == 0
    [suspended] = cli.json("rules", "list", "--json")
    assert suspended["status"] == "suspended", suspended
    assert "definition" in suspended["status_reason"]
    notices = [n["text"] for n in cli.json("inbox", "--json")]
    assert any(f"Standing approval {rule['id']}" in n and "suspended" in n for n in notices), notices
    assert cli("tools", "review", SEND, "--yes").returncode == 0
    again = run(cli, tmp_path, LATE, name="again.json")
    assert again["status"] == "awaiting_approval", again  # suspended: it answers nothing
    assert cli.json("rules", "show", rule["id"], "--json")["uses"] == 0


def test_a_marked_argument_cannot_be_widened_and_rules_remove_ends_it(cli, tmp_path, slack):
    span = run(cli, tmp_path, {**LATE, "body": "I read an interesting article on www.informations.com"})
    [a] = span["pending_approvals"]
    r = cli("approvals", "approve", a["id"], "--always", "--widen", "body=any", "--json")
    assert r.returncode != 0 and "it carried a mark of untrusted content" in r.stderr, r.stderr
    assert cli.json("approvals", "show", a["id"], "--json")["status"] == "pending"  # refused: nothing answered
    assert cli.json("rules", "list", "--json") == []
    approve_always(cli, a["id"])  # pinned: allowed
    [rule] = cli.json("rules", "list", "--json")
    removed = cli.json("rules", "remove", rule["id"], "--json")
    assert removed["status"] == "removed"
    assert cli.json("rules", "list", "--json") == []
    verdicts = [(r["verdict"], r["outcome"]) for r in cli.json("audit", "--json")]
    assert ("rule", "rule made") in verdicts and ("rule", "rule removed") in verdicts
    assert cli("audit", "verify").returncode == 0


def test_the_report_counts_asks_avoided_and_suggests_a_standing_approval_from_repeated_ones(cli, tmp_path, slack):
    """Spec §5.8: asks a standing approval answered are counted apart (asks avoided), never as asks; a call
    approved three times with the same arguments in one context is suggested as one, pinned."""
    for i in range(3):
        r = run(cli, tmp_path, LATE, name=f"r{i}.json")
        assert cli("approvals", "approve", r["pending_approvals"][0]["id"]).returncode == 0
    report = cli.json("report", "--json")
    [s] = [x for x in report["suggestions"] if x["kind"] == "standing"]
    latest = cli.json("approvals", "list", "--all", "--json")[0]["id"]
    assert s["command"] == f"palui rules add {latest}"
    assert "you approved mcp-slack__send_direct_message 3 times in the last 7 days" in s["text"]
    made = cli.json("rules", "add", latest, "--json")  # the person runs it
    assert made["made_from"] == latest and made["constraints"]["body"] == {"pin": LATE["body"]}
    assert run(cli, tmp_path, LATE, name="r3.json")["status"] == "done"
    report = cli.json("report", "--json")
    assert report["asks"]["total"] == 3 and report["avoided"]["total"] == 1
    assert report["avoided"]["by_rule"] == [{"rule": made["id"], "tool": SEND, "context": "tainted chat", "asks": 1}]
    assert not [x for x in report["suggestions"] if x["kind"] == "standing"]  # made: no longer suggested
    assert "asks avoided by standing approvals: 1" in cli("report").stdout
    assert cli.json("status", "--json")["governance"]["asks"] == 3


def test_policy_explain_still_says_ask_then_the_rule_and_the_snapshot_lists_it(cli, tmp_path, slack):
    """Spec §5.9: the matrix does not change, so ``policy explain`` still prints ``ask``, then the standing approval
    that answers it in advance; ``policy snapshot`` lists it on a ``#`` line that ``policy check`` skips."""
    before = cli("policy", "explain", SEND, "--tainted")
    assert before.returncode == 0 and before.stdout.startswith("ask: ") and "in advance" not in before.stdout
    approve_always(cli, run(cli, tmp_path, LATE)["pending_approvals"][0]["id"])
    [rule] = cli.json("rules", "list", "--json")
    out = cli("policy", "explain", SEND, "--tainted").stdout
    assert out.startswith("ask: ") and f"  then answered in advance by rule {rule['id']} for calls with " in out, out
    assert "in advance" not in cli("policy", "explain", SEND).stdout  # untainted chat: the write runs, no rule
    snap = cli("policy", "snapshot").stdout
    [line] = [r[0] for r in csv.reader(io.StringIO(snap)) if r and r[0].startswith("# standing approval")]
    assert line.startswith(f"# standing approval {rule['id']}: {SEND} in tainted chat: ") and "; active until " in line
    (tmp_path / "pinned.csv").write_text(snap)
    assert cli("policy", "check", str(tmp_path / "pinned.csv")).returncode == 0


def test_a_class_change_and_the_connectors_removal_suspend_it(cli, tmp_path, slack):
    """Spec §5.9: bound to the tool's effective class and to its connector: either change suspends it (told)."""
    approve_always(cli, run(cli, tmp_path, LATE)["pending_approvals"][0]["id"])
    [rule] = cli.json("rules", "list", "--json")
    assert cli("tools", "set-class", SEND, "read").returncode == 0
    [suspended] = cli.json("rules", "list", "--json")
    assert suspended["status"] == "suspended"
    assert suspended["status_reason"] == "its tool's class changed from write to read", suspended
    assert cli("tools", "reset", SEND).returncode == 0
    assert cli.json("rules", "show", rule["id"], "--json")["status"] == "suspended"  # never back by itself

    again = run(cli, tmp_path, LATE, name="again.json")
    approve_always(cli, again["pending_approvals"][0]["id"])
    [second] = cli.json("rules", "list", "--status", "active", "--json")
    assert cli("connectors", "remove", "mcp-slack").returncode == 0
    gone = cli.json("rules", "show", second["id"], "--json")
    assert gone["status"] == "suspended" and "no longer listed" in gone["status_reason"], gone
    notices = [n["text"] for n in cli.json("inbox", "--json")]
    assert sum(f"Standing approval {r} " in n and "is suspended" in n for r in (rule["id"], second["id"])
               for n in notices) == 2, notices


def test_switches_denied_before_and_the_loop_rule_still_hold(cli, tmp_path, slack):
    """Spec §5.9: a standing approval answers only the ask; a switch, ``denied before`` and the loop rule decide
    as without it."""
    first = run(cli, tmp_path, LATE)
    a1 = first["pending_approvals"][0]["id"]
    assert cli("approvals", "approve", a1).returncode == 0  # a plain approval first: no rule yet

    # denied before: the person denies an ask the rule (made meanwhile) would answer; the model's repeat is refused
    model = write_script(tmp_path / "deny.json", calls(call(READ_TOOL, channel="general")), calls(call(SEND, **LATE)),
                         calls(call(SEND, **LATE)), text(DONE))
    pending = json.loads(cli("run", "--json", "--model", model, TASK).stdout)
    [b1] = pending["pending_approvals"]
    rule = cli.json("rules", "add", a1, "--json")
    denied = json.loads(cli("approvals", "deny", b1["id"], "--json").stdout)
    assert denied["status"] == "done", denied
    assert [o for t, o in outcomes(cli, denied["turn"]) if t == SEND] == ["asked", "denied", "denied before"]
    assert cli.json("rules", "show", rule["id"], "--json")["uses"] == 0

    # the loop rule: the third identical write ends the tool use though the rule answered the first two
    model = write_script(tmp_path / "loop.json", calls(call(READ_TOOL, channel="general")),
                         *[calls(call(SEND, **LATE)) for _ in range(3)], text(DONE), text("never"))
    looped = json.loads(cli("run", "--json", "--model", model, TASK).stdout)
    assert looped["status"] == "budget" and "budgets.repeat_calls" in looped["budget"], looped
    assert [o for t, o in outcomes(cli, looped["turn"]) if t == SEND] == [
        "approved by rule", "approved; ok", "approved by rule", "approved; ok", "not run: loop stopped"]

    # a switch: the tool switched off is refused, whatever answers its asks
    assert cli("tools", "disable", SEND).returncode == 0
    off = run(cli, tmp_path, LATE, name="off.json")
    assert off["status"] == "done" and not off["pending_approvals"], off
    [refused] = [r for r in cli.json("audit", "--json", "--turn", off["turn"]) if r["tool"] == SEND]
    assert (refused["verdict"], refused["outcome"]) == ("off", "refused"), refused
    assert cli.json("rules", "show", rule["id"], "--json")["uses"] == 2


def test_it_expires_after_the_settings_days_and_then_asks_again(cli, home, tmp_path, slack):
    """Spec §5.9: 30 days by default (``approvals.standing_days``), ``--days`` for one; past its expiry it is
    marked expired (audited) and the same call asks again."""
    from datetime import datetime, timedelta

    def lives(rule: dict) -> timedelta:
        return datetime.fromisoformat(rule["expires_at"]) - datetime.fromisoformat(rule["created_at"])

    approve_always(cli, run(cli, tmp_path, LATE)["pending_approvals"][0]["id"])
    [rule] = cli.json("rules", "list", "--json")
    assert lives(rule) == timedelta(days=30)
    (home / "palui.toml").write_text("[approvals]\nstanding_days = 2\n")
    second = run(cli, tmp_path, {**LATE, "recipient": "Alice"}, name="alice.json")
    approve_always(cli, second["pending_approvals"][0]["id"])
    assert lives(cli.json("rules", "list", "--json")[0]) == timedelta(days=2)
    third = run(cli, tmp_path, {**LATE, "recipient": "Carol"}, name="carol.json")
    a = third["pending_approvals"][0]["id"]
    assert cli("approvals", "approve", a).returncode == 0
    assert lives(cli.json("rules", "add", a, "--days", "5", "--json")) == timedelta(days=5)
    assert run(cli, tmp_path, LATE, name="used.json")["status"] == "done"  # answered by the first

    con = sqlite3.connect(home / "palui.db", timeout=30, isolation_level=None)  # 30 days later, for the first
    con.execute("UPDATE standing_approvals SET expires_at = ? WHERE id = ?", (time.time() - 1, rule["id"]))
    con.close()
    again = run(cli, tmp_path, LATE, name="again.json")
    assert again["status"] == "awaiting_approval", again
    expired = cli.json("rules", "show", rule["id"], "--json")
    assert (expired["status"], expired["uses"]) == ("expired", 1), expired
    assert ("rule", "rule expired") in [(r["verdict"], r["outcome"]) for r in cli.json("audit", "--json")]
