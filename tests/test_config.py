"""Configuration: palui.toml + PALUI_* variables; a bad config refuses to start (spec §10)."""

from __future__ import annotations

import pytest

from palui.config import documented_keys, load_settings, paths
from palui.errors import ConfigError


def env_for(home, **extra) -> dict[str, str]:
    return {"PALUI_HOME": str(home), **extra}


def write_toml(home, text: str) -> None:
    (home / "palui.toml").write_text(text, encoding="utf-8")


def test_palui_home_holds_config_and_database(home, svc):
    h, data, cfg = paths(env_for(home))
    assert (h, data, cfg) == (home.resolve(), home.resolve(), home.resolve() / "palui.toml")
    assert svc.settings.db_path == home.resolve() / "palui.db"
    assert (home / "palui.db").exists()


def test_without_palui_home_uses_platform_dirs(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    _, data, cfg = paths({})
    assert cfg == tmp_path / "cfg" / "palui" / "palui.toml"
    assert data == tmp_path / "data" / "palui"


def test_defaults(home):
    s = load_settings(env_for(home))
    assert {k: s.value(k) for k in documented_keys()} == documented_keys()
    assert s.budgets.steps == 12 and s.budgets.seconds == 120 and s.budgets.tools == 30
    assert s.caps.daily_tokens == 1_000_000 and s.caps.runs_per_hour == 60
    assert s.approvals.chat_expiry_seconds == 1800 and s.approvals.job_expiry_seconds == 86400
    assert s.serve.host == "127.0.0.1" and s.serve.port == 8765
    assert s.web.allow_private is False and s.model is None and s.notify.apprise == []


def test_file_then_env_overrides(home):
    write_toml(home, """
model = "script:/tmp/x.json"
[caps]
daily_tokens = 5_000
timezone = "Europe/Paris"
[web]
allow_private = true
[notify]
apprise = ["json://localhost"]
""")
    s = load_settings(env_for(home))
    assert (s.model, s.caps.daily_tokens, s.caps.timezone) == ("script:/tmp/x.json", 5000, "Europe/Paris")
    assert s.web.allow_private is True and s.notify.apprise == ["json://localhost"]
    s = load_settings(env_for(home, PALUI_MODEL="openai:gpt-4.1-mini", PALUI_CAPS__DAILY_TOKENS="7000",
                             PALUI_WEB__ALLOW_PRIVATE="no", PALUI_BUDGETS__SECONDS="2.5",
                             PALUI_NOTIFY__APPRISE="json://a, json://b", PALUI_TEST_CLOCK="0"))
    assert (s.model, s.caps.daily_tokens, s.web.allow_private) == ("openai:gpt-4.1-mini", 7000, False)
    assert s.budgets.seconds == 2.5 and s.notify.apprise == ["json://a", "json://b"]
    assert s.caps.timezone == "Europe/Paris"  # not overridden: the file's value stays


@pytest.mark.parametrize("word,expected", [
    ("true", True), ("TRUE", True), ("1", True), ("yes", True),
    ("false", False), ("0", False), ("No", False),
])
def test_env_booleans(home, word, expected):
    assert load_settings(env_for(home, PALUI_WEB__ALLOW_PRIVATE=word)).web.allow_private is expected


# (palui.toml text, env, words that must all be in the message)
BAD = [
    ("model = [", {}, ["palui.toml", "not valid TOML"]),
    ("colour = 'blue'", {}, ["palui.toml", "unknown key 'colour'"]),
    ("[caps]\ndaily_token = 5", {}, ["palui.toml", "unknown key 'caps.daily_token'"]),
    ("[nope]\nx = 1", {}, ["palui.toml", "unknown section '[nope]'"]),
    ("caps = 5", {}, ["palui.toml", "key 'caps' must be a table"]),
    ("[budgets]\nsteps = 'ten'", {}, ["palui.toml", "budgets.steps", "wrong type"]),
    ("[serve]\nport = \"8765\"", {}, ["palui.toml", "serve.port", "wrong type"]),
    ("[budgets]\nsteps = 1.5", {}, ["palui.toml", "budgets.steps", "whole number"]),
    ("[budgets]\nsteps = true", {}, ["palui.toml", "budgets.steps", "whole number"]),
    ("[budgets]\nsteps = 0", {}, ["palui.toml", "budgets.steps", "greater than 0"]),
    ("[budgets]\nseconds = inf", {}, ["palui.toml", "budgets.seconds", "finite"]),
    ("[serve]\nport = 70000", {}, ["palui.toml", "serve.port", "port number"]),
    ("[web]\nallow_private = 'yes'", {}, ["palui.toml", "web.allow_private", "wrong type"]),
    ("[caps]\ntimezone = 'Mars/Olympus'", {}, ["palui.toml", "caps.timezone", "unknown time zone"]),
    ("[caps]\ntimezone = 'America'", {}, ["palui.toml", "caps.timezone", "unknown time zone"]),
    ("", {"PALUI_CAPS__DAILY_TOKENS": "abc"}, ["PALUI_CAPS__DAILY_TOKENS", "caps.daily_tokens", "whole number"]),
    ("", {"PALUI_CAPS_DAILY_TOKENS": "5"}, ["PALUI_CAPS_DAILY_TOKENS", "unknown key"]),
    ("", {"PALUI_CONFIG": "/etc/palui.toml"}, ["PALUI_CONFIG", "unknown key"]),
    ("", {"PALUI_WEB__ALLOW_PRIVATE": "maybe"}, ["PALUI_WEB__ALLOW_PRIVATE", "web.allow_private", "true or false"]),
    ("", {"PALUI_BUDGETS__SECONDS": "nan"}, ["PALUI_BUDGETS__SECONDS", "budgets.seconds", "finite"]),
    ("", {"PALUI_CAPS__TIMEZONE": "Nowhere/Else"}, ["PALUI_CAPS__TIMEZONE", "caps.timezone", "unknown time zone"]),
]


@pytest.mark.parametrize("toml,env,words", BAD, ids=[w[-1] + "-" + (list(e) or ["file"])[0] for _, e, w in BAD])
def test_bad_config_refuses(home, toml, env, words):
    if toml:
        write_toml(home, toml)
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home, **env))
    for w in words:
        assert w in str(e.value)


