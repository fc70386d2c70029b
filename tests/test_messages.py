"""Messages that help (docs/decisions/0122-messages-reworded.md): every reworded refusal and hint, as the
person reads it.

Each test quotes the message (or the part that carries the fix: the key or the command) so a
rewording that loses the fix fails here.
"""

from __future__ import annotations

import json

import pytest

from palui.config import load_settings
from palui.errors import ConfigError
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.mcp_in_process


def env_for(home, **extra) -> dict[str, str]:
    return {"PALUI_HOME": str(home), **extra}


# -- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize("toml,words", [
    ('[caps]\ndaily_tokens = "lots"',
     "key 'caps.daily_tokens' has the wrong type: it must be a whole number, not the quoted string 'lots'; "
     "write it without quotes, e.g. daily_tokens = 1000000 under [caps]"),
    ('[serve]\nport = "8765"', "it must be a port number (1-65535), not the quoted string '8765'"),
    ('[budgets]\nseconds = "2"', "it must be a number, not the quoted string '2'"),
    ('[web]\nallow_private = "yes"', "it must be true or false, not the quoted string 'yes'; write it without "
                                     "quotes, e.g. allow_private = true under [web]"),
    ('notify = {apprise = "json://x"}', "key 'notify.apprise' has the wrong type: it must be a list of strings, "
                                        "not the quoted string;"),
])
def test_configuration_types_are_named_in_words(home, toml, words):
    (home / "palui.toml").write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home))
    assert words in str(e.value)
    assert "boolean, list or table" not in str(e.value)  # the old catch-all wording


def test_every_kind_of_value_is_named_in_words():
    from palui.config_rules import KIND_WORDS
    from palui.config_schema import KEYS

    assert {key.rule.kind for key in KEYS.values()} <= set(KIND_WORDS)


def test_the_wrong_type_of_a_secret_list_does_not_echo_it(home):
    (home / "palui.toml").write_text('[notify]\napprise = "tgram://SECRET-TOKEN/1"')
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home))
    assert "SECRET-TOKEN" not in str(e.value) and "a list of strings" in str(e.value)


@pytest.mark.parametrize("toml,words", [
    ('[notify]\napprise = ["not a url"]', "key 'notify.apprise': item 1 is not an apprise URL: expected SCHEME://…"),
    ('[notify]\napprise = ["json://ok", "mailto:me@example.com"]', "item 2 is not an apprise URL"),
    ('[messages.contacts]\nbob = "bob at example.com"', "key 'messages.contacts': contact 'bob' is not an apprise URL"),
])
def test_apprise_urls_are_checked_at_every_start(home, toml, words):
    (home / "palui.toml").write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home))
    assert words in str(e.value)
    assert "example.com" not in str(e.value)  # never the URL itself: apprise URLs carry tokens


@pytest.mark.slow
def test_apprise_syntax_check_does_not_import_apprise(cli, home):
    (home / "palui.toml").write_text('[notify]\napprise = ["json://localhost"]')
    code = ("import sys; from palui.config import load_settings; load_settings(); "
            "print('apprise' in sys.modules)")
    import subprocess
    import sys as _sys
    r = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PALUI_HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


@pytest.mark.slow
def test_serve_checks_apprise_urls_fully(cli, home):
    (home / "palui.toml").write_text('[notify]\napprise = ["nosuchservice://SECRET/1"]')
    r = cli("status")
    assert r.returncode == 0, r.stderr  # the syntax is fine: ordinary commands start
    r = cli("serve", "--port", "0", timeout=60)
    assert r.returncode == 1
    assert ("configuration error:" in r.stderr and "key 'notify.apprise': item 1 (a nosuchservice:// URL) is not a "
            "URL apprise can use" in r.stderr), r.stderr
    assert "SECRET" not in r.stderr
    assert not (home / "serve.json").exists()


