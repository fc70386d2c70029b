"""Make the upgrade fixture: a PALUI_HOME written by an older Palui, with two turns paused mid-way.

``tests/test_upgrade.py`` copies the fixture, opens it with today's code and answers what waits.
The committed fixture ``tests/fixtures/home-v31/`` was made by commit dd00543 (schema migration 31)
from a clone of that commit with its own virtual environment::

    git clone --no-local . /tmp/old && git -C /tmp/old checkout dd00543
    (cd /tmp/old && python3 -m venv .venv && .venv/bin/pip install -e '.[test]')
    /tmp/old/.venv/bin/python tests/support/make_upgrade_home.py tests/fixtures/home-v31

Run it with the Python of the checkout whose Palui should write the home: every step is that
Python's ``-m palui`` in a subprocess, through the command line and the JSON API only, so the file
is exactly what that Palui writes. The output directory must not exist. It gets ``fixture.json``
(the commit, the schema version, what is paused) and ``home/``: ``palui.toml``, ``palui.db`` (made
by ``palui backup``: one checkpointed file, no ``-wal``/``-shm``), ``audit_head`` and
``bin/books-mcp``.

What the home holds, in the order it is made:

1. A webhook and one signed delivery, summarised by ``palui serve`` (a webhook turn, the inbox).
2. A finished chat turn that saved two memories and a task (``palui run``).
3. A job, run once (``palui jobs run``): a finished job turn.
4. A chat turn in the same conversation paused on an approval (``palui run``): its model response
   calls the destructive ``recall__forget_memory`` (asks) and then ``tasks__create_task`` (held
   behind the ask, spec §4).
5. A chat turn paused on an MCP server's question (``palui chat``, left while the question waits):
   ``mcp-books__book_table`` asks the 2026-07-28 way (a stored question and a sealed request state,
   spec §7).
6. The audit chain of every call, verified (``palui audit verify``).

Portability, so the fixture works from any checkout and any PALUI_HOME:

- The model is ``@upgrade``, a ``[models.upgrade]`` table (OpenAI wire) whose ``base_url`` in
  ``palui.toml`` is a placeholder (port 9, nothing listens); the run that uses the home sets
  ``PALUI_MODELS__UPGRADE__BASE_URL`` to its fake provider (``support/fake_llm.py``). A turn stores
  its model string, and a ``script:`` path is stored absolute: it would point into this run's
  temporary directory.
- The MCP server is the bare command ``books-mcp`` (``support/books_mcp.py`` copied into
  ``home/bin``), looked up on ``PATH`` at each start: the run that uses the home puts ``<home>/bin``
  and a Python with the ``mcp`` SDK first on ``PATH``.
- Approvals and questions expire 10^10 seconds after they were asked (``[approvals]`` in
  ``palui.toml``), the server's request state as long, and ``retention.days`` is 36500: the
  paused turns can be answered whenever the test runs.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import hmac
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_llm import FakeLLM, Reply  # noqa: E402  (this folder, whichever directory runs the script)

SUPPORT = Path(__file__).resolve().parent
MODEL_NAME = "upgrade"
BASE_URL_VARIABLE = f"PALUI_MODELS__{MODEL_NAME.upper()}__BASE_URL"
PLACEHOLDER_BASE_URL = "http://127.0.0.1:9/v1"  # the discard port: a home run without the variable reaches nothing
EXPIRY_SECONDS = 10_000_000_000  # about 300 years
RETENTION_DAYS = 36_500

PALUI_TOML = f"""\
# The upgrade fixture's settings (tests/support/make_upgrade_home.py).
model = "@{MODEL_NAME}"

[models.{MODEL_NAME}]
model = "openai:gpt-upgrade"
# A placeholder: the run that uses this home sets {BASE_URL_VARIABLE} to its fake provider.
base_url = "{PLACEHOLDER_BASE_URL}"

# Far in the future, so the paused turns can be answered whenever the upgrade test runs.
[approvals]
chat_expiry_seconds = {EXPIRY_SECONDS}
job_expiry_seconds = {EXPIRY_SECONDS}

[retention]
days = {RETENTION_DAYS}
"""


def path_for(home: Path, python: str) -> str:
    """``PATH`` for a Palui process over ``home``: its ``bin/`` (the MCP server), then ``python``'s folder."""
    return os.pathsep.join([str(home / "bin"), str(Path(python).parent), os.environ.get("PATH", "")])