def test_secret_values_are_not_echoed(home):
    write_toml(home, "[notify]\napprise = [\"tgram://SECRET-TOKEN/1\", 5]")
    with pytest.raises(ConfigError, match="notify.apprise") as e:
        load_settings(env_for(home))
    assert "SECRET-TOKEN" not in str(e.value)


# Through the real command line: non-zero exit, the message on stderr naming file/variable and key.
CLI_BAD = [
    ("model = [", {}, ["palui.toml", "not valid TOML"]),
    ("[caps]\ncolour = 1", {}, ["palui.toml", "caps.colour"]),
    ("[budgets]\ntools = 'many'", {}, ["palui.toml", "budgets.tools"]),
    ("", {"PALUI_CAPS__DAILY_TOKENS": "abc"}, ["PALUI_CAPS__DAILY_TOKENS", "caps.daily_tokens"]),
    ("[caps]\ntimezone = 'Atlantis/Capital'", {}, ["palui.toml", "caps.timezone", "Atlantis/Capital"]),
]


@pytest.mark.parametrize("toml,env,words", CLI_BAD)
def test_cli_refuses_to_start_on_bad_config(cli, home, toml, env, words):
    if toml:
        write_toml(home, toml)
    r = cli("tools", "list", env=env)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert "configuration error" in r.stderr and "Traceback" not in r.stderr
    for w in words:
        assert w in r.stderr
    assert not (home / "palui.db").exists()  # refused before touching the database


@pytest.mark.parametrize("where", ["file", "env"])
def test_a_model_without_a_provider_is_refused_at_start(home, where):
    """Every key is checked at start (README): ``model = "gpt-4"`` names no provider (found by a new-user
    trial: it passed ``palui status`` and was refused only by ``palui run``). The value is not echoed."""
    env = {"PALUI_HOME": str(home)}
    if where == "file":
        (home / "palui.toml").write_text('model = "gpt-4"\n')
    else:
        env["PALUI_MODEL"] = "gpt-4"
    with pytest.raises(ConfigError) as e:
        load_settings(env)
    assert "key 'model': expected PROVIDER:MODEL" in str(e.value) and "gpt-4\"" not in str(e.value)
    assert ("palui.toml" if where == "file" else "PALUI_MODEL") in str(e.value)
    for ok in ("openai:gpt-4o", "@work", "script:demo.json", "llama3@http://127.0.0.1:11434/v1"):
        if where == "file":
            (home / "palui.toml").write_text(f'model = "{ok}"\n')
        else:
            env["PALUI_MODEL"] = ok
        assert load_settings(env).model


