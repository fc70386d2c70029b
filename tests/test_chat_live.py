"""The terminal chat stays live while a turn runs (spec §8.2; docs/decisions/0111-a-live-terminal.md),
checked twice: in a real terminal driven by tmux (send-keys / capture-pane) and with piped standard input.

- ``/stop`` during a 30 s tool call ends the turn in under 2 s;
- ``/status`` during a turn answers at once;
- an approval answered from another process ends the prompt and the answer appears;
- a streamed answer arrives in more than one piece;
- the service killed under the chat leaves it usable (the turn it ran goes on here).

Each test has its own PALUI_HOME; timings are measured from the keystroke to what the chat shows.
"""

from __future__ import annotations

import functools
import re
import signal
import sqlite3
import subprocess
import time

import httpx
import pytest

from support import inprocess
from support.chatdrive import PipedChat, TmuxChat, chat_env
from support.httpserver import PageServer
from support.live_service import LiveService, wait_for
from support.scripts import call, calls, write_script

pytestmark = pytest.mark.slow
# The piped chat is a child here: these tests run commands and services beside it, and read when output came.
DRIVERS = {"tmux": TmuxChat, "piped": functools.partial(PipedChat, process=True)}
BANNER = "/help for commands."


@pytest.fixture(params=["tmux", "piped"])
def driver(request):
    """The chat class for this run: a terminal (tmux) or piped standard input."""
    return DRIVERS[request.param]


def rows(home, sql: str, params: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(home / "palui.db", timeout=30)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def running_turn(home) -> str | None:
    r = rows(home, "SELECT id FROM turns WHERE status = 'running'")
    return r[0][0] if r else None


def approval_id(chat) -> str:
    m = re.search(r"approve (a-[0-9a-f]+)\? \[y/n\]", chat.output())
    assert m, chat.output()
    return m.group(1)


def palui(home, *args: str) -> subprocess.CompletedProcess:
    return inprocess.run(args, env=chat_env(home))


def test_stop_during_a_slow_tool_call_ends_the_turn_while_the_call_runs(driver, home, tmp_path):
    with PageServer({}, slow_seconds=600) as pages:
        (home / "palui.toml").write_text("[web]\nallow_private = true\ntimeout_seconds = 60\n")
        model = write_script(tmp_path / "s.json", calls(call("web__fetch_page", url=pages.url + "/slow")),
                             {"text": "This never shows."})
        with driver(home, "--model", model) as chat:
            chat.wait_for(BANNER, 60)
            chat.send("fetch the slow page")
            wait_for(lambda: "/slow" in pages.hits, 30, what="the 30 s call to start")
            if isinstance(chat, TmuxChat):
                chat.wait_for("calling web__fetch_page", 10)  # the status line says what the turn does
            mark = chat.mark()
            chat.send("/stop")
            chat.wait_for("[turn stopped]", 60, after=mark)
            assert pages.answered == []  # stopped while the page still loaded (it takes ten minutes)
            assert "This never shows." not in chat.output()
            assert "stopped while it ran; it may have run" in chat.output()
    [(outcome,)] = rows(home, "SELECT outcome FROM audit WHERE tool = 'web__fetch_page'")
    assert outcome == "cancelled; may have run"
    assert rows(home, "SELECT status FROM turns") == [("stopped",)]


def test_status_during_a_turn_answers_at_once(driver, home, tmp_path):
    model = write_script(tmp_path / "s.json", {"text": "The late answer.", "delay_seconds": 600})
    with driver(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("think for a long time")
        wait_for(lambda: running_turn(home), 30, what="the turn to run")
        if isinstance(chat, TmuxChat):
            chat.wait_for("thinking", 10)
        mark = chat.mark()
        chat.send("/status")
        chat.wait_for("tokens today:", 60, after=mark)
        assert running_turn(home)  # answered while the turn still runs (its model step takes ten minutes)
        assert "runs in the last hour: 1 of 60" in chat.output()
        assert "The late answer." not in chat.output()  # the turn still runs
        assert running_turn(home)
        chat.send("/stop")
        chat.wait_for("[turn stopped]", 10)


@pytest.mark.parametrize("where", ["cli", "service"])
def test_an_approval_answered_from_another_process_ends_the_prompt(driver, where, home, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)),
                         {"text": "Forgotten, as you allowed."})
    service = LiveService(home).start() if where == "service" else None
    try:
        with driver(home, "--model", model) as chat:
            chat.wait_for(BANNER, 60)
            if service:
                assert "turns run in the service at" in chat.output()
            chat.send("forget memory 1")
            chat.wait_for("? [y/n]", 30)
            aid = approval_id(chat)
            assert re.search(r"expires \d\d:\d\d, in (29|30) min", chat.output()), chat.output()
            if isinstance(chat, TmuxChat):
                assert f"approve {aid}? [y/n]" in chat.screen()
            mark = chat.mark()
            if service:  # the JSON API, the web page's door
                r = httpx.post(f"{service.url}/api/approvals/{aid}/approve", json={},
                               headers={"Authorization": f"Bearer {service.token}"}, timeout=30)
                assert r.status_code == 200, r.text
                words = "the JSON API (api)"
            else:  # another terminal, without a service: that process resumes the turn
                r = palui(home, "approvals", "approve", aid)
                assert r.returncode == 0, r.stderr
                words = "the command line (cli)"
            chat.wait_for(f"[approval {aid} was approved on {words}: the turn goes on]", 30, after=mark)
            chat.wait_for("Forgotten, as you allowed.", 30, after=mark)
            if isinstance(chat, TmuxChat):
                wait_for(lambda: "[y/n]" not in chat.screen(), 10, what="the prompt to end")
                assert "you>" in chat.screen()
            chat.send("/status")
            chat.wait_for("pending approvals: 0", 15, after=mark)
    finally:
        if service:
            service.stop()
    assert rows(home, "SELECT status, answered_via FROM approvals") == [("approved", "api" if service else "cli")]


