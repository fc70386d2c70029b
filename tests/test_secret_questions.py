"""A server's form that asks for a secret (spec §7.8): refused unless the person allowed it, then typed
hidden and never stored, logged or put in a conversation.

With our SDK-built servers (``sign_up`` asks for ``username`` and ``password``; its result gives the
password's length and the start of its SHA-256, never the password), both protocol eras:

- by default the question is refused without asking, the person is told naming the server, and the
  server hears ``decline``;
- allowed (``palui connectors allow-secret-questions``): ``palui run`` asks on its own terminal, in a
  real terminal (tmux), and the password typed never shows on the screen; ``palui elicitations answer``
  refuses a password on its command line and takes it from standard input; the web page shows a
  password box and its answer reaches the server; a chat channel's answer is refused;
- after each, the password is nowhere in the home (database, logs, files) nor in what the CLI printed.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from support.chatdrive import chat_env, tmux_path
from support.live_service import LiveService, wait_for
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.mcp_in_process
SUPPORT = Path(__file__).resolve().parent / "support"
ERAS = ["elicit_old.py", "elicit_new.py"]


def add(cli, server: str, allow: bool) -> str:
    r = cli("connectors", "add", "accounts", "--", sys.executable, str(SUPPORT / server))
    assert r.returncode == 0, r.stderr
    assert cli("tools", "enable", "mcp-accounts__sign_up").returncode == 0
    if allow:
        r = cli("connectors", "allow-secret-questions", "mcp-accounts")
        assert r.returncode == 0 and "asked with hidden input" in r.stdout, r.stderr
    return "mcp-accounts"


def signed_up(username: str, password: str) -> str:
    return (f"sign_up: accept {username}, a password of {len(password)} characters, sha256 "
            f"{hashlib.sha256(password.encode()).hexdigest()[:12]}")


def nowhere(home: Path, secret: str, *printed: str) -> None:
    """``secret`` is in no file of the home (the database and its journal included) and was never printed."""
    for p in home.rglob("*"):
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), f"the secret is in {p}"
    for out in printed:
        assert secret not in out


def tool_result(r: dict) -> str:
    [ev] = [e for e in r["events"] if e["type"] == "tool_call"]
    return ev["result"]


@pytest.mark.parametrize("server", ERAS)
def test_refused_by_default_and_the_person_is_told(cli, home, tmp_path, server):
    add(cli, server, allow=False)
    model = write_script(tmp_path / "s.json", calls(call("mcp-accounts__sign_up")), text("No account."))
    r = cli("run", "--json", "--model", model, "make me an account", input="")
    out = json.loads(r.stdout)
    assert tool_result(out) == "sign_up: decline"
    [q] = [e for e in out["events"] if e["type"] == "elicitation"]
    assert q["reason"] == "asked for a password: refused; use the server's own sign-in"
    told = [m["text"] for m in cli.json("inbox", "--json") if "asked for a password" in m["text"]]
    assert told == ["accounts (mcp-accounts) asked for a password: refused; use the server's own sign-in. To answer "
                    "such questions from it with hidden input: palui connectors allow-secret-questions mcp-accounts"]
    assert "no terminal to ask on" not in r.stderr  # refused before anyone could be asked
    assert cli.json("connectors", "show", "mcp-accounts", "--json")["secret_questions"] is False


class TmuxRun:
    """``palui ARGS`` in a real terminal (a tmux session on its own server socket), its output kept in a file."""

    def __init__(self, home: Path, *args: str) -> None:
        self.tmux = tmux_path()
        self.socket = f"palui-test-{uuid.uuid4().hex[:8]}"
        self.out = home.parent / f"run-{self.socket}.json"
        command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "palui", *args])
        script = f"{command} > {shlex.quote(str(self.out))}; echo \"[exit $?]\"; sleep 600"
        env = chat_env(home)
        env.pop("TMUX", None)
        subprocess.run([self.tmux, "-L", self.socket, "new-session", "-d", "-s", "run", "-x", "160", "-y", "50",
                        "sh", "-c", script], env=env, check=True)

    def screen(self) -> str:
        return subprocess.run([self.tmux, "-L", self.socket, "capture-pane", "-t", "run", "-p", "-J", "-S", "-"],
                              capture_output=True, text=True).stdout

    def wait_for(self, fragment: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while fragment not in self.screen():
            if time.monotonic() > end:
                raise AssertionError(f"no {fragment!r} on the terminal; it shows:\n{self.screen()[-3000:]}")
            time.sleep(0.1)

    def type(self, line: str) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "send-keys", "-t", "run", "-l", line], check=True)
        subprocess.run([self.tmux, "-L", self.socket, "send-keys", "-t", "run", "Enter"], check=True)

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize("server", ERAS)
def test_typed_hidden_on_the_terminal(cli, home, tmp_path, server):
    add(cli, server, allow=True)
    model = write_script(tmp_path / "s.json", calls(call("mcp-accounts__sign_up")), text("Account made."))
    password = "Tr0ub4dor-horse-" + uuid.uuid4().hex[:8]
    term = TmuxRun(home, "run", "--json", "--model", model, "make me an account")
    try:
        term.wait_for("Answer it? [Y/n, c = cancel]")
        assert "[secret: a password, typed hidden]" in term.screen()
        term.type("y")
        term.wait_for("username>")
        term.type("bob")
        term.wait_for("nothing shows as you type")
        term.type(password)
        term.wait_for("[exit 0]")
        shown = term.screen()
    finally:
        term.close()
    out = json.loads(term.out.read_text())
    assert tool_result(out) == signed_up("bob", password)  # the server got it
    assert password not in shown  # never echoed
    nowhere(home, password, json.dumps(out))


def answer_through_the_service(home: Path, model: str, server: str) -> tuple[LiveService, str, threading.Thread | None]:
    """A live service runs the turn; returns it, the question's id and (older era) the thread waiting for the turn."""
    svc = LiveService(home).start()
    waiter = None
    if server == "elicit_old.py":  # the request waits for the turn, which waits inside the call

        def post() -> None:
            try:
                svc.http.post("/api/turns", json={"message": "account", "model": model})  # type: ignore[union-attr]
            except Exception:  # the service may stop first: the test reads the turn itself
                pass

        waiter = threading.Thread(target=post, daemon=True)
        waiter.start()
    else:
        svc.post("/api/turns", {"message": "account", "model": model})
    [q] = wait_for(lambda: svc.get("/api/elicitations"), what="the question")
    return svc, q["id"], waiter


