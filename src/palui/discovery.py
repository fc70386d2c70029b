"""One service per ``PALUI_HOME`` (spec §8): its pid, port and access token live in the data dir.

Files (mode 0600): ``access_token`` (created on first start, reused after) and
``serve.json`` (``{"pid","host","port","started_at"}``, removed on clean shutdown).
``palui serve`` writes them; CLI commands find a live service with :func:`find_service`, and the
service itself reads them for the webhook address (:func:`served_here`). Home-level data, like
:mod:`palui.home`: below the service and the front ends, so the service never imports a front end
(``palui.server.discovery`` re-exports this module for the server and the CLI).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from palui.config import Settings

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def token_path(settings: Settings) -> Path:
    return settings.data_dir / "access_token"


def read_token(settings: Settings) -> str | None:
    p = token_path(settings)
    try:
        t = p.read_text().strip()
    except FileNotFoundError:
        return None
    return t or None


def ensure_token(settings: Settings) -> tuple[str, bool]:
    """The access token, created on first use. Returns (token, created_now)."""
    t = read_token(settings)
    if t:
        return t, False
    t = secrets.token_urlsafe(32)
    _write_private(token_path(settings), t + "\n")
    return t, True


def info_path(settings: Settings) -> Path:
    return settings.data_dir / "serve.json"


def write_info(settings: Settings, host: str, port: int) -> None:
    _write_private(info_path(settings), json.dumps({"pid": os.getpid(), "host": host, "port": port,
                                                    "started_at": time.time()}, allow_nan=False))


def clear_info(settings: Settings) -> None:
    try:
        data = json.loads(info_path(settings).read_text())
        if data.get("pid") == os.getpid():
            info_path(settings).unlink()
    except (FileNotFoundError, ValueError):
        pass


@dataclass(frozen=True)
class ServiceInfo:
    """A live service: its base URL (``http://127.0.0.1:8765``), access token and pid."""

    url: str
    token: str
    pid: int


def served_here(settings: Settings) -> str | None:
    """``http://HOST:PORT`` of the service when ``serve.json`` was written by this very process (the
    service asking for its own address: no HTTP call to itself), else None. A wildcard or
    ``localhost`` host is reached on the loopback address; an IPv6 host is bracketed."""
    try:
        info = json.loads(info_path(settings).read_text())
        if info.get("pid") == os.getpid():
            host = str(info["host"])
            host = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else host
            host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
            return f"http://{host}:{int(info['port'])}"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def take_lock(settings: Settings) -> TextIO | None:
    """An exclusive, non-blocking lock on ``serve.lock`` (an open file; closing releases it), or None
    when another process holds it."""
    import fcntl

    path = settings.data_dir / "serve.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    return f


def find_service(settings: Settings, timeout: float = 2.0) -> ServiceInfo | None:
    """The service running on this ``PALUI_HOME``, if its process lives and answers ``/api/health``
    with the pid of ``serve.json`` — checked before the token is sent, so a stale file pointing at
    someone else's port never receives it."""
    try:
        data = json.loads(info_path(settings).read_text())
        pid, host, port = int(data["pid"]), str(data["host"]), int(data["port"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    token = read_token(settings)
    if not token or not _alive(pid):
        return None
    connect_host = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else ("[::1]" if host in ("::", "::1") else host)
    url = f"http://{connect_host}:{port}"
    import httpx  # here: a command with no service running asks nothing (docs/decisions/0085-a-light-cli-start.md)

    try:
        r = httpx.get(url + "/api/health", timeout=timeout)  # public: no token sent yet
        if r.status_code != 200 or r.json().get("service") != "palui" or r.json().get("pid") != pid:
            return None
        r = httpx.get(url + "/api/status", headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if r.status_code != 200:
        return None
    return ServiceInfo(url, token, pid)