def test_a_streamed_answer_arrives_in_more_than_one_piece(driver, home, tmp_path):
    words = "one two three four five six seven"
    model = write_script(tmp_path / "s.json", {"text": words, "stream_delay_seconds": 0.4})
    with driver(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("count")
        partial = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = chat.screen() if isinstance(chat, TmuxChat) else chat.output()
            if "one two" in shown and "seven" not in shown:
                partial.append(shown)
            if words in shown:
                break
            time.sleep(0.05)
        assert words in chat.output()
        assert partial, "the answer never showed in part: it came in one piece"
        if isinstance(chat, PipedChat):
            times = {w: next(t for t, _ in chat.arrivals if w in "".join(c for tt, c in chat.arrivals if tt <= t))
                     for w in ("one", "seven")}
            assert times["seven"] - times["one"] > 1.0  # six pauses of 0.4 s between the words


def test_the_service_killed_under_the_chat_leaves_it_usable(driver, home, tmp_path):
    model = write_script(tmp_path / "s.json", {"text": "A slow answer, finished.", "delay_seconds": 3})
    service = LiveService(home, process=True).start()  # killed with SIGKILL
    try:
        with driver(home, "--model", model) as chat:
            chat.wait_for(BANNER, 60)
            assert "turns run in the service at" in chat.output()
            chat.send("first")
            chat.wait_for("A slow answer, finished.", 30)
            chat.send("second")  # runs in the service; the service dies under it
            turn = wait_for(lambda: running_turn(home), 30, what="the second turn to run in the service")
            [(owner,)] = rows(home, "SELECT owner FROM turns WHERE id = ?", (turn,))
            assert owner.endswith(f":{service.proc.pid}")
            service.stop(signal.SIGKILL)
            chat.wait_for("went away: turns run in this process from now on", 15)
            chat.wait_for(f"[your message was stored as turn {turn}: it goes on here]", 15)
            wait_for(lambda: chat.output().count("A slow answer, finished.") == 2, 30,
                     what="the second turn's answer, taken up here")
            mark = chat.mark()
            chat.send("/status")
            chat.wait_for("turns run in: this process", 15, after=mark)
            chat.send("third")
            wait_for(lambda: chat.output().count("A slow answer, finished.") == 3, 30, what="a turn run here")
    finally:
        service.stop()
    statuses = rows(home, "SELECT input, status FROM turns ORDER BY rowid")
    assert statuses == [("first", "done"), ("second", "done"), ("third", "done")]
