"""``palui service install|status|uninstall`` (docs/decisions/0070-service-install.md): only the units' content can be
tested here — the systemd user unit with ``systemd-analyze verify`` (system mode and ``--user``
with a private ``XDG_RUNTIME_DIR``), the launchd plist with ``plistlib``."""

from __future__ import annotations

import plistlib
import shutil
import subprocess
import sys

import pytest

needs_systemd = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")


def _verify(path, tmp_path, user: bool) -> subprocess.CompletedProcess:
    env = None
    if user:
        run = tmp_path / "xdg-runtime"
        run.mkdir(mode=0o700, exist_ok=True)
        env = {"XDG_RUNTIME_DIR": str(run), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["systemd-analyze", *(["--user"] if user else []), "verify", str(path)],
                          capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.slow
@needs_systemd
@pytest.mark.parametrize("user", [False, True], ids=["system-mode", "user-mode"])
def test_the_systemd_user_unit_verifies(cli, home, tmp_path, user):
    r = cli("service", "install", "--print", "--platform", "linux")
    assert r.returncode == 0, r.stderr
    unit = r.stdout
    assert f"ExecStart={sys.executable} -m palui serve" in unit
    assert f"Environment=PALUI_HOME={home}" in unit and "Restart=on-failure" in unit
    assert "WantedBy=default.target" in unit
    path = tmp_path / "palui.service"
    path.write_text(unit)
    v = _verify(path, tmp_path, user)
    assert v.returncode == 0, v.stderr
    assert "palui.service" not in v.stderr  # no warning about our unit
    # The check can fail: a relative ExecStart and a bad Restart= are refused.
    bad = tmp_path / "bad.service"
    bad.write_text(unit.replace(f"ExecStart={sys.executable}", "ExecStart=palui").replace("on-failure", "sometimes"))
    assert _verify(bad, tmp_path, user).returncode != 0


@pytest.mark.slow
def test_install_status_uninstall_write_and_remove_the_unit(cli, tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    r = cli("service", "status", "--platform", "linux", env=env)
    assert r.returncode == 1 and "not installed" in r.stdout
    r = cli("service", "install", "--no-enable", "--platform", "linux", env=env)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "cfg" / "systemd" / "user" / "palui.service"
    assert path.exists() and "ExecStart=" in path.read_text()
    assert "loginctl enable-linger" in r.stdout and "systemctl --user enable --now palui.service" in r.stdout
    r = cli("service", "status", "--platform", "linux", env=env)
    assert r.returncode == 0 and f"installed: {path}" in r.stdout
    r = cli("service", "uninstall", "--no-stop", "--platform", "linux", env=env)
    assert r.returncode == 0 and not path.exists()


def test_the_launchd_plist_parses(cli, home):
    r = cli("service", "install", "--print", "--platform", "macos")
    assert r.returncode == 0, r.stderr
    plist = plistlib.loads(r.stdout.encode())
    assert plist["Label"] == "org.palui.serve"
    assert plist["ProgramArguments"] == [sys.executable, "-m", "palui", "serve"]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["EnvironmentVariables"] == {"PALUI_HOME": str(home)}
    assert plist["StandardErrorPath"].endswith("logs/service.log")
