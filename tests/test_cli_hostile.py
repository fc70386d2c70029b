"""No traceback reaches a terminal from any CLI command given hostile input: each invocation below (huge and
negative numbers, control and bidi characters, 100,000-character names, devices, pipes, directories and missing
files where a file is named, a ``PALUI_HOME`` Palui cannot use, settings out of range or of the wrong shape, bad
tokens) ends with a one-line refusal: exit code 1 or 2, no ``Traceback`` on stderr, and no raw control or bidi
character printed back. Each runs ``python -m palui`` in a subprocess, as a person at a terminal would."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HUGE = "9" * 25
LONG = "x" * 100_000
HOSTILE = "a\x1b[2J\u202eb\x07c"  # an erase-screen escape, a bidi override and a bell


@dataclass(frozen=True)
class Case:
    """One invocation: ``args`` for ``palui``, ``env`` added to the test's, ``input`` on standard input and
    ``toml`` written as ``palui.toml`` first. ``{tmp}`` in an argument is the test's scratch directory."""

    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    input: str | None = None
    toml: str | None = None

    def __str__(self) -> str:
        return " ".join(a if len(a) < 40 else f"{a[:20]}…({len(a)})" for a in (*self.args, *self.env))


def case(*args: str, env: dict[str, str] | None = None, input: str | None = None, toml: str | None = None) -> Case:
    return Case(args, env or {}, input, toml)


CASES = [
    # A PALUI_HOME Palui cannot use: a file, a directory of /proc, under /proc or a device.
    case("status", env={"PALUI_HOME": "/etc/passwd"}),
    case("tools", "list", env={"PALUI_HOME": "/etc/passwd"}),
    case("run", "hi", env={"PALUI_HOME": "/etc/passwd"}),
    case("status", env={"PALUI_HOME": "/proc/1"}),
    case("status", env={"PALUI_HOME": "/proc/1/new"}),
    case("status", env={"PALUI_HOME": "/dev/null/palui"}),
    # A script: model that is a device, a directory, a pipe, missing, too big, not JSON, or nested too deep.
    case("run", "hi", "--model", "script:/dev/zero"),
    case("run", "hi", "--model", "script:/dev/urandom"),
    case("run", "hi", "--model", "script:/tmp"),
    case("run", "hi", "--model", "script:{tmp}/fifo"),
    case("run", "hi", "--model", "script:{tmp}/missing.json"),
    case("run", "hi", "--model", "script:{tmp}/big.json"),
    case("run", "hi", "--model", "script:{tmp}/binary.json"),
    case("run", "hi", "--model", "script:{tmp}/deep.json"),
    case("run", "hi", "--model", f"script:{HOSTILE}"),
    case("run", "hi", "--model", "script:" + LONG),
    case("run", "hi", "--model", HOSTILE),
    case("run", "hi", "--model", LONG),
    # Settings out of range, of the wrong type, or a section as JSON in one variable.
    case("status", env={"PALUI_BUDGETS_STEPS": "99999999999999999999999999"}),
    case("status", env={"PALUI_APPROVALS_CHAT_EXPIRY_SECONDS": "99999999999999999999999"}),
    case("status", env={"PALUI_CAPS_DAILY_TOKENS": "-5"}),
    case("status", env={"PALUI_CAPS_DAILY_TOKENS": "nan"}),
    case("status", env={"PALUI_LIMITS_MESSAGE_CHARS": "1e400"}),
    case("status", env={"PALUI_CAPS": '{"daily_tokens":5}'}),
    case("status", env={"PALUI_BUDGETS": "[" * 100_000}),
    case("status", toml="[approvals]\nchat_expiry_seconds = 99999999999999999999999\n"),
    case("status", toml="[budgets]\nsteps = -1\n"),
    case("status", toml=f"[caps]\ndaily_tokens = {'9' * 5000}\n"),
    case("status", toml="x = " + "[" * 100_000),
    case("status", toml=f"[limits]\nmessage_chars = \"{HOSTILE}\"\n"),
    case("tools", "list", toml="model = 5\n[gateway]\nwait_seconds = 1e999\n"),
    # Numbers out of range on the command line.
    case("inbox", "--limit", HUGE),
    case("inbox", "--limit", "-1"),
    case("audit", "list", "--limit", "-5"),
    case("conversations", "list", "--limit", HUGE),
    case("jobs", "add", "j", "--cron", "@daily", "--prompt", "hi", "--token-cap", "-3"),
    case("prune", "--before", "99999-01-01"),
    # 100,000-character and hostile names and ids.
    case("policy", "explain", LONG),
    case("policy", "explain", HOSTILE),
    case("tools", "show", LONG),
    case("tools", "enable", LONG),
    case("tools", "set-class", LONG, "read"),
    case("connectors", "disable", LONG),
    case("connectors", "show", HOSTILE),
    case("approvals", "approve", LONG),
    case("approvals", "deny", HOSTILE),
    case("approvals", "show", "a-../../x"),
    case("jobs", "run", LONG),
    case("jobs", "remove", HOSTILE),
    case("conversations", "show", LONG),
    case("memories", "forget", HOSTILE),
    case("stop", "--turn", LONG),
    case("stop", "--turn", HOSTILE),
    case("channels", "remove", LONG),
    case("gateway", "clients", "add", LONG),
    case("gateway", "clients", "add", HOSTILE),
    case("gateway", "clients", "add", "ok", "--connectors", LONG),
    case("gateway", "clients", "add", "ok", "--connectors", HOSTILE),
    case("gateway", "clients", "show", LONG),
    case("gateway", "clients", "remove", HOSTILE),
    case("gateway", "--client", LONG),
    case("elicitations", "show", HOSTILE),
    case("run", "", "--model", "script:{tmp}/ok.json"),
    case("run", LONG + "x", "--model", "script:{tmp}/ok.json"),
    # Bad tokens and secret files.
    case("channels", "add", "telegram", "--token-file", "-", input="garbage\n"),
    case("channels", "add", "telegram", "--token-file", "-", input="123:\x1b[31mabcdefghijklmnopqrstuvwxyzabcd\n"),
    case("channels", "add", "telegram", "--token-file", "/dev/zero"),
    case("channels", "add", "telegram", "--token-file", "{tmp}/fifo"),
    case("channels", "add", "telegram", "--token-file", "{tmp}/missing"),
    case("channels", "add", "telegram", "--token-file", "/tmp"),
    case("channels", "add", "telegram", env={"PALUI_TELEGRAM_TOKEN": LONG}),
    case("channels", "add", "matrix", "--homeserver", "http://127.0.0.1:9", "--user", "not a user",
         "--password-file", "-", input="pw\n"),
    case("channels", "add", "matrix", "--homeserver", HOSTILE, "--user", "@p:example.org"),
    # Files the person names: devices, pipes, directories, binary and nested JSON.
    case("connectors", "import", "/dev/zero"),
    case("connectors", "import", "{tmp}/fifo"),
    case("connectors", "import", "{tmp}/deep.json"),
    case("connectors", "import", "{tmp}/binary.json"),
    case("connectors", "import", "{tmp}/missing.json"),
    case("policy", "check", "/dev/zero"),
    case("policy", "check", "{tmp}/deep.json"),
    case("backup", "/dev/null"),
    case("backup", "{tmp}/no-such-dir/" + HOSTILE),
]


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """The files the cases name: a pipe nobody writes, a 2 MB JSON file, bytes that are not UTF-8, JSON
    nested 100,000 deep, and a script that answers ``ok``."""
    d = tmp_path / "files"
    d.mkdir()
    os.mkfifo(d / "fifo")
    (d / "big.json").write_text('{"steps": [{"text": "' + "x" * 2_000_000 + '"}]}')
    (d / "binary.json").write_bytes(b"\xff\xfe\x00\x80" * 1000)
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "ok.json").write_text('{"steps": [{"text": "ok"}]}')
    return d


