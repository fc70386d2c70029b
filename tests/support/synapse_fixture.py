"""A real Matrix homeserver (Synapse) on 127.0.0.1 for tests.

Synapse runs from its **own** virtual environment (see ``install_synapse.sh``), never the one Palui
runs in, so its dependencies can never move a Palui pin. This module only needs the standard
library: it writes the config, starts ``python -m synapse.app.homeserver`` as a subprocess, waits
for ``/_matrix/client/versions``, registers users with the shared-secret admin API and stops the
server cleanly::

    with SynapseServer.create(tmp_path) as hs:          # ~3 s on this machine
        alice = hs.register("alice", "pw-alice")
        print(hs.url, alice.user_id, alice.access_token)

The config: SQLite, a free port on 127.0.0.1, a client listener only (no federation listener, and
federation limited to no domain), ``registration_shared_secret``, rate limits raised far up, no
TLS, no key servers (``suppress_key_server_warning``), ``report_stats: false``, presence off, a
fresh ed25519 signing key. Config files are written as JSON, which YAML reads as is.

Where the Synapse interpreter is: ``python=`` or the ``SYNAPSE_PYTHON`` environment variable
(``…/synapse-venv/bin/python``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import string
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

try:
    from support import tcp
except ImportError:  # run as a program: tests/support is first on sys.path
    import tcp  # type: ignore[no-redef]

__all__ = ["DEFAULT_SYNAPSE_PYTHON", "SYNAPSE_VERSION", "MatrixUser", "SynapseError", "SynapseServer", "free_port",
           "synapse_python"]

SYNAPSE_VERSION = "1.163.2"
DEFAULT_SYNAPSE_PYTHON = Path.home() / ".cache" / "palui-tests" / f"synapse-{SYNAPSE_VERSION}" / "bin" / "python"
"""Where ``install_synapse.sh`` puts it by default."""


class SynapseError(RuntimeError):
    """Synapse did not start, or an admin call failed. The message ends with the log's tail."""


@dataclass(frozen=True)
class MatrixUser:
    user_id: str
    password: str
    access_token: str
    device_id: str

    @property
    def localpart(self) -> str:
        return self.user_id[1:].split(":", 1)[0]


