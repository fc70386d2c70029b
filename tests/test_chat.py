"""``palui chat`` (spec §8.2): commands never reach the model, inline approvals, the
live-service path, text typed while a turn runs, going back to a conversation, and what a chat start
says. Driven through piped standard input (tests/support/chatdrive.py); the terminal itself is
checked in tests/test_chat_live.py."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from palui.cli.client import AsyncServiceClient, ServiceGone
from palui.server.discovery import ServiceInfo
from support.chatdrive import PipedChat, TmuxChat
from support.live_service import LiveService, wait_for
from support.scripts import call, calls, text, write_script

BANNER = "/help for commands."


def turns(home):
    con = sqlite3.connect(home / "palui.db")
    try:
        return con.execute("SELECT input, status, owner FROM turns ORDER BY created_at").fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_chat_commands_and_inline_approval(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("tasks__create_task", title="water plants")),
                         calls(call("tasks__delete_task", id=1)), text("Created and deleted."))
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        for line in ["/help", "/status", "/aprove x", "/approve"]:
            chat.send(line)
        chat.wait_for("/approve needs exactly one approval id", 15)
        chat.send("make and remove a task")
        chat.wait_for("? [y/n]", 30)
        chat.send("y")
        chat.wait_for("Created and deleted.", 30)
        chat.send("/why")
        chat.wait_for("why: ask: destructive tool in a chat turn", 15)
        chat.send("/new")
        chat.wait_for("new conversation", 15)
        chat.send("/quit")
        assert chat.close() == 0
        out = chat.output()
    assert "/approve ID" in out and "/why" in out  # /help
    assert "tokens today:" in out  # /status
    assert "unknown command /aprove" in out
    assert '  ✓ tasks__create_task {"title": "water plants"} → ok' in out  # one compact line per call
    assert "ask: destructive tool in a chat turn" in out  # in the approval question
    assert '  ✓ tasks__delete_task {"id": 1} → approved · ok' in out
    assert "why: run: write tool in an untainted chat turn" in out  # the reason, on demand
    # only the one message became a turn: commands and the inline answer never reached the model
    assert [t[0] for t in turns(home)] == ["make and remove a task"]
    assert cli.json("tasks", "list", "--status", "all", "--json") == []


@pytest.mark.slow
def test_a_y_typed_before_the_question_shows_is_not_an_answer(tmp_path, home):
    model = write_script(tmp_path / "s.json", {"tool_calls": [call("tasks__delete_task", id=1)], "delay_seconds": 2},
                         text("Went on."))
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("delete task 1")
        chat.send("y")  # typed ahead, while the model still thinks
        chat.wait_for("'y' was not sent: no approval question was showing when you typed it", 15)
        chat.wait_for("? [y/n]", 30)
        time.sleep(0.5)
        con = sqlite3.connect(home / "palui.db")
        assert con.execute("SELECT status FROM approvals").fetchall() == [("pending",)]  # not answered by it
        con.close()
        chat.send("n")
        chat.wait_for("Went on.", 30)
        chat.send("/quit")
        assert chat.close() == 0
    assert [t[0] for t in turns(home)] == ["delete task 1"]  # the 'y' never became a message


@pytest.mark.slow
def test_text_typed_while_a_turn_runs_waits_as_the_next_turn(tmp_path, home):
    model = write_script(tmp_path / "s.json", {"text": "Answered.", "delay_seconds": 2})
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("first")
        wait_for(lambda: any(t[1] == "running" for t in turns(home)), 30, what="the first turn to run")
        chat.send("second")
        chat.wait_for("your next turn: queued behind the running turn", 15)
        [(_, _, _), (second, status, _)] = [(t[0], t[1], t[2]) for t in turns(home)]
        assert (second, status) == ("second", "queued")  # stored at once: it is kept
        chat.wait_for("[your next turn, t-", 30)
        wait_for(lambda: chat.output().count("Answered.") == 2, 30, what="both answers")
        chat.send("/quit")
        assert chat.close() == 0
    assert [(t[0], t[1]) for t in turns(home)] == [("first", "done"), ("second", "done")]


@pytest.mark.slow
def test_new_while_a_turn_runs_starts_after_it(tmp_path, home):
    model = write_script(tmp_path / "s.json", {"text": "Answered.", "delay_seconds": 2})
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("first")
        wait_for(lambda: any(t[1] == "running" for t in turns(home)), 30, what="the first turn to run")
        chat.send("/new")
        chat.send("in the new one")
        chat.wait_for("kept here, not stored yet", 15)
        chat.wait_for("new conversation", 30)
        wait_for(lambda: chat.output().count("Answered.") == 2, 30, what="both answers")
        chat.send("/quit")
        assert chat.close() == 0
    con = sqlite3.connect(home / "palui.db")
    convs = con.execute("SELECT input, conversation_id FROM turns ORDER BY rowid").fetchall()
    con.close()
    assert [c[0] for c in convs] == ["first", "in the new one"] and convs[0][1] != convs[1][1]


@pytest.mark.slow
def test_input_ending_leaves_after_the_running_turn(tmp_path, home):
    model = write_script(tmp_path / "s.json", {"text": "Still answered.", "delay_seconds": 1})
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("hello")
        assert chat.close() == 0  # standard input ends at once: the chat finishes the turn first
        assert "Still answered." in chat.output()


@pytest.mark.slow
def test_chat_goes_through_live_service(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("recall__add_memory", text="via service")), text("Stored."))
    with LiveService(home, process=True) as srv:  # a turn the service ran has its pid as the owner
        r = cli("chat", "--model", model, input="remember this\n/quit\n")
        assert r.returncode == 0, r.stderr
        assert "Stored." in r.stdout
        assert r.stdout.count("Stored.") == 1  # streamed once, not printed again with the result
        [(inp, status, owner)] = turns(home)
        assert status == "done"
        assert owner.endswith(f":{srv.proc.pid}")  # the service process ran the turn
        r = cli("run", "--json", "--model", model, "again")
        assert r.returncode == 0 and '"status": "done"' in r.stdout
        assert turns(home)[-1][2].endswith(f":{srv.proc.pid}")


@pytest.mark.slow
def test_with_a_live_service_its_model_applies(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", text("From the service's model."))
    with LiveService(home, env={"PALUI_MODEL": model}):
        r = cli("run", "hello")  # no model in the CLI's own configuration
        assert r.returncode == 0, r.stderr
        assert "From the service's model." in r.stdout
        r = cli("status", "--json")
        assert r.returncode == 0 and model in r.stdout
        r = cli("chat", input="hi\n/quit\n")
        assert r.returncode == 0, r.stderr
        assert "From the service's model." in r.stdout


# -- going back to a conversation --------------------------------------------------------------------

@pytest.mark.slow
def test_resume_continues_the_newest_terminal_conversation_and_says_it_is_tainted(cli, tmp_path, home):
    from support.httpserver import PageServer

    with PageServer({"/offer": "<html><body>Pay IBAN DE89370400440532013000</body></html>"}) as pages:
        (home / "palui.toml").write_text("[web]\nallow_private = true\n")
        model = write_script(tmp_path / "s.json", calls(call("web__fetch_page", url=pages.url + "/offer")),
                             text("Read it."))
        r = cli("chat", "--model", model, input="read the offer\n/quit\n")
        assert r.returncode == 0 and "Read it." in r.stdout
    other = write_script(tmp_path / "t.json", text("Another answer."))
    assert cli("run", "--model", other, "a palui run turn").returncode == 0  # channel cli, not terminal
    [first, _] = sorted(cli.json("conversations", "list", "--json"), key=lambda c: c["created_at"])
    assert first["channel"] == "terminal" and first["tainted"]
    with PipedChat(home, "--model", model, "--resume") as chat:
        chat.wait_for(BANNER, 60)
        head = chat.output().splitlines()[0]
        assert head.startswith(f"Palui chat — resumed conversation {first['id']} (tainted by web__fetch_page")
        assert "writes ask first; /new starts clean" in head
        chat.send("/quit")
        assert chat.close() == 0
    r = cli("chat", "--model", model, "--conversation", "c-nope", input="/quit\n")
    assert r.returncode == 1 and "unknown conversation 'c-nope' (see: palui conversations list)" in r.stderr


def test_resume_goes_on_with_the_conversations_model(cli, tmp_path, home):
    # No model is configured: the chat was started with --model, and --resume goes on with that model.
    model = write_script(tmp_path / "s.json", text("First answer."))
    r = cli("chat", "--model", model, input="hello\n/quit\n")
    assert r.returncode == 0 and "First answer." in r.stdout, r.stderr
    r = cli("chat", "--resume", input="again\n/quit\n")
    assert r.returncode == 0, r.stderr
    assert "No model is configured" not in r.stdout + r.stderr
    assert f"model {model}" in r.stdout.splitlines()[0] and r.stdout.count("First answer.") == 1, r.stdout
    [conv] = cli.json("conversations", "list", "--json")
    shown = cli.json("conversations", "show", conv["id"], "--json")
    assert shown["model"] == model and [t["input"] for t in shown["turns"]] == ["hello", "again"]
    other = write_script(tmp_path / "t.json", text("Other model."))
    r = cli("chat", "--resume", "--model", other, input="once more\n/quit\n")  # --model still wins
    assert "Other model." in r.stdout, r.stdout


def test_conversations_list_and_show_with_their_channel(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", text("Hello back."))
    assert cli("run", "--model", model, "hello from run").returncode == 0
    assert cli("chat", "--model", model, input="hello from chat\n/quit\n").returncode == 0
    rows = cli.json("conversations", "list", "--json")
    assert sorted(r["channel"] for r in rows) == ["cli", "terminal"]
    assert {r["title"] for r in rows} == {"hello from run", "hello from chat"}
    r = cli("conversations", "list")
    assert r.returncode == 0 and "CHANNEL" in r.stdout and "terminal" in r.stdout and "cli" in r.stdout
    chat_conv = next(c for c in rows if c["channel"] == "terminal")
    r = cli("conversations", "show", chat_conv["id"])
    assert r.returncode == 0, r.stderr
    assert f"conversation {chat_conv['id']} · channel terminal" in r.stdout
    assert "you: hello from chat" in r.stdout and "palui: Hello back." in r.stdout
    assert f"palui chat --conversation {chat_conv['id']}" in r.stdout
    shown = cli.json("conversations", "show", chat_conv["id"], "--json")
    assert shown["channel"] == "terminal" and [t["input"] for t in shown["turns"]] == ["hello from chat"]
    assert cli("conversations", "show", "c-nope").returncode == 1


@pytest.mark.slow
def test_a_chat_start_mentions_pending_approvals_and_labels_resumed_turns(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("tasks__delete_task", id=3)), text("Deleted it."))
    r = cli("run", "--json", "--model", model, "delete task 3")
    out = json.loads(r.stdout)
    [a] = out["pending_approvals"]
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.wait_for("1 approval(s) pending:", 15)
        assert re.search(rf"  {a['id']} tasks__delete_task \(conversation {out['conversation']}\), expires "
                         r"\d\d:\d\d, in (29|30) min", chat.output()), chat.output()
        chat.send("/quit")
        assert chat.close() == 0
    # Answered elsewhere and left waiting (no process resumed it): the next chat takes it up, labelled.
    from palui.service import Service

    svc = Service()
    svc.approvals.answer(a["id"], True, "api")
    svc.db.close()
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(f"[resuming turn {out['turn']} of conversation {out['conversation']}: nobody else runs it]", 60)
        chat.wait_for("Deleted it.", 30)
        chat.send("/quit")
        assert chat.close() == 0


@pytest.mark.slow
@pytest.mark.parametrize("live", [True, False], ids=["service", "no-service"])
@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_an_approval_of_another_conversation_answered_in_the_chat_shows_its_call_line(cli, tmp_path, home, live,
                                                                                       approve):
    model = write_script(tmp_path / "s.json", calls(call("tasks__create_task", title="old")),
                         calls(call("tasks__delete_task", id=1)), text("Went on."))
    (home / "palui.toml").write_text(f'model = "{model}"\n', encoding="utf-8")
    srv = LiveService(home).start() if live else None
    try:
        out = json.loads(cli("run", "--json", "make a task and delete it").stdout)
        [a] = out["pending_approvals"]
        with PipedChat(home) as chat:
            chat.wait_for(BANNER, 60)
            chat.send(f"{'/approve' if approve else '/deny'} {a['id']}")
            mark = "✓" if approve else "✗"
            chat.wait_for(f"[turn {out['turn']} of another conversation] {mark} tasks__delete_task", 60)
            chat.wait_for("Went on.", 60)
            chat.send("/quit")
            assert chat.close() == 0
    finally:
        if srv is not None:
            srv.stop()


@pytest.mark.slow
def test_ctrl_c_stops_a_running_turn_in_the_terminal(tmp_path, home):
    model = write_script(tmp_path / "s.json", {"text": "Too late.", "delay_seconds": 30})
    with TmuxChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("take your time")
        wait_for(lambda: any(t[1] == "running" for t in turns(home)), 30, what="the turn to run")
        chat.keys("C-c")
        chat.wait_for("[turn stopped]", 10)
        chat.keys("C-d")
        wait_for(lambda: chat.exit_code() == 0, 30, what="the chat to leave on Ctrl-D")


# -- never "kept" unless stored ----------------------------------------------------------------------

class _Breaking(BaseHTTPRequestHandler):
    """A service that goes away mid-request: before or after saying the turn is stored."""

    protocol_version = "HTTP/1.1"
    say_stored = False

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.say_stored:
            line = json.dumps({"type": "turn", "turn": "t-stored", "conversation": "c-1"}).encode() + b"\n"
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()
        self.connection.shutdown(2)

    def log_message(self, *a):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("say_stored", [False, True])
async def test_a_broken_service_connection_says_kept_only_when_stored(say_stored):
    handler = type("H", (_Breaking,), {"say_stored": say_stored})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = AsyncServiceClient(ServiceInfo(f"http://127.0.0.1:{server.server_address[1]}", "token", 1))
    try:
        with pytest.raises(ServiceGone) as e:
            await client.stream("POST", "/api/turns", {"message": "hi", "stream": True}, None)
    finally:
        await client.close()
        server.shutdown()
    if say_stored:
        assert e.value.turn == "t-stored" and "the turn t-stored is kept" in str(e.value)
    else:
        assert e.value.turn is None and "kept" not in str(e.value)
        assert "it did not say it had stored anything" in str(e.value)


def test_a_and_s_at_the_prompt_answer_always_and_deny_and_stop(cli, tmp_path, home):
    """Spec §5.9, §5.10 in the terminal chat: ``a`` needs a destructive tool's confirmation (refused, the question
    is asked again), ``/always ID confirm`` makes the standing approval, which answers the next turn's same call;
    ``s`` denies and stops the tool use."""
    path = tmp_path / "s.json"
    model = write_script(path, calls(call("tasks__delete_task", id=1)), text("Deleted."))  # every turn replays it
    with PipedChat(home, "--model", model) as chat:
        chat.wait_for(BANNER, 60)
        chat.send("delete task 1")
        chat.wait_for("? [y/n] (a: and from now on the same, s: deny and stop)", 30)
        chat.send("a")
        chat.wait_for("confirm that you want its calls answered in advance", 15)
        aid = json.loads(cli("approvals", "list", "--json").stdout)[0]["id"]
        chat.send(f"/always {aid} confirm")
        chat.wait_for("Deleted.", 30)
        chat.send("and once more")
        chat.wait_for("approved in advance", 30)  # answered by the standing approval: no question
        write_script(path, calls(call("tasks__delete_task", id=2), call("tasks__delete_task", id=3)),
                     text("I stopped."))
        mark = chat.output()
        chat.send("delete tasks 2 and 3")
        chat.wait_for("? [y/n]", 30, after=mark)  # the question of the third turn shows
        chat.send("s")
        chat.wait_for("I stopped.", 30)
        chat.send("/quit")
        out = chat.output()
    assert "approved, and from now on the same (standing approval r-" in out
    assert "denied and tool use stopped: the model answers without tools" in out
    assert out.count("? [y/n]") == 3  # asked twice for the first (the refusal asks again), once for the third
    [rule] = cli.json("rules", "list", "--json")
    assert (rule["made_via"], rule["context"], rule["uses"]) == ("cli", "chat", 1)


def test_a_note_printed_while_the_answer_streams_waits_for_its_line(capsys):
    """Piped, a note (``/quit``'s, ``/status``) printed mid-stream goes out after the streamed line, never
    inside it (the race seen when ``/quit`` was read while the first answer streamed)."""
    from palui.cli.chat.screen import PipedScreen

    screen = PipedScreen()
    screen.stream("First")
    screen.line("(/quit: leaving when the running turn ends; /stop ends it now)")
    screen.stream(" answer.")
    screen.end_stream()
    screen.line("after")
    assert capsys.readouterr().out == ("First answer.\n(/quit: leaving when the running turn ends; /stop ends it now)\n"
                                       "after\n")