@pytest.mark.parametrize("c", CASES, ids=[f"{i:02d}" for i in range(len(CASES))])
def test_no_traceback_reaches_the_terminal(cli, home, scratch, c):
    if c.toml is not None:
        (home / "palui.toml").write_text(c.toml)
    args = [a.replace("{tmp}", str(scratch)) for a in c.args]
    r = cli(*args, env=c.env, input=c.input if c.input is not None else "", timeout=60)
    assert r.returncode in (1, 2), (str(c), r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, (str(c), r.stderr[-3000:])
    out = r.stdout + r.stderr
    assert not any(ch in out for ch in "\x1b\u202e\x07"), (str(c), repr(out[-500:]))
    assert len(r.stderr) < 2_000, (str(c), len(r.stderr), r.stderr[:300])  # a name is echoed cut, not whole


def test_a_palui_home_that_is_a_file_or_unwritable_is_one_clear_line(cli):
    for home, why in (("/etc/passwd", "it exists and is not a directory"), ("/proc/1", "cannot write palui.db")):
        r = cli("status", env={"PALUI_HOME": home})
        assert r.returncode == 1, r.stderr
        assert r.stderr.strip().count("\n") == 0, r.stderr
        assert f"PALUI_HOME={home} is not a directory Palui can use: {why}" in r.stderr, r.stderr


def test_a_script_model_must_be_a_regular_file_under_a_megabyte(cli, scratch):
    r = cli("run", "hi", "--model", "script:/dev/zero")
    assert r.returncode == 1 and "script /dev/zero: not a regular file (a device)" in r.stderr, r.stderr
    r = cli("run", "hi", "--model", f"script:{scratch}/big.json")
    assert r.returncode == 1 and "big.json: larger than 1,000,000 bytes" in r.stderr, r.stderr


def test_policy_explain_echoes_a_long_name_cut_with_its_length_and_escaped(cli):
    r = cli("policy", "explain", LONG)
    assert r.returncode == 1, r.stderr
    assert "(100,000 characters)" in r.stderr and "x" * 1_000 not in r.stderr, r.stderr[:300]
    r = cli("policy", "explain", HOSTILE)
    assert "a\\u001b[2J\\u202eb\\u0007c" in r.stderr, repr(r.stderr)


def test_an_id_too_long_for_a_request_line_is_not_found_before_any_request():
    # with the service running, an id goes into a URL path: 120,000 characters once ended in httpx.InvalidURL's
    # traceback, 20,000 in the server's "request line is over 8,192 bytes"
    from palui.cli.client import segment
    from palui.errors import NotFound

    for n in (600, 20_000, 120_000):
        with pytest.raises(NotFound) as e:
            segment("x" * n, "an approval id (see: palui approvals list)")
        assert f"({n:,} characters) is not an approval id" in str(e.value) and "x" * 600 not in str(e.value)
    assert segment("a-" + "f" * 32, "an approval id") == "a-" + "f" * 32


@pytest.mark.parametrize("args", [("elicitations", "show"), ("elicitations", "answer"), ("webhooks", "remove")])
def test_an_unknown_long_id_is_echoed_cut_with_its_length(cli, args):
    r = cli(*args, LONG)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "(100,000 characters)" in r.stderr and len(r.stderr) < 400, r.stderr[:400]
