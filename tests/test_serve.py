"""``palui serve`` process behaviour (spec §8): token everywhere, one service per home, clean stop.

The process is the subject here: the services are children (``process=True``)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from support.live_service import LiveService, wait_for


@pytest.mark.slow
def test_token_required_one_service_per_home_and_clean_sigterm(cli, home):
    srv = LiveService(home, process=True).start()
    try:
        import httpx

        assert httpx.get(srv.url + "/api/status").status_code == 401
        assert srv.http.get("/api/status").json()["paused"] is False
        assert stat.S_IMODE(os.stat(home / "access_token").st_mode) == 0o600
        assert stat.S_IMODE(os.stat(home / "serve.json").st_mode) == 0o600
        r = cli("serve", "--port", "0")
        assert r.returncode != 0 and "already runs" in r.stderr
    finally:
        rc = srv.stop()
    assert rc == 0
    assert not (home / "serve.json").exists()
    assert (home / "access_token").exists()  # reused by the next start


def test_non_loopback_needs_an_existing_token(cli, home):
    r = cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 1 and "access token" in r.stderr
    assert not (home / "access_token").exists()


@pytest.mark.slow
def test_simultaneous_starts_give_one_service(home):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    procs = [subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]

    def serving_pid() -> int | None:
        try:
            return int(json.loads((home / "serve.json").read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    try:
        # Settled when every start has either given up or is the one service serve.json names (a second
        # service would do neither, and the wait's guard would fail the test).
        wait_for(lambda: all(p.poll() is not None or p.pid == serving_pid() for p in procs), 120,
                 what="each start to give up or be the one service")
        running = [p for p in procs if p.poll() is None]
        assert len(running) == 1
        refused = [p for p in procs if p.poll() is not None]
        assert all(p.returncode == 1 and "already runs" in p.stderr.read() for p in refused)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
            p.communicate(timeout=30)  # waits, and closes its pipes


@pytest.mark.slow
def test_bad_port_and_failed_bind_leave_no_token(cli, home):
    import socket

    r = cli("serve", "--port", "70000")
    assert r.returncode == 2 and "0-65535" in r.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        r = cli("serve", "--port", str(s.getsockname()[1]))
    assert r.returncode == 1 and "cannot listen" in r.stderr
    assert not (home / "access_token").exists()  # the first real start will print the login link


@pytest.mark.slow
def test_health_is_public_and_the_token_is_never_sent_to_a_stranger(cli, home, tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    with LiveService(home, process=True) as srv:
        h = httpx.get(srv.url + "/api/health")
        assert h.status_code == 200 and h.json() == {"ok": True, "service": "palui", "pid": srv.proc.pid}
        assert httpx.get(srv.url + "/api/status", headers={"Host": "LOCALHOST:" + srv.url.rsplit(":", 1)[1],
                                                           "Authorization": f"Bearer {srv.token}"}).status_code == 200
    seen: list[str] = []

    class Stranger(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.headers.get("Authorization") or "")
            body = json.dumps({"ok": True, "service": "palui", "pid": 1}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *a):
            pass

    stranger = ThreadingHTTPServer(("127.0.0.1", 0), Stranger)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    try:
        # a stale serve.json: a live pid (this test's), but the port is someone else's
        (home / "serve.json").write_text(json.dumps({"pid": os.getpid(), "host": "127.0.0.1",
                                                     "port": stranger.server_address[1]}))
        model = tmp_path / "s.json"
        model.write_text('{"steps": [{"text": "local"}]}')
        r = cli("run", "--model", f"script:{model}", "hello")
        assert r.returncode == 0 and "local" in r.stdout  # ran in-process
        assert seen and not any(seen)  # asked who it is, never sent the token
    finally:
        stranger.shutdown()


@pytest.mark.slow
async def test_accepted_connections_have_tcp_nodelay():
    """The service's listening socket makes every accepted connection TCP_NODELAY (no ~40 ms
    Nagle wait per response on a kept-alive connection). Checked on the server side of a real
    connection accepted by asyncio, from the socket ``palui serve`` binds and, for contrast, from a
    socket made the old way (protocol 0), whose connections asyncio leaves with Nagle on."""
    import asyncio
    import socket

    from palui.server.main import bind

    async def nodelay_of_accepted(listening: socket.socket) -> int:
        got: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handler(reader, writer):
            got.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handler, sock=listening)
        _, writer = await asyncio.open_connection("127.0.0.1", listening.getsockname()[1])
        try:
            return await asyncio.wait_for(got, 10)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    old_way = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    old_way.bind(("127.0.0.1", 0))
    old_way.listen()
    assert await nodelay_of_accepted(old_way) == 0
    assert await nodelay_of_accepted(bind("127.0.0.1", 0)) != 0