class Maker:
    """Runs ``python -m palui`` over one home with the fake provider's URL and the server on ``PATH``."""

    def __init__(self, home: Path, python: str, fake: FakeLLM) -> None:
        self.home, self.python, self.fake = home, python, fake
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        self.env.update({"PALUI_HOME": str(home), BASE_URL_VARIABLE: fake.openai_url,
                         "PATH": path_for(home, python), "PALUI_TICK_SECONDS": "0.2"})

    def palui(self, *args: str) -> str:
        """``palui ARGS``'s standard output; a non-zero exit ends the script."""
        r = subprocess.run([self.python, "-m", "palui", *args], env=self.env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=300)
        if r.returncode != 0:
            raise SystemExit(f"palui {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.palui(*args))

    def replies(self, *replies: Reply) -> None:
        assert not self.fake.replies, f"replies left from the previous step: {self.fake.replies}"
        self.fake.replies.extend(replies)

    def settled(self) -> None:
        assert not self.fake.replies, f"the fake provider was asked fewer times than scripted: {self.fake.replies}"


def calls(*pairs: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=list(pairs))


# -- the steps ---------------------------------------------------------------------------------------


def webhook_delivery(m: Maker) -> None:
    """A webhook and one delivery signed over the body (GitHub style), summarised by ``palui serve``."""
    out = m.palui("webhooks", "add", "github")
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    hook_path = "/hooks/" + fields["url"].rsplit("/hooks/", 1)[1]
    m.replies(Reply(text="A push to main: two commits."))
    proc = subprocess.Popen([m.python, "-m", "palui", "serve", "--port", "0"], env=m.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        info = wait(lambda: _serve_info(m.home, proc), "serve.json")
        token = (m.home / "access_token").read_text().strip()
        base = f"http://127.0.0.1:{info['port']}"
        body = json.dumps({"ref": "refs/heads/main", "commits": [{"message": "fix"}, {"message": "docs"}]}).encode()
        signature = "sha256=" + hmac.new(fields["secret"].encode(), body, hashlib.sha256).hexdigest()
        http(base + hook_path, body, {"X-Palui-Signature": signature, "Content-Type": "application/json"})
        # The summary turn runs in the service; it is done once the fake provider answered and the
        # turn is stored done.
        wait(lambda: _webhook_turn_done(base, token), "the webhook turn")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    m.settled()


def _serve_info(home: Path, proc: subprocess.Popen) -> dict | None:
    if proc.poll() is not None:
        raise SystemExit(f"palui serve exited {proc.returncode}")
    try:
        info = json.loads((home / "serve.json").read_text())
    except (OSError, ValueError):
        return None
    return info if info.get("pid") == proc.pid else None


def _webhook_turn_done(base: str, token: str) -> bool:
    convs = http(base + "/api/conversations", None, {"Authorization": f"Bearer {token}"})
    hooks = [c for c in convs if c.get("origin") == "webhook"]
    if not hooks:
        return False
    conv = http(f"{base}/api/conversations/{hooks[0]['id']}", None, {"Authorization": f"Bearer {token}"})
    return bool(conv["turns"]) and all(t["status"] == "done" for t in conv["turns"])


def finished_turn(m: Maker) -> str:
    """A chat turn that saved two memories and a task, done. Returns its conversation."""
    m.replies(calls(("recall__add_memory", {"text": "buys milk on Fridays"}),
                    ("recall__add_memory", {"text": "locker code 4711"}),
                    ("tasks__create_task", {"title": "water the plants"})),
              Reply(text="Saved two memories and a task."))
    r = m.json("run", "Remember I buy milk on Fridays and my locker code is 4711; add watering the plants.", "--json")
    assert r["status"] == "done", r
    m.settled()
    return r["conversation"]


def job_run(m: Maker) -> None:
    """A job, run once in-process: a finished job turn and its inbox message."""
    m.palui("jobs", "add", "morning", "--cron", "0 8 * * *", "--prompt", "What is on my list today?")
    m.replies(calls(("tasks__list_tasks", {})), Reply(text="One task: water the plants."))
    r = m.json("jobs", "run", "morning", "--json")
    assert r["status"] == "done", r
    m.settled()


def paused_on_approval(m: Maker, conversation: str) -> dict[str, Any]:
    """A chat turn (the same conversation) paused on forgetting a memory, a write held behind it."""
    [locker] = [x for x in m.json("memories", "list", "--json") if x["text"] == "locker code 4711"]
    m.replies(calls(("recall__forget_memory", {"id": locker["id"]}),
                    ("tasks__create_task", {"title": "get a new locker code"})))
    r = m.json("run", "Forget my locker code and remind me to get a new one.", "--conversation", conversation,
               "--json")
    assert r["status"] == "awaiting_approval", r
    m.settled()
    [approval] = m.json("approvals", "list", "--json")
    return {"turn": r["turn"], "approval": approval["id"], "memory": locker["id"]}


def paused_on_question(m: Maker) -> dict[str, Any]:
    """A chat turn paused on the server's question: ``palui chat`` left while the question waited."""
    m.palui("connectors", "add", "books", "--", "books-mcp")
    m.palui("tools", "enable", "mcp-books__book_table")
    m.replies(calls(("mcp-books__book_table", {"date": "Friday"})))
    chat = subprocess.Popen([m.python, "-m", "palui", "chat"], env=m.env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    threading.Thread(target=lambda: seen.extend(iter(lambda: chat.stdout.read(1), "")), daemon=True).start()
    try:
        wait(lambda: "/help for commands." in "".join(seen), "the chat", timeout=120)
        chat.stdin.write("Book a table for Friday.\n")
        chat.stdin.flush()
        wait(lambda: "answer with /answer e-" in "".join(seen), "the question", timeout=120)
        chat.stdin.close()  # the chat leaves; the question stays pending
        if chat.wait(120) != 0:
            raise SystemExit("palui chat failed:\n" + "".join(seen))
    finally:
        if chat.poll() is None:
            chat.kill()
    m.settled()
    [question] = m.json("elicitations", "list", "--json")
    assert question["status"] == "pending", question
    return {"turn": question["turn"], "question": question["id"]}


# -- helpers -----------------------------------------------------------------------------------------


def wait(pred, what: str, timeout: float = 60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def http(url: str, body: bytes | None, headers: dict[str, str]) -> Any:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def palui_commit(python: str) -> str:
    """The commit of the checkout ``python`` imports Palui from (``unknown`` outside a git checkout)."""
    src = subprocess.run([python, "-c", "import palui, pathlib; print(pathlib.Path(palui.__file__).parent)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    r = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def make(out: Path, python: str) -> dict[str, Any]:
    """Build the fixture into ``out`` (which must not exist). Returns what ``fixture.json`` holds."""
    with tempfile.TemporaryDirectory(prefix="palui-upgrade-") as tmp:
        home = Path(tmp) / "home"
        (home / "bin").mkdir(parents=True)
        (home / "palui.toml").write_text(PALUI_TOML, encoding="utf-8")
        shutil.copy(SUPPORT / "books_mcp.py", home / "bin" / "books-mcp")
        (home / "bin" / "books-mcp").chmod(0o755)
        with FakeLLM() as fake:
            m = Maker(home, python, fake)
            webhook_delivery(m)
            conversation = finished_turn(m)
            job_run(m)
            approval = paused_on_approval(m, conversation)
            question = paused_on_question(m)
            m.palui("audit", "verify")
            out.mkdir(parents=True)
            (out / "home" / "bin").mkdir(parents=True)
            m.palui("backup", str(out / "home" / "palui.db"))
        for name in ("palui.toml", "audit_head", "bin/books-mcp"):
            shutil.copy2(home / name, out / "home" / name)
    # immutable: read without creating -wal/-shm files beside the fixture's database
    con = sqlite3.connect(f"file:{out / 'home' / 'palui.db'}?immutable=1", uri=True)
    try:
        schema = con.execute("SELECT MAX(number) FROM schema_migrations").fetchone()[0]
    finally:
        con.close()
    meta = {"palui_commit": palui_commit(python), "schema": schema,
            "made": datetime.date.today().isoformat(), "approval": approval, "question": question}
    (out / "fixture.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, help="the fixture directory to create, e.g. tests/fixtures/home-v31")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python whose Palui writes the home (default: the one running this script)")
    ns = parser.parse_args(argv)
    if ns.out.exists():
        parser.error(f"{ns.out} exists: the fixture is made into a new directory")
    print(json.dumps(make(ns.out, ns.python), indent=2))


if __name__ == "__main__":
    main()
