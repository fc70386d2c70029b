"""Hostile and mistaken input at the command line (found by a trial of the CLI as a user and an attacker
would): a usage error exits 2 with a clear message, nothing is switched on, deleted or replaced by a
mistake, and what is printed back holds no raw control or bidi character."""

from __future__ import annotations

import pytest

HUGE = "9" * 25


def test_an_empty_connector_name_is_an_unknown_connector_not_every_connector(cli):
    before = cli.json("tools", "list", "--json")
    r = cli("tools", "enable-read", "")
    assert r.returncode == 1 and "unknown connector ''" in r.stderr, r.stderr
    assert cli.json("tools", "list", "--json") == before  # nothing switched on
    r = cli("tools", "list", "--connector", "")
    assert r.returncode == 1 and "unknown connector ''" in r.stderr


def test_a_backup_never_replaces_what_is_there(cli, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")  # dangling: it "does not exist", but the name is taken
    r = cli("backup", str(link))
    assert r.returncode == 1 and "exists already" in r.stderr, r.stderr
    assert link.is_symlink() and not link.exists()
    r = cli("backup", "")
    assert r.returncode == 2 and "needs a file name" in r.stderr
    out = tmp_path / "ok.db"
    assert cli("backup", str(out)).returncode == 0 and out.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]  # no temporary file left
    r = cli("backup", str(out))
    assert r.returncode == 1 and "exists already" in r.stderr


def test_prune_refuses_a_date_after_now_and_a_year_out_of_range(cli, svc):
    with svc.db.write() as c:  # an old inbox message: any past --before would delete it
        c.execute("INSERT INTO inbox (time, kind, text) VALUES (1000, 'notice', 'old')")
    n = len(svc.notifier.inbox())
    r = cli("prune", "--before", "9999-12-31")
    assert r.returncode == 2 and "more than two days after now" in r.stderr, r.stderr
    assert len(svc.notifier.inbox()) == n  # nothing was deleted
    for when in ("0001-01-01", "0000-01-01", "99999-01-01", "9999-12-31T23:59:59+14:00"):
        r = cli("prune", "--before", when)
        assert r.returncode in (0, 2) and "Traceback" not in r.stderr, (when, r.stderr)
    assert len(svc.notifier.inbox()) == n
    assert cli("prune", "--before", "2001-01-01").returncode == 0
    assert len(svc.notifier.inbox()) == n - 1  # a past date still prunes


@pytest.mark.parametrize("args", [
    ("audit", "--limit", HUGE), ("audit", "--limit", "-5"), ("audit", "--limit", "0"),
    ("conversations", "list", "--limit", HUGE), ("conversations", "list", "--limit", "-5"),
    ("inbox", "--limit", HUGE), ("inbox", "--limit", "-1"), ("memories", "list", "--limit", HUGE),
    ("memories", "forget", HUGE), ("tasks", "forget", HUGE),
    ("jobs", "add", "j", "--cron", "@daily", "--prompt", "hi", "--token-cap", HUGE),
])
def test_a_number_out_of_range_is_a_usage_error(cli, args):
    r = cli(*args)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "Invalid value" in r.stderr, r.stderr


def test_an_error_message_holding_hidden_characters_is_printed_escaped(cli, tmp_path):
    hostile = f"script:{tmp_path}/x\u202e.json"  # a bidi override: hidden, but not a control character
    r = cli("run", "hi", "--model", hostile)
    assert r.returncode != 0
    assert "\u202e" not in r.stderr, repr(r.stderr)
    assert "x\\u202e.json" in r.stderr, repr(r.stderr)
    r = cli("run", "hi", "--model", f"script:{tmp_path}/x\x1b[2J.json")  # a control character: refused at the option
    assert r.returncode == 2 and "\x1b" not in r.stderr, repr(r.stderr)
    assert "'--model': must not contain control characters (U+001B at character" in r.stderr, repr(r.stderr)
    r = cli("backup", str(tmp_path / "no-such-dir" / "a\u202eb.db"))
    assert r.returncode == 1 and "\u202e" not in r.stderr and "\\u202e" in r.stderr, repr(r.stderr)


def test_an_escaped_name_in_a_message_is_not_escaped_twice(cli):
    r = cli("tools", "show", "x\u202ey")
    assert r.returncode == 1 and "\u202e" not in r.stderr
    assert "\\\\u202e" not in r.stderr, repr(r.stderr)  # one backslash, as the service escaped it


def test_policy_explain_says_off_when_the_connector_is_disabled(cli, svc):
    assert cli.json("policy", "explain", "recall__search_memories", "--json")["verdict"] == "run"
    with svc.db.write() as c:  # as `palui connectors disable` does for an MCP server (built-ins stay on)
        c.execute("UPDATE connectors SET enabled = 0 WHERE id = 'recall'")
    d = cli.json("policy", "explain", "recall__search_memories", "--json")
    assert d["verdict"] == "off" and "connector recall is disabled" in d["reason"], d
    with svc.db.write() as c:
        c.execute("UPDATE connectors SET enabled = 1 WHERE id = 'recall'")
        c.execute("UPDATE tools SET present = 0 WHERE name = 'recall__search_memories'")
    d = svc.tools.explain("recall__search_memories")  # (a new process would list the built-in tool again)
    assert d["verdict"] == "unavailable" and "no longer lists it" in d["reason"], d


