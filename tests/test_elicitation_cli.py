"""A server's question through the command line and across restarts (spec §7.8).

- ``palui run`` without a service asks on its own terminal (a pseudo-terminal here), both eras, and
  declines when there is no terminal.
- ``palui chat`` (the live chat) shows a question of either era with how to answer; ``/answer`` and
  ``/deny`` go through the door; leaving keeps a paused turn's question pending.
- A restart of the service while a 2026-07-28 question waits: the answer given after the restart
  (``palui elicitations answer`` through the new service) resumes the call with the stored request
  state; a server that no longer accepts the state ends the call "could not resume: ask again".
- An older-era question lives inside the open call: when the process ends (kill -9), the call is
  "interrupted; it may have run" and the question is cancelled.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.live_service import LiveService, wait_for
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.mcp_in_process
SUPPORT = Path(__file__).resolve().parent / "support"
STATE_KEY = "22" * 32


def add(cli, name: str, server: str, *args: str) -> str:
    r = cli("connectors", "add", name, "--", sys.executable, str(SUPPORT / server), *args)
    assert r.returncode == 0, r.stderr
    cid = f"mcp-{name}"
    tools = cli.json("tools", "list", "--connector", cid, "--json")
    assert cli("tools", "enable", *[t["name"] for t in tools]).returncode == 0
    assert cli("connectors", "trust", cid).returncode == 0
    return cid


class Terminal:
    """``palui ARGS`` with a pseudo-terminal as stdin; stderr (where questions are asked) read line by line."""

    def __init__(self, home: Path, *args: str) -> None:
        self.master, slave = pty.openpty()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        env["PALUI_HOME"] = str(home)
        self.proc = subprocess.Popen([sys.executable, "-m", "palui", *args], stdin=slave, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True)
        os.close(slave)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def expect(self, fragment: str, timeout: float = 30.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"no {fragment!r} on the terminal after {timeout} s; saw: {''.join(self.seen)[-2000:]}")

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout)
        os.close(self.master)
        return self.proc.returncode, out


def _quietly(fn, *args, **kw) -> None:
    try:
        fn(*args, **kw)
    except Exception:  # the service is killed while the request waits: expected
        pass


def book(term: Terminal, party: str) -> None:
    term.expect("In the server's words:")
    term.expect("Answer it? [Y/n, c = cancel]")
    term.type("y")
    term.expect("confirm>")
    term.type("yes")
    term.expect("party_size>")
    term.type("twelve")  # not a number: asked again
    term.expect("must be a whole number")
    term.type(party)
    term.expect("seating>")
    term.type("")  # the default
    term.expect("note>")
    term.type("")


@pytest.mark.slow
@pytest.mark.parametrize("server", ["elicit_new.py", "elicit_old.py"])
def test_palui_run_asks_on_its_own_terminal(cli, home, tmp_path, server):
    cid = add(cli, "books", server)
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("Booked."))
    term = Terminal(home, "run", "--json", "--model", model, "book a table")
    book(term, "4")
    code, out = term.finish()
    r = json.loads(out)
    assert code == 0 and r["status"] == "done", r
    [ev] = [e for e in r["events"] if e["type"] == "tool_call"]
    assert ev["result"] == ('book_table(Friday): accept {"confirm": true, "note": null, "party_size": 4, '
                            '"seating": "inside"}')
    [q] = cli.json("elicitations", "list", "--all", "--json")
    assert (q["status"], q["answered_via"]) == ("accepted", "cli")


@pytest.mark.parametrize("server", ["elicit_new.py", "elicit_old.py"])
def test_palui_run_without_a_terminal_declines(cli, tmp_path, server):
    cid = add(cli, "books", server)
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("No table."))
    r = cli("run", "--json", "--model", model, "book a table", input="")
    out = json.loads(r.stdout)
    assert out["status"] == "done", out
    assert [e["result"] for e in out["events"] if e["type"] == "tool_call"] == ["book_table(Friday): decline"]
    assert "declined: no terminal to ask on" in r.stderr
    audit = [x for x in cli.json("audit", "--json") if x["outcome"].startswith("elicitation")]
    assert [x["outcome"] for x in audit] == ["elicitation decline"]


@pytest.mark.slow
@pytest.mark.parametrize("server", ["elicit_new.py", "elicit_old.py"])
def test_palui_chat_shows_the_question_and_answer_works(cli, home, tmp_path, server):
    """The live chat (docs/decisions/0125-questions-in-the-live-chat.md) shows a question once, in the server's
    words, with how to answer; input stays live; ``/answer`` with a value that does not fit is refused by field name
    and asked again, a fitting one goes through the door (``answered_via`` cli) and the turn goes on."""
    from support.chatdrive import PipedChat

    cid = add(cli, "books", server)
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("Booked."))
    with PipedChat(home, "--model", model, process=True) as chat:  # commands run here meanwhile
        chat.wait_for("/help for commands.", 60)
        chat.send("book a table")
        chat.wait_for("In the server's words:", 60)
        chat.wait_for("answer with /answer e-", 10)
        [q] = cli.json("elicitations", "list", "--json")
        assert chat.output().count(f"Question {q['id']} from MCP server {cid}") == 1
        chat.send("/status")  # input is live while the question waits
        chat.wait_for("questions from MCP servers waiting: 1", 30)
        chat.send(f"/answer {q['id']} confirm=yes party_size=twelve")
        chat.wait_for("party_size", 30)
        assert cli.json("elicitations", "show", q["id"], "--json")["status"] == "pending"
        chat.send(f"/answer {q['id']} confirm=yes party_size=4")
        chat.wait_for("Booked.", 60)
    [q] = cli.json("elicitations", "list", "--all", "--json")
    assert (q["status"], q["answered_via"]) == ("accepted", "cli")
    done = [x for x in cli.json("audit", "--json") if x["tool"] == f"{cid}__book_table" and x["outcome"] == "ok"]
    assert len(done) == 1, done


@pytest.mark.slow
def test_palui_chat_deny_declines_a_question(cli, home, tmp_path):
    from support.chatdrive import PipedChat

    cid = add(cli, "books", "elicit_new.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("No table."))
    with PipedChat(home, "--model", model, process=True) as chat:  # commands run here meanwhile
        chat.wait_for("/help for commands.", 60)
        chat.send("book a table")
        chat.wait_for("answer with /answer e-", 60)
        [q] = cli.json("elicitations", "list", "--json")
        chat.send(f"/deny {q['id']}")
        chat.wait_for("No table.", 60)
    [q] = cli.json("elicitations", "list", "--all", "--json")
    assert (q["status"], q["answered_via"]) == ("declined", "cli")
    calls_ = [e for e in cli.json("audit", "--json") if e["outcome"].startswith("elicitation")]
    assert [e["outcome"] for e in calls_] == ["elicitation decline"]


@pytest.mark.slow
def test_palui_chat_leaves_while_a_paused_turns_question_waits(cli, home, tmp_path):
    from support.chatdrive import PipedChat

    cid = add(cli, "books", "elicit_new.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Friday")), text("Booked."))
    with PipedChat(home, "--model", model, process=True) as chat:  # commands run here meanwhile
        chat.wait_for("/help for commands.", 60)
        chat.send("book a table")
        chat.wait_for("answer with /answer e-", 60)
        [q] = cli.json("elicitations", "list", "--json")
        assert chat.close() == 0  # end of input: the chat leaves, the question stays
        assert f"[question {q['id']} stays pending: palui elicitations answer {q['id']}" in chat.output()
    assert cli.json("elicitations", "show", q["id"], "--json")["status"] == "pending"
    r = cli("elicitations", "answer", q["id"], "confirm=yes", "party_size=3", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "Booked."


@pytest.mark.slow
@pytest.mark.parametrize("key", [True, False], ids=["state-kept", "state-refused"])
def test_restart_while_a_2026_question_waits(cli, home, tmp_path, key):
    cid = add(cli, "books", "elicit_new.py", *(("--state-key", STATE_KEY) if key else ()))
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Saturday")), text("Booked."))
    with LiveService(home) as svc:
        tid = svc.post("/api/turns", {"message": "book", "model": model})["turn"]
        t = svc.wait_turn(tid, ("awaiting_approval",))
        [q] = t["pending_elicitations"]
    # The service is gone, and with it the stdio server (a new one starts with the next service).
    assert cli.json("elicitations", "show", q["id"], "--json")["status"] == "pending"
    with LiveService(home) as svc:
        r = cli("elicitations", "answer", q["id"], "confirm=yes", "party_size=2", "--json")  # through the service
        assert r.returncode == 0, r.stderr
        t = svc.wait_turn(tid, ("done", "error"))
    [ev] = [e for e in t["events"] if e["type"] == "tool_call"]
    if key:
        assert ev["result"] == ('book_table(Saturday): accept {"confirm": true, "note": null, "party_size": 2, '
                                '"seating": "inside"}')
    else:
        assert ev["is_error"] and "could not resume" in ev["result"] and "ask again" in ev["result"]


@pytest.mark.slow
def test_an_older_era_question_ends_with_its_process(cli, home, tmp_path):
    cid = add(cli, "books", "elicit_old.py")
    model = write_script(tmp_path / "s.json", calls(call(f"{cid}__book_table", date="Sunday")), text("ok"))
    svc = LiveService(home, process=True).start()  # killed with SIGKILL
    try:
        # The request waits for the turn, which waits inside the call: send it from a thread.
        threading.Thread(target=lambda: _quietly(svc.http.post, "/api/turns", json={"message": "book", "model": model}),
                         daemon=True).start()
        [q] = wait_for(lambda: svc.get("/api/elicitations"), what="the question")
        tid = q["turn"]
    finally:
        svc.stop(signal.SIGKILL)
    with LiveService(home) as svc:
        t = svc.wait_turn(tid, ("done", "error"), timeout=30)
        [q] = svc.get("/api/elicitations", all="1")
    [ev] = [e for e in t["events"] if e["type"] == "tool_call"]
    assert "interrupted" in ev["result"] and "may have run" in ev["result"]
    assert q["status"] == "cancelled"
    assert any(a["outcome"] == "cancelled; may have run" for a in cli.json("audit", "--json"))