@pytest.mark.slow
@pytest.mark.parametrize("server", ERAS)
def test_the_command_line_takes_it_from_stdin_never_from_an_argument(cli, home, tmp_path, server):
    add(cli, server, allow=True)
    model = write_script(tmp_path / "s.json", calls(call("mcp-accounts__sign_up")), text("Account made."))
    password = "correct-horse-" + uuid.uuid4().hex[:8]
    svc, qid, _ = answer_through_the_service(home, model, server)
    try:
        r = cli("elicitations", "answer", qid, "username=bob", f"password={password}")
        assert r.returncode != 0 and "never taken from the command line" in r.stderr
        assert cli.json("elicitations", "show", qid, "--json")["status"] == "pending"
        # A chat app's answer is refused by the door: the chat's history would keep the value.
        from palui.errors import UsageError
        from support.inprocess import service

        here = service()
        try:
            with pytest.raises(UsageError, match="not answered in a chat"):
                here.elicitations.answer(qid, "accept", {"username": "bob", "password": password}, via="telegram")
        finally:
            here.db.close()
        r = cli("elicitations", "answer", qid, "username=bob", "--json", input=password + "\n")
        assert r.returncode == 0, r.stderr
        turn = cli.json("elicitations", "show", qid, "--json")["turn"]
        t = svc.wait_turn(turn, ("done", "error"))
    finally:
        svc.stop()
    assert tool_result(t) == signed_up("bob", password)
    nowhere(home, password, r.stdout, r.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("server", ERAS)
def test_the_web_page_shows_a_password_box(cli, home, tmp_path, server):
    add(cli, server, allow=True)
    model = write_script(tmp_path / "s.json", calls(call("mcp-accounts__sign_up")), text("Account made."))
    password = "battery-staple-" + uuid.uuid4().hex[:8]
    svc, qid, _ = answer_through_the_service(home, model, server)
    try:
        cookies = httpx.get(f"{svc.url}/login?token={svc.token}", follow_redirects=False).cookies
        page = httpx.Client(base_url=svc.url, cookies=cookies, timeout=60)
        card = page.get(f"/elicitations/{qid}/card").text
        assert '<input type="password" name="password" autocomplete="off"' in card
        assert '<input type="text" name="username"' in card
        assert "never stored by Palui" in card
        approvals = page.get("/approvals").text  # the approvals page lists it with the same box
        assert '<input type="password" name="password"' in approvals
        from palui.server.app import csrf_value

        r = page.post("/chat/command", json={"line": f"/answer {qid} username=bob password=decoy"},
                      headers={"X-Palui-CSRF": csrf_value(svc.token)})  # typed in the web chat: refused
        assert r.status_code == 400 and "password asks for a secret" in r.json()["error"], r.text
        assert svc.get(f"/api/elicitations/{qid}")["status"] == "pending"
        # What the page's script posts (answered_via "web"); the service holds the answer and sends it.
        svc.post(f"/api/elicitations/{qid}/answer", {"action": "accept", "via": "web", "wait": False,
                                                     "content": {"username": "bob", "password": password}})
        q = svc.get(f"/api/elicitations/{qid}")
        t = svc.wait_turn(q["turn"], ("done", "error"))
        chat = page.get(f"/chat/{q['conversation']}").text
    finally:
        svc.stop()
    assert tool_result(t) == signed_up("bob", password)
    nowhere(home, password, chat)


@pytest.mark.slow
@pytest.mark.parametrize("server", ERAS)
def test_typed_hidden_in_the_chat(cli, home, tmp_path, server):
    """``palui chat`` in a real terminal: ``/answer ID password=…`` is refused (the line would stay on the screen
    and in the input history); ``/answer ID username=bob`` asks for the password at a hidden prompt."""
    from support.chatdrive import TmuxChat

    add(cli, server, allow=True)
    model = write_script(tmp_path / "s.json", calls(call("mcp-accounts__sign_up")), text("Account made."))
    password = "hunter2-" + uuid.uuid4().hex[:8]
    with TmuxChat(home, "--model", model) as chat:
        chat.wait_for("/help for commands.", 60)
        chat.send("make me an account")
        chat.wait_for("it asks for a secret: answer on the web page, with /answer e-", 60)
        [q] = cli.json("elicitations", "list", "--json")
        chat.send(f"/answer {q['id']} username=bob password=decoy")
        chat.wait_for("asks for a secret: it is not typed on the /answer line", 30)
        assert cli.json("elicitations", "show", q["id"], "--json")["status"] == "pending"
        chat.send(f"/answer {q['id']} username=bob")
        chat.wait_for("password (hidden", 30)
        chat.send(password)
        chat.wait_for("Account made.", 60)
        shown = chat.output()
        chat.send("/quit")
    assert password not in shown
    [conv] = cli.json("conversations", "list", "--json")
    [ev] = [e for t in cli.json("conversations", "show", conv["id"], "--json")["turns"] for e in t["events"]
            if e["type"] == "tool_call"]
    assert ev["result"] == signed_up("bob", password)
    nowhere(home, password)