@pytest.mark.slow
def test_with_the_service_running_the_same_mistakes_give_the_same_exit_codes(home, cli, tmp_path):
    # The CLI sends turns and answers through a running service (spec §8); its usage errors come back as
    # HTTP 400 with "kind": "usage" and exit 2 as in-process, and a typed id is one path segment.
    from support.live_service import LiveService

    script = tmp_path / "s.json"
    script.write_text('{"steps": [{"text": "ok"}]}')
    mistakes = (("approvals", "approve", ""), ("run", "", "--model", f"script:{script}"))
    in_process = {args: cli(*args).returncode for args in mistakes}
    with LiveService(home):
        for args, code in in_process.items():
            r = cli(*args)
            assert r.returncode == code == 2, (args, r.returncode, r.stderr)
        r = cli("approvals", "approve", "../../turns/x/stop")  # one segment: no route, not POST /api/turns/x/stop
        # the id exactly as typed, looked up as an approval (spec §8.1)
        assert r.returncode == 1 and r.stderr.startswith("palui: unknown approval '../../turns/x/stop'"), r.stderr


# An option that gives, for one thing, what a configuration key gives for all takes that key's range from the
# settings model (spec §10.4): `--timeout inf` was accepted while `call_timeout_seconds = inf` refused to
# start, and then `GET /api/connectors` answered 500 and `connectors list --json` printed Infinity.
OPTIONS = [
    (("connectors", "add", "x", "--timeout", "inf", "--", "true"), "'--timeout': must be a finite number (got 'inf')"),
    (("connectors", "add", "x", "--timeout", "0", "--", "true"),
     "'--timeout': must be greater than 0 and at most 86,400 seconds (a day) (got '0')"),
    (("connectors", "add", "x", "--max-output", "99999999999999", "--", "true"),
     "'--max-output': must be greater than 0 and at most 104,857,600 bytes (100 MiB) (got '99999999999999')"),
    (("jobs", "add", "j", "--cron", "@daily", "--prompt", "hi", "--token-cap", "99999999999999"),
     "'--token-cap': must be greater than 0 and at most 1,000,000,000,000 tokens (got '99999999999999')"),
    (("jobs", "add", "j", "--cron", "@daily", "--prompt", "hi", "--tz", "Europe/Paris\x1b"),
     "'--tz': must not contain control characters (got 'Europe/Paris\\u001b')"),
    (("serve", "--host", "127.0.0.1\x01"), "'--host': must not contain control characters (got '127.0.0.1\\u0001')"),
    (("connectors", "add", "x", "--cwd", "/tmp/\x1b[2J", "--", "true"),
     "'--cwd': must not contain control characters (U+001B at character 6)"),
    (("connectors", "add", "x", "--", "true", "a\x1bb"),
     "argument 1 must not contain control characters (U+001B at character 2)"),
    (("connectors", "add", "x", "--url", "http://h/\x1b"),
     "'--url': must not contain control characters (U+001B at character 10)"),
]


@pytest.mark.parametrize("args,said", OPTIONS, ids=[f"{' '.join(a[:2])}-{i}" for i, (a, _s) in enumerate(OPTIONS)])
def test_an_option_that_gives_what_a_setting_gives_takes_its_rule(cli, args, said):
    r = cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "\x1b" not in r.stderr and "\x01" not in r.stderr
    assert cli.json("jobs", "list", "--json") == []  # nothing stored
    assert [c for c in cli.json("connectors", "list", "--json") if c["kind"] == "mcp"] == []


def test_a_stored_own_limit_outside_its_range_reads_as_the_setting(cli, svc):
    """A connector stored with `--timeout inf` before the option took the key's range lists as JSON (not
    `Infinity`) with the setting's timeout, and its start would use the setting (spec §10.4)."""
    import json

    public = {"transport": "stdio", "command": "true", "args": [], "cwd": None, "env_keys": [],
              "timeout_seconds": float("inf"), "max_output_bytes": 99999999999999}
    with svc.db.write() as c:  # the stored row is the subject: written as the old option stored it
        c.execute("INSERT INTO connectors (id, kind, name, transport, config_json, state, created_at)"
                  " VALUES ('mcp-old', 'mcp', 'old', 'stdio', ?, 'connected', 0)", (json.dumps(public),))
    r = cli("connectors", "list", "--json")
    assert r.returncode == 0 and "Infinity" not in r.stdout, r.stdout
    [old] = [c for c in json.loads(r.stdout) if c["id"] == "mcp-old"]
    assert (old["config"]["timeout_seconds"], old["config"]["max_output_bytes"]) == (30, 262_144)