@pytest.mark.slow
def test_a_script_path_in_palui_toml_is_relative_to_that_file(cli, home, tmp_path):
    write_script(home / "demo.json", text("Found beside palui.toml."))
    (home / "palui.toml").write_text('model = "script:demo.json"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    import os
    import subprocess
    import sys as _sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    r = subprocess.run([_sys.executable, "-m", "palui", "run", "hello"], capture_output=True, text=True,
                       env=env, cwd=elsewhere, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Found beside palui.toml." in r.stdout
    # A variable's script path stays relative to the working directory (a variable has no file).
    assert load_settings(env_for(home, PALUI_MODEL="script:x.json")).model == "script:x.json"
    assert load_settings(env_for(home)).model == f"script:{home.resolve() / 'demo.json'}"


# -- refusals and reasons -------------------------------------------------------------------------

from support.mcp_servers import HOSTILE, READ, hostile_spec, palui, palui_json, tool  # noqa: E402


def add_many(home, tmp_path, n: int = 5) -> str:
    """An MCP server with ``n`` read tools, added; returns its connector id."""
    spec = hostile_spec(tmp_path / "many.json", [tool(f"look_{i}", annotations=READ) for i in range(n)])
    import sys as _sys
    r = palui(home, "connectors", "add", "many", "--", _sys.executable, str(HOSTILE), str(spec))
    assert r.returncode == 0, r.stderr
    return "mcp-many"


def test_enable_read_warns_when_more_tools_are_on_than_the_budget(home, tmp_path):
    cid = add_many(home, tmp_path)
    r = palui(home, "tools", "enable-read", cid, env=SMALL_BUDGET)
    assert r.returncode == 0, r.stderr
    assert "5 read tool(s) switched on" in r.stdout
    assert ("warning: 14 tools are on, more than budgets.tools (10): each turn offers the 10 most relevant and "
            "leaves the others out; raise budgets.tools in palui.toml or switch tools off (palui tools disable NAME)"
            in r.stderr)
    r = palui(home, "tools", "enable-read", cid)  # within the default 30: no warning
    assert r.returncode == 0 and "warning" not in r.stderr


# budgets.tools 10; the error streak off: the five refused calls in a row must not end the turn (spec §6.3)
SMALL_BUDGET = {"PALUI_BUDGETS__TOOLS": "10", "PALUI_BUDGETS__ERROR_STREAK": "0"}

def test_a_call_to_a_tool_left_out_by_the_budget_says_how_to_fix_it(home, tmp_path):
    cid = add_many(home, tmp_path)
    assert palui(home, "tools", "enable-read", cid).returncode == 0
    model = write_script(tmp_path / "s.json", calls(*[call(f"{cid}__look_{i}") for i in range(5)]), text("Done."))
    # Connectors are ranked together and taken whole (spec §6.2): an input naming the built-ins ranks them
    # first, so the budget leaves the MCP server's tools out.
    ask = "recall tasks web messages"
    out = palui_json(home, "run", "--json", "--model", model, ask, env=SMALL_BUDGET)
    offered = next(e for e in out["events"] if e["type"] == "step")["tools_offered"]
    refused = [e for e in out["events"] if e["type"] == "tool_call" and e["tool"] not in offered]
    assert refused, "the budget left no tool out: the test proves nothing"
    for e in refused:
        assert e["reason"] == "left out by budgets.tools (10): raise it or switch tools off"
        assert e["result"] == (f"Error: the tool '{e['tool']}' cannot be called: left out by budgets.tools (10): "
                               "raise it or switch tools off.")
    assert "not offered this turn" not in json.dumps(out)  # the old wording
    # The terminal shows it on the call's own line, whole.
    r = palui(home, "run", "--model", model, ask, env=SMALL_BUDGET)
    assert f"  ⊘ {refused[0]['tool']} {{}} → not run: left out by budgets.tools (10): raise it or switch tools off" \
        in r.stdout


async def test_calls_to_tools_not_offered_read_as_one_sentence(svc, tmp_path):
    svc.tools.set_enabled(["tasks__list_tasks"], False)
    model = write_script(tmp_path / "s.json", calls(call("nope__missing"), call("tasks__list_tasks")), text("Ok."))
    r = await svc.turns.send("go", model=model)
    await svc.close()
    reasons = {e["tool"]: e["reason"] for e in r["events"] if e["type"] == "tool_call"}
    assert reasons == {"nope__missing": "no tool has this name", "tasks__list_tasks": "off: the tool is switched off"}


@pytest.mark.slow
async def test_a_tainted_conversation_names_its_taint_without_nested_parentheses(home, tmp_path):
    from palui.service import Service
    from support.httpserver import PageServer

    (home / "palui.toml").write_text("[web]\nallow_private = true\n")  # the page server is on 127.0.0.1
    svc = Service()
    with PageServer({"/offer": "<html><body>Pay to IBAN DE89370400440532013000</body></html>"}) as pages:
        model = write_script(tmp_path / "s.json", calls(call("web__fetch_page", url=pages.url + "/offer")),
                             text("Read."))
        first = await svc.turns.send("read it", model=model)
        model2 = write_script(tmp_path / "t.json", calls(call("tasks__create_task", title="pay")), text("Asked."))
        second = await svc.turns.send("make a task", model=model2, conversation=first["conversation"])
        await svc.close()
        svc.db.close()
    assert first["taint_source"] == f"web__fetch_page at step 1, content of {pages.url}/offer"
    [a] = second["pending_approvals"]
    assert a["reason"] == (f"ask: write tool in a tainted turn (tainted by web__fetch_page at step 1, content of "
                           f"{pages.url}/offer, earlier in this conversation)")

    def depth(s: str) -> int:
        d = m = 0
        for ch in s:
            d += (ch == "(") - (ch == ")")
            m = max(m, d)
        return m

    assert depth(a["reason"]) == 1


def test_a_hint_is_never_cut_in_the_middle_of_its_key(cli, home, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("web__fetch_page", url="http://127.0.0.1:9/page")),
                         text("Could not."))
    r = cli("run", "--model", model, "fetch it")
    assert r.returncode == 0, r.stderr
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("  ✗ web__fetch_page")]
    assert "refused to fetch from 127.0.0.1: the address is loopback" in line
    assert "unless web.allow_private = true is set in palui.toml" in line  # whole, with the key that fixes it


