"""The durable outbox and a Telegram channel that recovers (spec §8.3), end to end: a real ``palui serve``
against the fake Bot API (tests/support/fake_telegram.py), killed with SIGKILL by pid where a case says so.

(An approval asked in an outage that survives a kill -9, and a new token that keeps the pairing, are the
conformance suite's, tests/test_channel_conformance.py, for every channel.)
Shown here: an approval answered in the terminal meanwhile arrives as its outcome,
never as a fresh ask; what a ``palui jobs run`` without a service writes goes out at the next ``palui
serve``; a long answer whose second part fails is not sent from its first part again; a rejected token
(401) is retried, says what to do and recovers by itself;
``channels list`` says ``not running`` without a service; a delivery failure clears on the next success;
wrong pairing codes are told once; ``/status`` names the pending approvals and ``/approvals`` sends them
again; an approved call cut by a crash reads "approved → interrupted, may have run".
"""

from __future__ import annotations

import json
import signal

import pytest

from support.fake_telegram import FakeTelegram, button_data
from support.live_service import wait_for
from support.telegram_rig import PERSON, STRANGER, TelegramRig, visible

pytestmark = pytest.mark.slow

FORGET = {"tool_calls": [{"tool": "recall__forget_memory", "args": {"id": 1}}]}


@pytest.fixture
def rig(telegram_rig) -> TelegramRig:
    return telegram_rig(pair=True)


@pytest.fixture
def killable(telegram_rig) -> TelegramRig:
    """The rig with the service in a child process, which the test kills with SIGKILL."""
    return telegram_rig(pair=True, process=True)


def _failing(rig: TelegramRig) -> bool:
    """The outbox tried a delivery and it failed (the failure is recorded for /status)."""
    return bool(rig.svc.rows("SELECT last_failure FROM channels WHERE name = 'telegram'")[0][0])


def _asks_for(fake: FakeTelegram, aid: str, after: int = 0) -> list:
    """Messages that carry the buttons of approval ``aid``."""
    return [c for c in fake.sent_messages(PERSON) if c.index >= after and any(
        d.startswith(f"ap:{aid}:") for d in button_data(c))]


def test_an_approval_answered_elsewhere_in_the_outage_arrives_as_its_outcome(killable: TelegramRig):
    rig = killable
    fake = rig.fake
    rig.set_script(FORGET, {"text": "forgotten"})
    fake.stop()
    r = rig.svc.post("/api/turns", {"message": "forget memory 1"})
    aid = r["pending_approvals"][0]["id"]
    wait_for(lambda: _failing(rig), 20, what="the delivery to fail while Telegram is down")
    rig.svc.stop(signal.SIGKILL)
    approved = rig.cli("approvals", "approve", aid)  # no service runs: answered (and resumed) in this process
    assert approved.returncode == 0, approved.stderr
    mark = fake.mark()
    fake.start()
    rig.start()
    outcome = rig.reply_after(mark, lambda c: aid in visible(c), timeout=30)
    assert visible(outcome) == f"Approval {aid} (recall__forget_memory): approved in the terminal."
    assert not button_data(outcome)
    wait_for(lambda: rig.svc.count("channel_outbox", "state = 'pending'") == 0, 15, what="the outbox to empty")
    assert not _asks_for(fake, aid), "an answered approval was sent as a fresh ask"


def test_what_a_run_without_a_service_tells_goes_out_at_the_next_serve(rig: TelegramRig):
    fake = rig.fake
    assert rig.cli("jobs", "add", "ping", "--cron", "0 8 * * *", "--prompt", "ping").returncode == 0
    rig.set_script({"text": "pong, written while nobody served"})
    rig.svc.stop()
    r = rig.cli("jobs", "run", "ping")
    assert r.returncode == 0 and "pong, written while nobody served" in r.stdout
    mark = fake.mark()
    rig.start()
    job = rig.reply_after(mark, lambda c: "nobody served" in visible(c), timeout=30)
    assert visible(job).startswith("Job result (turn t-")


def test_a_long_answer_failing_after_its_first_part_is_not_sent_from_the_first_part_again(rig: TelegramRig):
    fake = rig.fake
    long = "\n".join(f"{i:03d} " + "y" * 95 for i in range(60))  # 6,000 characters: two messages
    rig.set_script({"text": long})
    fake.fail_next("sendMessage", 502, "Bad Gateway", times=4, after=1)  # part 1 goes, part 2 fails 4 times
    up = rig.say("a long one please")
    second = rig.reply_after(up, lambda c: visible(c).startswith("040 ") or "\n040 " in visible(c), timeout=40)
    failed = [c for c in fake.calls[up.calls_mark:] if c.method == "sendMessage" and c.status == 502]
    assert len(failed) == 4
    parts = [c for c in fake.sent_messages(PERSON) if c.index > up.calls_mark and c.index <= second.index]
    assert len(parts) == 2, [visible(c)[:8] for c in parts]  # part 1 once, then part 2
    assert visible(parts[0]) + visible(parts[1]) == long


def test_a_rejected_token_is_retried_says_what_to_do_and_recovers(rig: TelegramRig):
    fake = rig.fake
    fake.fail_next("getUpdates", 401, "Unauthorized", times=4)
    state = wait_for(lambda: (lambda s: s if "token was rejected" in s else None)(rig.state()), 20,
                     what="the rejected token in the state")
    assert "palui channels test telegram" in state and "--token-file FILE, which keeps the pairing" in state
    wait_for(lambda: rig.state() == "connected", 30, what="polling to come back by itself")
    rig.set_script({"text": "still here"})
    up = rig.say("are you there?")
    rig.reply_after(up, lambda c: visible(c) == "still here", timeout=20)


