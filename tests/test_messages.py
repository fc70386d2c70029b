"""Issue 12, "messages that help": every reworded refusal and hint, as the person reads it.

Each test quotes the message (or the part that carries the fix: the key or the command) so a
rewording that loses the fix fails here.
"""

from __future__ import annotations

import json
import time

import pytest

from palui.config import load_settings
from palui.errors import ConfigError
from support.scripts import call, calls, text, write_script


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