# A control character in a value that becomes a path, a host, a URL or a process argument refuses to start
# naming the key (a NUL in `model` or `[serve] host` once gave a 40-line traceback on the first command that
# used it); every value in a message is shown as every surface shows text, escaped (spec §10.4, §4.7).
CONTROL = [
    ('model = "script:/tmp/a\\u0000b.json"',
     "key 'model': must not contain control characters (U+0000 at character 14)"),
    ('[serve]\nhost = "127.0.0.1\\u0000"',
     "key 'serve.host': must not contain control characters (got '127.0.0.1\\u0000')"),
    ('[serve]\npublic_url = "https://h\\u001b[2J/"', "key 'serve.public_url': must not contain control characters"),
    ('[caps]\ntimezone = "Mars/\\u0000x"',
     "key 'caps.timezone': must not contain control characters (got 'Mars/\\u0000x')"),
    ('[policy]\ncheck_file = "a\\nb.csv"',
     "key 'policy.check_file': must not contain control characters (got 'a\\nb.csv')"),
    ('[mcp.oauth]\nclient_metadata_url = "https://h/\\u0000"', "key 'mcp.oauth.client_metadata_url': must not contain"),
    ('[notify]\napprise = ["json://h/\\u0000"]',
     "key 'notify.apprise': item 1 must not contain control characters (U+0000 at character 10)"),
    ('[messages]\ncontacts = {bob = "json://h/\\u0007"}', "key 'messages.contacts': contact 'bob' must not contain"),
    ('[models.local]\nmodel = "openai:x"\nbase_url = "http://h\\u0000/"',
     "key 'models.local.base_url': must not contain control characters (U+0000 at character 9)"),
    ('[budgets]\nsteps = true', "key 'budgets.steps': must be a whole number (got true)"),
    ('[budgets]\nseconds = [1, "a\\u0000"]', 'key \'budgets.seconds\': must be a number (got [1, "a\\u0000"])'),
]


@pytest.mark.parametrize("toml,said", CONTROL, ids=[f"{s.split(chr(39))[1]}-{i}" for i, (_t, s) in enumerate(CONTROL)])
def test_a_control_character_refuses_to_start_and_values_are_shown_escaped(cli, home, toml, said):
    write_toml(home, toml)
    r = cli("status")
    assert r.returncode == 1 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr
    assert f"configuration error: {home / 'palui.toml'}: {said}" in r.stderr, r.stderr
    assert "\x00" not in r.stderr and "\\x00" not in r.stderr and "True" not in r.stderr, r.stderr
    assert not (home / "palui.db").exists()  # refused before touching the database


@pytest.mark.parametrize("toml,args,key", [
    ('model = "script:/tmp/a\\u0000b.json"', ("run", "hi"), "model"),
    ('[serve]\nhost = "127.0.0.1\\u0000"', ("serve",), "serve.host"),
])
def test_the_commands_that_use_the_value_refuse_to_start_too(cli, home, toml, args, key):
    write_toml(home, toml)
    r = cli(*args)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"configuration error: {home / 'palui.toml'}: key '{key}': must not contain control characters" in r.stderr


def test_a_control_character_in_a_variable_refuses_to_start(cli, home):
    r = cli("status", env={"PALUI_SERVE__HOST": "127.0.0.1\x1b[2J"})
    assert r.returncode == 1 and "\x1b" not in r.stderr, r.stderr
    assert ("environment variable PALUI_SERVE__HOST: key 'serve.host': must not contain control characters "
            "(got '127.0.0.1\\u001b[2J')") in r.stderr, r.stderr


# serve.public_url is printed as the address a webhook's sender posts to: only an http(s) URL with a host
@pytest.mark.parametrize("url", ["javascript:alert(1)//", "file:///etc/passwd", "https://", "palui.example.org",
                                 "https://user:pw@h.example", "https://h.example/?q=1", "https://[::1/"])
def test_a_public_url_that_is_not_an_http_url_with_a_host_is_refused(home, url):
    write_toml(home, f'[serve]\npublic_url = "{url}"')
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home))
    assert "key 'serve.public_url': must be an http:// or https:// URL with a host" in str(e.value)


@pytest.mark.parametrize("url", ["https://palui.example.org", "http://127.0.0.1:8765", "https://h.example/palui/"])
def test_a_public_url_with_a_host_is_kept(home, url):
    write_toml(home, f'[serve]\npublic_url = "{url}"')
    assert load_settings(env_for(home)).serve.public_url == url
