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



# ``palui serve`` run so that SIGUSR1 writes the names of its imported modules to the file named in argv[1].
MODULES_ON_SIGNAL = """
import json, runpy, signal, sys
out = sys.argv[1]
def dump(*_):
    with open(out + ".tmp", "w") as f:
        json.dump(sorted(sys.modules), f)
    import os
    os.replace(out + ".tmp", out)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["palui", "serve", "--port", "0"]
runpy.run_module("palui", run_name="__main__")
"""


@pytest.mark.slow
def test_serve_starts_without_the_mcp_server_side_or_the_model_library(cli, home, tmp_path):
    # `palui serve` imports the MCP SDK's server side at the first request to /mcp, and the model library with
    # the first turn (docs/decisions/0190-nothing-before-it-is-needed.md).
    import signal
    import subprocess
    import sys

    import httpx

    client = cli.json("gateway", "clients", "add", "coder", "--json")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}, "PALUI_HOME": str(home)}
    out = tmp_path / "modules.json"
    proc = subprocess.Popen([sys.executable, "-c", MODULES_ON_SIGNAL, str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def modules() -> set[str]:
        out.unlink(missing_ok=True)
        proc.send_signal(signal.SIGUSR1)
        return set(json.loads(wait_for(lambda: out.exists() and out.read_text(), 120, what="the module list")))

    try:
        info = wait_for(lambda: (home / "serve.json").exists() and json.loads((home / "serve.json").read_text()),
                        120, what="serve.json")
        url = f"http://127.0.0.1:{info['port']}"
        wait_for(lambda: httpx.get(url + "/api/health").status_code == 200, 120, what="/api/health")
        started = modules()
        assert "palui.server.app" in started  # the probe sees the service's modules
        assert not started & {"mcp", "palui.gateway.http", "pydantic_ai", "palui.runner.turn_runner"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        r = httpx.post(url + "/mcp", json=init, timeout=120, headers={
            "Authorization": f"Bearer {client['token']}", "Accept": "application/json, text/event-stream"})
        assert r.status_code == 200, r.text
        assert {"mcp", "palui.gateway.http"} <= modules()
    finally:
        proc.terminate()
        proc.wait(120)


@pytest.mark.slow
def test_the_first_turns_at_once_after_a_start_all_run(home, tmp_path):
    # The model library is imported by the first turn in a worker thread (0190); several first turns at once once
    # imported it in two threads together, or on the event loop beside the thread, and got a half-initialised
    # module (ImportError, a 500). Each must run.
    import concurrent.futures

    import httpx

    from support.scripts import write_script

    model = write_script(tmp_path / "hi.json", {"text": "hello"})
    with LiveService(home, process=True) as s:
        def turn(i: int) -> int:
            r = httpx.post(s.url + "/api/turns", json={"message": f"hi {i}", "model": model}, headers=s.auth,
                           timeout=120)
            return r.status_code

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(turn, range(8)))
        assert codes == [200] * 8, (codes, s.log_text()[-2000:])
