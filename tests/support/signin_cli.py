"""Signing in from the command line in a test: ``palui … --no-browser`` in a subprocess, the printed
authorization address "opened" with httpx, and the address the browser ended on pasted back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx


def sign_in(home: Path, *args: str, timeout: float = 60,
            env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, httpx.Response | None]:
    """``palui ARGS --no-browser``: read the printed authorization address, "open" it, and paste back the
    address the browser ended on. Returns the process and the authorization server's answer (None when
    no address was printed: no sign-in was needed, or the command failed first)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    environ.update(PALUI_HOME=str(home), **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "palui", *args, "--no-browser"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
    assert proc.stdout is not None and proc.stdin is not None
    printed = []
    auth_url = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        printed.append(line)
        if "/authorize?" in line:
            auth_url = line.strip()
            break
    if auth_url is None:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(printed) + out, err), None
    answer = httpx.get(auth_url, follow_redirects=False, timeout=10)
    if answer.status_code != 302:  # the authorization server refused the request: nothing to paste
        proc.kill()
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(proc.args, -9, "".join(printed) + out, err), answer
    out, err = proc.communicate(answer.headers["location"] + "\n", timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(printed) + out, err), answer


def signed_in(r: subprocess.CompletedProcess, answer: httpx.Response | None) -> None:
    assert answer is not None and answer.status_code == 302, (
        f"the authorization server refused: HTTP {answer.status_code if answer else '-'} "
        f"{answer.text[:200] if answer is not None else ''}")
    assert r.returncode == 0, r.stderr