def test_cut_words_cuts_at_a_space():
    from palui.cli.render import cut_words

    hint = "refused unless the person sets web.allow_private = true in palui.toml"
    for n in range(20, len(hint) + 2):
        cut = cut_words(hint, n)
        assert len(cut) <= n
        assert "web.allow_p" not in cut or "web.allow_private" in cut, (n, cut)


def test_a_class_tightened_by_a_server_is_reported_and_told(home, tmp_path):
    import sys as _sys
    spec = hostile_spec(tmp_path / "srv.json", [tool("lookup", annotations=READ)])
    assert palui(home, "connectors", "add", "srv", "--", _sys.executable, str(HOSTILE), str(spec)).returncode == 0
    hostile_spec(tmp_path / "srv.json", [tool("lookup", annotations={"readOnlyHint": False,
                                                                     "destructiveHint": True})])
    r = palui(home, "connectors", "refresh", "mcp-srv")
    assert r.returncode == 0, r.stderr
    assert "  mcp-srv__lookup: class tightened by the server from read to destructive" in r.stdout
    inbox = palui_json(home, "inbox", "--json")
    assert any(m["text"] == "Tool mcp-srv__lookup's server tightened its class from read to destructive: the "
                            "stricter class applies now; palui policy explain mcp-srv__lookup says what that means "
                            "for each turn." for m in inbox)
    assert palui_json(home, "tools", "show", "mcp-srv__lookup", "--json")["class"] == "destructive"
    # Reported once: a refresh that finds the same listing says nothing more.
    r = palui(home, "connectors", "refresh", "mcp-srv")
    assert "tightened" not in r.stdout