def test_channels_list_says_not_running_when_the_service_is_dead(killable: TelegramRig):
    rig = killable
    listed = json.loads(rig.cli("channels", "list", "--json").stdout)[0]
    assert listed["state"] == "connected" and listed["running"] is True
    rig.svc.stop(signal.SIGKILL)
    r = rig.cli("channels", "list")
    assert r.returncode == 0
    row = r.stdout.splitlines()[-1]
    assert "not running (last: connected, " in row
    listed = json.loads(rig.cli("channels", "list", "--json").stdout)[0]
    assert listed["state"] == "not running" and listed["last_state"] == "connected" and not listed["running"]
    assert listed["state_at"]


def test_a_delivery_failure_clears_on_the_next_success(rig: TelegramRig):
    fake = rig.fake
    fake.fail_next("sendMessage", 400, "Bad Request: message is too long")  # refused for good: given up
    up = rig.say("/help")
    fake.wait_for(lambda c: c.method == "sendMessage" and c.status == 400, 10, after=up)
    wait_for(lambda: "last delivery failure: reply" in rig.cli("status").stdout, 15, what="the failure in /status")
    rig.set_script({"text": "fine now"})
    up = rig.say("and now?")
    rig.reply_after(up, lambda c: visible(c) == "fine now")
    wait_for(lambda: "last delivery failure" not in rig.cli("status").stdout, 15, what="the failure to clear")
    assert json.loads(rig.cli("channels", "list", "--json").stdout)[0]["last_failure"] is None


def test_wrong_pairing_codes_are_logged_and_told_once(rig: TelegramRig):
    fake = rig.fake
    r = rig.cli("channels", "pair", "telegram")
    code = r.stdout.split("pairing code: ")[1].split()[0]
    fake.user(333, first_name="Oscar", username="oscar")
    for user in (STRANGER, STRANGER, STRANGER, 333, 333):
        rig.processed(rig.say("/pair ZZZZZZZZ", user=user, chat=user))
    told = [m["text"] for m in rig.svc.get("/api/inbox") if "wrong pairing codes" in m["text"]]
    assert told == ["Telegram: 5 wrong pairing codes (3 from 222, 2 from 333): the code is void, make a new one "
                    "(palui channels pair telegram)."]
    # The person (still paired) hears it on the channel too; the strangers hear nothing.
    said = rig.reply_after(0, lambda c: "wrong pairing codes" in visible(c))
    assert said.params["chat_id"] == PERSON
    assert not [c for c in fake.sent_messages() if c.params["chat_id"] in (STRANGER, 333)]
    log = (rig.home / "logs" / "palui.log").read_text(errors="replace")
    assert log.count("a wrong pairing code from 222") == 3 and log.count("a wrong pairing code from 333") == 2
    # The void code pairs nobody, and no more notice comes.
    rig.processed(rig.say(f"/pair {code}", user=333, chat=333))
    assert len([m for m in rig.svc.get("/api/inbox") if "wrong pairing codes" in m["text"]]) == 1


def test_status_names_the_pending_approvals_and_approvals_sends_them_again(rig: TelegramRig):
    fake = rig.fake
    rig.set_script(FORGET, {"text": "forgotten"})
    up = rig.say("forget memory 1")
    first = rig.reply_after(up, lambda c: bool(button_data(c)))
    aid = button_data(first)[0].split(":")[1]
    up = rig.say("/status")
    status = visible(rig.reply_after(up, lambda c: "pending approvals" in visible(c)))
    assert "pending approvals: 1\n" in status
    assert f"  {aid}: recall__forget_memory, expires " in status
    assert "(/approvals sends them again with their buttons)" in status
    up = rig.say("/approvals")
    again = rig.reply_after(up, lambda c: bool(button_data(c)))
    assert button_data(again) == button_data(first) and again.result["message_id"] != first.result["message_id"]
    press = fake.push_callback(PERSON, again.result["message_id"], button_data(again)[0])
    ans = fake.wait_for(lambda c: c.method == "answerCallbackQuery", 10, after=press)
    assert ans.params["text"].startswith(f"Approved {aid}")
    rig.reply_after(press, lambda c: "forgotten" in visible(c))
    up = rig.say("/approvals")
    # (the day's audit head notice may arrive in between: it is a message of its own)
    assert visible(rig.reply_after(up, lambda c: "approval" in visible(c).lower()
                                   and "Audit head" not in visible(c))) == "No approval is pending."


def test_an_approved_call_cut_by_a_crash_reads_approved_interrupted_may_have_run(telegram_rig, fake):
    from support.httpserver import PageServer

    with PageServer({}, slow_seconds=30) as pages:
        rig = telegram_rig(toml="[web]\nallow_private = true\n", pair=True, process=True)  # killed with SIGKILL
        assert rig.cli("tools", "set-class", "web__fetch_page", "destructive").returncode == 0
        rig.set_script({"tool_calls": [{"tool": "web__fetch_page", "args": {"url": f"{pages.url}/slow"}}]},
                       {"text": "it went"})
        up = rig.say("fetch the slow page")
        ask = rig.reply_after(up, lambda c: bool(button_data(c)))
        press = fake.push_callback(PERSON, ask.result["message_id"], button_data(ask)[0])
        wait_for(lambda: any(h.startswith("/slow") for h in pages.hits), 15, what="the approved call to start")
        rig.svc.stop(signal.SIGKILL)  # the call is in flight
        rig.start()
        said = rig.reply_after(press, lambda c: "it went" in visible(c), timeout=30)
        assert visible(said).startswith("· web__fetch_page: ask → approved → interrupted, may have run")
        assert len([h for h in pages.hits if h.startswith("/slow")]) == 1  # never sent twice
