"""``palui service install|status|uninstall``: run ``palui serve`` at login, restarted on failure
(docs/decisions/0070-service-install.md).

Channels and jobs need the service running. On Linux this writes a systemd **user** unit
(``~/.config/systemd/user/palui.service``) and enables it; on macOS a launchd agent
(``~/Library/LaunchAgents/org.palui.serve.plist``). The unit runs this very interpreter
(``python -m palui serve``), keeps ``PALUI_HOME`` when set, and reads provider keys from an
optional ``<data dir>/service.env`` (``KEY=value`` lines, mode 0600; systemd only: a launchd agent
gets its variables in the plist). A user unit stops at logout unless lingering is on:
``loginctl enable-linger $USER``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import click

from palui.cli.common import group
from palui.errors import PaluiError, UsageError
from palui.home import paths

service_app = group("service", "Run palui serve at login (systemd user unit, launchd agent).")

UNIT_NAME = "palui.service"
LAUNCHD_LABEL = "org.palui.serve"


def _quote(arg: str) -> str:
    """One ExecStart word (systemd's quoting: double quotes, backslash escapes; % doubled)."""
    arg = arg.replace("%", "%%")
    if arg and not any(c in arg for c in ' \t"\\\'$;'):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(python: str, home: str | None, data_dir: Path) -> str:
    """The user unit's text: ``palui serve`` at login, restarted on failure."""
    env = f"Environment={_quote('PALUI_HOME=' + home)}\n" if home else ""
    return (
        "[Unit]\n"
        "Description=Palui, a personal AI agent whose tools are governed (palui serve)\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={_quote(python)} -m palui serve\n"
        f"{env}"
        f"EnvironmentFile=-{_quote(str(data_dir / 'service.env'))}\n"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        "UMask=0077\n"
        "TimeoutStopSec=45\n\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(python: str, home: str | None, data_dir: Path) -> bytes:
    """The launchd agent: started at login (``RunAtLoad``), restarted unless it exited cleanly."""
    logs = data_dir / "logs"
    plist: dict[str, object] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": [python, "-m", "palui", "serve"],
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 5,
        "Umask": 0o077,
        "StandardOutPath": str(logs / "service.log"),
        "StandardErrorPath": str(logs / "service.log"),
    }
    if home:
        plist["EnvironmentVariables"] = {"PALUI_HOME": home}
    import plistlib  # (xml.parsers.expat: only for a launchd agent)

    return plistlib.dumps(plist)


def _kind(system: str | None) -> str:
    s = (system or platform.system()).lower()
    if s in ("linux", "systemd"):
        return "systemd"
    if s in ("darwin", "macos", "launchd"):
        return "launchd"
    raise UsageError(f"palui service supports Linux (systemd) and macOS (launchd), not {s}")


def unit_path(kind: str) -> Path:
    if kind == "systemd":
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        return base / "systemd" / "user" / UNIT_NAME
    return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    if shutil.which(args[0]) is None:
        raise PaluiError(f"{args[0]} was not found: the unit is written, start it yourself ({' '.join(args)})")
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


@service_app.command("install")
@click.option("--enable/--no-enable", "enable", default=True, help="Enable and start it now.")
@click.option("--platform", "system", hidden=True, help="linux or macos (tests).")
@click.option("--print", "show", is_flag=True, help="Print the unit and write nothing.")
def install(enable: bool, system: str | None, show: bool) -> None:
    """Write (and enable) a systemd user unit or a launchd agent that runs `palui serve` at login."""
    kind = _kind(system)
    home = os.environ.get("PALUI_HOME")
    _home, data_dir, _cfg = paths()
    content = systemd_unit(sys.executable, home, data_dir).encode() if kind == "systemd" else \
        launchd_plist(sys.executable, home, data_dir)
    if show:
        click.echo(content.decode())
        return
    path = unit_path(kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    click.echo(f"wrote {path}")
    if enable:
        cmds = ([["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", UNIT_NAME]]
                if kind == "systemd" else [["launchctl", "load", "-w", str(path)]])
        for cmd in cmds:
            r = _run(cmd)
            if r.returncode != 0:
                raise PaluiError(f"{' '.join(cmd)} failed: {r.stderr.strip() or r.stdout.strip()}")
        click.echo("enabled and started: palui serve now runs at login and restarts on failure")
    else:
        click.echo("not enabled (--no-enable): " + ("systemctl --user enable --now palui.service"
                                                    if kind == "systemd" else f"launchctl load -w {path}"))
    if kind == "systemd":
        click.echo("to keep it running after you log out: loginctl enable-linger $USER")
        click.echo(f"provider keys (OPENAI_API_KEY=…) go into {data_dir / 'service.env'} (mode 0600)")


@service_app.command("status")
@click.option("--platform", "system", hidden=True)
def status(system: str | None) -> None:
    """Is the unit installed, enabled and running?"""
    kind = _kind(system)
    path = unit_path(kind)
    if not path.exists():
        click.echo(f"not installed ({path} does not exist): palui service install")
        raise click.exceptions.Exit(1)
    click.echo(f"installed: {path}")
    cmd = (["systemctl", "--user", "status", "--no-pager", UNIT_NAME] if kind == "systemd"
           else ["launchctl", "list", LAUNCHD_LABEL])
    try:
        r = _run(cmd)
    except PaluiError as e:
        click.echo(str(e))
        return
    click.echo((r.stdout or r.stderr).rstrip())


@service_app.command("uninstall")
@click.option("--platform", "system", hidden=True)
@click.option("--stop/--no-stop", "stop", default=True, help="Stop and disable it first.")
def uninstall(system: str | None, stop: bool) -> None:
    """Stop, disable and remove the unit."""
    kind = _kind(system)
    path = unit_path(kind)
    if stop and path.exists():
        cmds = ([["systemctl", "--user", "disable", "--now", UNIT_NAME]] if kind == "systemd"
                else [["launchctl", "unload", "-w", str(path)]])
        for cmd in cmds:
            try:
                _run(cmd)
            except PaluiError as e:
                click.echo(str(e))
    if path.exists():
        path.unlink()
        click.echo(f"removed {path}")
    else:
        click.echo(f"not installed ({path})")
    if kind == "systemd" and stop and shutil.which("systemctl"):
        subprocess.run(["systemctl", "--user", "daemon-reload"], capture_output=True, timeout=60)
