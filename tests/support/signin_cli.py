"""Signing in from the command line in a test: ``palui … --no-browser`` in this process (or a child), the
printed authorization address "opened" with httpx, and the address the browser ended on pasted back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from support.inprocess import Started
from support.waiting import guard


def sign_in(home: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None,
            process: bool = False) -> tuple[subprocess.CompletedProcess, httpx.Response | None]:
    """``palui ARGS --no-browser``: read the printed authorization address, "open" it, and paste back the
    address the browser ended on. Returns the command's result and the authorization server's answer (None
    when no address was printed: no sign-in was needed, or the command failed first). In this process
    (:class:`support.inprocess.Started`), or as ``python -m palui`` in a child with ``process=True``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    environ.update(PALUI_HOME=str(home), **(env or {}))
    if not process:
        return _sign_in_here([*args, "--no-browser"], environ, timeout)
    proc = subprocess.Popen([sys.executable, "-m", "palui", *args, "--no-browser"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
    assert proc.stdout is not None and proc.stdin is not None
    printed = []
    auth_url = None
    deadline = time.monotonic() + guard(timeout)
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        printed.append(line)
        if "/authorize?" in line:
            auth_url = line.strip()
            break
    if auth_url is None:
        out, err = proc.communicate(timeout=guard(timeout))
        return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(printed) + out, err), None
    answer = httpx.get(auth_url, follow_redirects=False, timeout=10)
    if answer.status_code != 302:  # the authorization server refused the request: nothing to paste
        proc.kill()
        out, err = proc.communicate(timeout=guard(timeout))
        return subprocess.CompletedProcess(proc.args, -9, "".join(printed) + out, err), answer
    out, err = proc.communicate(answer.headers["location"] + "\n", timeout=guard(timeout))
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(printed) + out, err), answer


def _sign_in_here(args: list[str], env: dict[str, str],
                  timeout: float) -> tuple[subprocess.CompletedProcess, httpx.Response | None]:
    started = Started(args, env=env)

    def address() -> str | None:
        for line in started.output().splitlines():
            if "/authorize?" in line:
                return line.strip()
        return None

    deadline = time.monotonic() + guard(timeout)
    while address() is None and started.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    auth_url = address()
    if auth_url is None:
        return started.wait(guard(timeout)), None
    answer = httpx.get(auth_url, follow_redirects=False, timeout=10)
    # A refused request has nothing to paste; an address that answers no sign-in ends the command (in this
    # process it cannot be killed).
    started.write((answer.headers["location"] if answer.status_code == 302 else "http://127.0.0.1/refused") + "\n")
    return started.wait(guard(timeout)), answer


def signed_in(r: subprocess.CompletedProcess, answer: httpx.Response | None) -> None:
    assert answer is not None and answer.status_code == 302, (
        f"the authorization server refused: HTTP {answer.status_code if answer else '-'} "
        f"{answer.text[:200] if answer is not None else ''}")
    assert r.returncode == 0, r.stderr
