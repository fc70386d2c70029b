"""What a CLI command imports before it runs (docs/decisions/0085-a-light-cli-start.md): the start cost,
held by what it imports.

Timing is not asserted here (bench/cli_start.py measures it); what is asserted is the cause:
``palui --help`` and ``palui tools list`` import neither rich, pydantic, httpx, asyncio nor the
model library; each entry of the CLI's command map loads the same commands as loading every
module; and option values still reach the commands converted (an int option is checked by Click).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("rich", "pydantic", "pydantic_ai", "httpx", "asyncio", "mcp", "starlette", "uvicorn", "apprise")

PROBE = """
import atexit, json, sys
atexit.register(lambda: print("MODULES " + json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr))
sys.argv = ["palui", *json.loads(sys.argv[1])]
from palui.cli import main
main()
"""


def imported(home, *args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


@pytest.mark.slow
@pytest.mark.parametrize("args", [("--help",), ("tools", "list"), ("tools", "list", "--json"), ("connectors", "list")])
def test_light_commands_import_nothing_heavy(home, args):
    assert not imported(home, *args) & set(HEAVY)


@pytest.mark.slow
def test_the_probe_sees_a_heavy_import(home, tmp_path):
    # `palui run` needs the model library: the probe must notice it (else the test above could not fail).
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [{"text": "ok"}]}))
    assert {"pydantic_ai", "asyncio"} <= imported(home, "run", "hi", "--model", f"script:{script}")


SUBCOMMANDS = """
import json, sys
from palui import cli
cli.load_commands(json.loads(sys.argv[1]))
out = {}
for name, cmd in cli.app.commands.items():
    out[name] = sorted(getattr(cmd, "commands", {}) or ["(command)"])
print(json.dumps(out))
"""


def commands(argv) -> dict[str, list[str]]:
    r = subprocess.run([sys.executable, "-c", SUBCOMMANDS, json.dumps(argv)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow
def test_each_command_map_entry_loads_what_loading_everything_does():
    from palui.cli import COMMANDS

    everything = commands(None)
    assert set(COMMANDS) <= set(everything), set(COMMANDS) - set(everything)
    # Every command is mapped: one that is not would still work, but load every module.
    assert set(everything) <= set(COMMANDS), set(everything) - set(COMMANDS)
    for name in COMMANDS:
        assert commands([name, "--help"])[name] == everything[name], name


HELP = """
import atexit, json, sys
from palui import cli
loaded = lambda: sorted(m for m in sys.modules if m.startswith("palui.cli."))
atexit.register(lambda: print(json.dumps(loaded()), file=sys.stderr))
args = json.loads(sys.argv[1])
if args is None:  # every command module loaded: the help as the commands themselves define it
    cli.load_commands(None)
    cli.app(args=["--help"], prog_name="palui")
sys.argv = ["palui", *args]
cli.main(prog_name="palui")
"""


@pytest.mark.slow
@pytest.mark.parametrize("columns", ["80", "400"])  # 400: no summary is cut short, each is compared whole
def test_help_without_the_command_modules_is_the_help_with_them(home, columns):
    # `palui --help` and a bare `palui` list the top-level commands from cli.SUMMARIES instead of importing every
    # command module: what they print must be what the modules define (a command added, renamed or re-described
    # without its summary fails here).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env.update(PALUI_HOME=str(home), COLUMNS=columns)

    def printed(args) -> tuple[str, list[str]]:
        """What the help printed (a bare ``palui`` prints it on stderr, as bad usage), and the command modules
        imported (the last line of stderr)."""
        r = subprocess.run([sys.executable, "-c", HELP, json.dumps(args)], capture_output=True, text=True, env=env,
                           timeout=120)
        *err, modules = r.stderr.splitlines(keepends=True)
        return r.stdout + "".join(err), json.loads(modules)

    everything, modules = printed(None)
    assert "elicitations" in everything and "Run one turn" in everything and "palui.cli.turns" in modules
    for args in (["--help"], []):
        help_text, modules = printed(args)
        assert help_text == everything
        assert modules == ["palui.cli.common"]  # no command module was imported to list them


def test_option_values_are_converted_as_before(cli):
    listed = cli.json("tools", "list", "--connector", "recall", "--json")
    assert {t["connector"] for t in listed} == {"recall"}
    r = cli("jobs", "add", "daily", "--cron", "0 8 * * *", "--prompt", "hi", "--token-cap", "lots")
    assert r.returncode == 2 and "token-cap" in r.stderr  # an int option is still checked by Click
    r = cli("jobs", "add", "daily", "--cron", "0 8 * * *", "--prompt", "hi", "--token-cap", "500")
    assert r.returncode == 0, r.stderr
    assert cli.json("jobs", "list", "--json")[0]["token_cap"] == 500
    r = cli("tool", "list")  # not a command: every module is loaded and click says so
    assert r.returncode == 2 and "No such command 'tool'" in r.stderr


def test_the_light_service_answers_as_the_full_one(home):
    # `palui tools list` builds the tools part alone (start cost): its public attributes are the full service's
    # of the same names and classes, so whatever a front end calls on them answers as on the full service; a
    # part composed over others (connectors: the MCP servers as the person sees them) is not on it at all.
    from palui.service import Service
    from palui.service.light import LIGHT_PARTS, ToolsService

    full, light = Service(), ToolsService()
    assert [n for n in vars(light) if not n.startswith("_")] == ["settings", "db", *LIGHT_PARTS]
    for name in LIGHT_PARTS:
        assert type(getattr(full, name)) is type(getattr(light, name)), name
    assert not hasattr(light, "connectors")
    full.db.close()
    light.db.close()
    src = (Path(__file__).parent.parent / "src" / "palui").rglob("*.py")
    calls = {m for p in src for m in re.findall(r"tools_service\(\)\.(\w+)", p.read_text())}
    assert calls and calls <= set(LIGHT_PARTS), calls