def synapse_python(python: str | Path | None = None) -> Path:
    """The Synapse venv's interpreter: ``python``, else ``$SYNAPSE_PYTHON``, else where
    install_synapse.sh puts it by default (the path it prints)."""
    if python or os.environ.get("SYNAPSE_PYTHON"):
        return Path(python or os.environ["SYNAPSE_PYTHON"])
    return DEFAULT_SYNAPSE_PYTHON


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now (Synapse binds it itself, so there is a small race; a start that
    fails on "Address already in use" is retried by :meth:`SynapseServer.start`)."""
    return tcp.free_port(host)


def _random_secret(n: int = 40) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _signing_key() -> str:
    """A Synapse signing key file line: ``ed25519 <version> <unpadded base64 of a 32-byte seed>``
    (what ``--generate-keys`` writes; the seed is all an ed25519 key needs)."""
    version = "a_" + "".join(secrets.choice(string.ascii_letters) for _ in range(4))
    seed = base64.b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    return f"ed25519 {version} {seed}\n"


_LOTS = {"per_second": 10_000, "burst_count": 100_000}


def homeserver_config(data_dir: Path, *, server_name: str, port: int, shared_secret: str,
                      log_level: str = "INFO") -> dict[str, Any]:
    """The homeserver.yaml content (a dict)."""
    return {
        "server_name": server_name,
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "pid_file": str(data_dir / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(data_dir / "homeserver.db")}},
        "log_config": str(data_dir / "log.config"),
        "media_store_path": str(data_dir / "media_store"),
        "signing_key_path": str(data_dir / "signing.key"),
        "registration_shared_secret": shared_secret,
        "enable_registration": False,
        "report_stats": False,
        "macaroon_secret_key": _random_secret(),
        "form_secret": _random_secret(),
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "presence": {"enabled": False},
        "enable_metrics": False,
        "url_preview_enabled": False,
        "serve_server_wellknown": False,
        "max_upload_size": "10M",
        "bcrypt_rounds": 4,  # password hashing: 12 rounds cost ~250 ms per register and login
        # rate limits far up: tests send bursts
        "rc_message": _LOTS,
        "rc_registration": _LOTS,
        "rc_registration_token_validity": _LOTS,
        "rc_login": {"address": _LOTS, "account": _LOTS, "failed_attempts": _LOTS},
        "rc_admin_redaction": _LOTS,
        "rc_joins": {"local": _LOTS, "remote": _LOTS},
        "rc_joins_per_room": _LOTS,
        "rc_3pid_validation": _LOTS,
        "rc_invites": {"per_room": _LOTS, "per_user": _LOTS, "per_issuer": _LOTS},
        "rc_third_party_invite": _LOTS,
        "rc_media_create": _LOTS,
        "rc_presence": {"per_user": _LOTS},
        "rc_delayed_event_mgmt": _LOTS,
        "rc_reports": _LOTS,
        "rc_room_creation": _LOTS,
        "rc_key_requests": _LOTS,
        "rc_federation": {"window_size": 1000, "sleep_limit": 10_000, "sleep_delay": 1,
                          "reject_limit": 10_000, "concurrent": 100},
    }


def log_config(data_dir: Path, level: str = "INFO") -> dict[str, Any]:
    """Synapse's logging: to ``homeserver.log`` in the data directory, unbuffered (so a failed start
    can be explained from it)."""
    return {
        "version": 1,
        "formatters": {"precise": {"format": "%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - "
                                             "%(request)s - %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "formatter": "precise",
                              "filename": str(data_dir / "homeserver.log"), "encoding": "utf8"}},
        # DEBUG on synapse.storage.SQL would log access tokens: keep it at INFO or above
        "loggers": {"synapse.storage.SQL": {"level": "WARNING"}, "twisted": {"level": "WARNING"}},
        "root": {"level": level, "handlers": ["file"]},
        "disable_existing_loggers": False,
    }


@dataclass
class SynapseServer:
    """One Synapse process on ``data_dir``. Use :meth:`create` (writes the config), then
    :meth:`start`/:meth:`stop` or the context manager. ``start_seconds`` holds the last start time."""

    data_dir: Path
    port: int
    server_name: str
    shared_secret: str
    python: Path
    proc: subprocess.Popen[bytes] | None = None
    start_seconds: float | None = None
    users: dict[str, MatrixUser] = field(default_factory=dict)

    # ------------------------------------------------------------------ set-up

    @classmethod
    def create(cls, data_dir: str | Path, *, server_name: str = "localhost", port: int | None = None,
               python: str | Path | None = None, log_level: str = "INFO") -> SynapseServer:
        """Write a fresh config, signing key and log config into ``data_dir`` (created)."""
        data_dir = Path(data_dir).resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "media_store").mkdir(exist_ok=True)
        port = port or free_port()
        shared = _random_secret()
        (data_dir / "homeserver.yaml").write_text(json.dumps(
            homeserver_config(data_dir, server_name=server_name, port=port, shared_secret=shared), indent=1))
        (data_dir / "log.config").write_text(json.dumps(log_config(data_dir, log_level), indent=1))
        key = data_dir / "signing.key"
        key.write_text(_signing_key())
        key.chmod(0o600)
        return cls(data_dir, port, server_name, shared, synapse_python(python))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "homeserver.log"

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for p in (self.data_dir / "stdout.log", self.log_path):
            try:
                parts.extend(p.read_text(errors="replace").splitlines()[-lines:])
            except OSError:
                pass
        return "\n".join(parts[-lines:])

    # ------------------------------------------------------------------ process

    def start(self, timeout: float = 60.0) -> float:
        """Start Synapse and wait until the client API answers; return the seconds it took."""
        if self.proc is not None and self.proc.poll() is None:
            raise SynapseError("already running")
        if not self.python.exists():
            raise SynapseError(f"no Synapse interpreter at {self.python}: run install_synapse.sh")
        for attempt in range(3):
            t0 = time.perf_counter()
            out = open(self.data_dir / "stdout.log", "ab")  # noqa: SIM115
            try:
                self.proc = subprocess.Popen(
                    [str(self.python), "-m", "synapse.app.homeserver", "-c", str(self.data_dir / "homeserver.yaml")],
                    cwd=self.data_dir,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # a Ctrl-C in the test run does not hit it first
                    env={**_clean_env(), "SYNAPSE_CACHE_FACTOR": "0.5"},
                )
            finally:
                out.close()
            try:
                self._wait_ready(timeout)
            except SynapseError:
                if "Address already in use" in self.log_tail(80) and attempt < 2:
                    self._rebind()
                    continue
                self.stop()
                raise
            self.start_seconds = time.perf_counter() - t0
            return self.start_seconds
        raise AssertionError("unreachable")

    def _rebind(self) -> None:
        self.port = free_port()
        cfg = json.loads((self.data_dir / "homeserver.yaml").read_text())
        cfg["listeners"][0]["port"] = self.port
        cfg["public_baseurl"] = f"http://127.0.0.1:{self.port}/"
        (self.data_dir / "homeserver.yaml").write_text(json.dumps(cfg, indent=1))

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise SynapseError(f"Synapse exited with {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_matrix/client/versions", timeout=2) as r:
                    if r.status == 200 and "versions" in json.load(r):
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise SynapseError(f"Synapse did not answer within {timeout} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL, for tests of an unreachable homeserver."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)
            self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def remove(self) -> None:
        """Stop and delete the data directory."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    # ------------------------------------------------------------------ admin API

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 token: str | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                result: dict[str, Any] = json.load(r)
                return result
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise SynapseError(f"{method} {path}: HTTP {e.code}: {detail}") from None

    def register(self, localpart: str, password: str | None = None, *, admin: bool = False,
                 displayname: str | None = None) -> MatrixUser:
        """Register ``@localpart:server_name`` through the shared-secret admin API
        (``/_synapse/admin/v1/register``: GET a nonce, POST with an HMAC-SHA1 over
        ``nonce\\0user\\0password\\0admin|notadmin``). Returns its id, password, first access token
        and device id."""
        password = password or _random_secret(20)
        nonce = self._request("GET", "/_synapse/admin/v1/register")["nonce"]
        mac = hmac.new(self.shared_secret.encode(), digestmod=hashlib.sha1)
        for part in (nonce, localpart, password):
            mac.update(part.encode())
            mac.update(b"\x00")
        mac.update(b"admin" if admin else b"notadmin")
        body: dict[str, Any] = {"nonce": nonce, "username": localpart, "password": password, "admin": admin,
                                "mac": mac.hexdigest()}
        if displayname:
            body["displayname"] = displayname
        r = self._request("POST", "/_synapse/admin/v1/register", body)
        user = MatrixUser(r["user_id"], password, r["access_token"], r["device_id"])
        self.users[user.user_id] = user
        return user

    def login(self, localpart: str, password: str, device_id: str | None = None) -> MatrixUser:
        """A password login (``m.login.password``): a new access token (and device)."""
        body: dict[str, Any] = {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": localpart},
                                "password": password}
        if device_id:
            body["device_id"] = device_id
        r = self._request("POST", "/_matrix/client/v3/login", body)
        return MatrixUser(r["user_id"], password, r["access_token"], r["device_id"])

    def client_api(self, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A raw client-server API call (for test set-up: create a room, send an event)."""
        return self._request(method, path, body, token)


def _clean_env() -> dict[str, str]:
    """The environment for Synapse: without the test's virtualenv and Python variables."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop}


if __name__ == "__main__":  # python synapse_fixture.py: start, register two users, time it, stop
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        hs = SynapseServer.create(d)
        seconds = hs.start()
        t = time.perf_counter()
        u = hs.register("person", "pw-person")
        reg = time.perf_counter() - t
        print(f"Synapse on {hs.url}: started in {seconds:.2f} s; registered {u.user_id} in {reg * 1000:.0f} ms")
        t = time.perf_counter()
        code = hs.stop()
        print(f"stopped with exit code {code} in {time.perf_counter() - t:.2f} s")
