"""A governed read through the gateway against the same read made directly to the upstream server (spec §8.6).

One upstream MCP server (``tests/support/mcp_hostile.py`` over streamable HTTP, a read tool that echoes
its arguments) is reached two ways from the same process, with the same SDK ``Client`` (the
client library both ways), alternating call by call so machine load hits both alike:

- **direct**: the SDK client connected to the upstream server in ``mode="auto"``, the protocol era Palui's
  own MCP client negotiates with it (2026-07-28 for this server), and, for reading only, in the
  initialize-handshake era the gateway speaks;
- **gateway**: the SDK client connected to ``/mcp`` of a real ``palui serve`` (a subprocess) with a
  gateway client's token; Palui holds the upstream server as a connector (its read tool switched on) and
  decides, runs and audits each call (origin ``gateway``, a tainted session: a read runs).

It prints the wall-clock p50/p99 of each and their ratio (the bar: the gateway's p50 at most 2.0x the direct
one), and the ``palui serve`` process's CPU time per gateway call (user + system from ``/proc``, over each
gateway call's window; the service's own tick runs in that window too; the bar: at most 3 ms).

The three clients take turns call by call, the order rotating each round, so machine load and any warm-up of one
order hit all three alike. Every gateway call must run (a refusal would measure Palui refusing): the bench's home
raises the gateway's caps above the calls it makes. The upstream server is always this checkout's
``tests/support/mcp_hostile.py`` (its listening socket says ``IPPROTO_TCP``, so asyncio sets ``TCP_NODELAY``: a
server without it adds Nagle's 40 ms per kept-alive call, which an earlier version of this bench measured as
Palui's); with ``PALUI_BENCH_CHECKOUT`` the service measured is that checkout's.

Usage: ``.venv/bin/python bench/gateway.py [--calls N] [--quick]``;
``PALUI_BENCH_CHECKOUT=/work/base /work/base/.venv/bin/python bench/gateway.py`` for the previous main. No
thresholds: numbers for reading.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, fresh_home, pct, report

#: The upstream server: this checkout's, whichever checkout's service is measured (see the module docstring).
HOSTILE = Path(__file__).resolve().parent.parent / "tests" / "support" / "mcp_hostile.py"
TOOL = "lookup"
DIRECT = "direct (SDK client, mode auto)"  # the era Palui's own MCP client speaks to the upstream server
HANDSHAKE = "direct (SDK client, handshake era)"
GATEWAY = "gateway (SDK client → /mcp → upstream)"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_upstream(home: Path) -> tuple[subprocess.Popen[str], str]:
    spec = home / "upstream.json"
    spec.write_text(json.dumps({"tools": [{
        "name": TOOL, "description": "Look a word up.", "behaviour": "echo", "annotations": {"readOnlyHint": True},
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}]}))
    proc = subprocess.Popen([sys.executable, str(HOSTILE), str(spec), "--http"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/mcp"


def start_service(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items()}
    env["PALUI_TICK_SECONDS"] = "1"
    log = open(home / "serve.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        info = _info(home)
        if info and info.get("pid") == proc.pid:
            return proc, f"http://127.0.0.1:{info['port']}"
        time.sleep(0.1)
    raise SystemExit(f"palui serve did not start: {(home / 'serve.log').read_text()[-2000:]}")


def _info(home: Path) -> dict | None:
    """The discovery file ``serve.json`` of ``home``'s data directory, once written."""
    for p in home.rglob("serve.json"):
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            return None
    return None


def raised_caps(calls: int) -> dict[str, str]:
    """The bench's home settings: every gateway cap above the calls it makes (the per-client cap only where the
    measured checkout has one)."""
    cap = str(min(10_000, 2 * calls + 100))
    out = {"CAPS__GATEWAY_CALLS_PER_HOUR": cap}
    if "gateway_client_calls_per_hour" in (ROOT / "src" / "palui" / "config_schema.py").read_text():
        out["CAPS__GATEWAY_CLIENT_CALLS_PER_HOUR"] = cap
    return out


async def main(calls: int, warmup: int) -> None:
    home = fresh_home(**raised_caps(calls + warmup))
    from palui.service import Service
    from palui.text.mcp_config import ServerConfig

    upstream, upstream_url = start_upstream(home)
    serve: subprocess.Popen[bytes] | None = None
    try:
        svc = Service()
        config = ServerConfig("http", url=upstream_url)
        if hasattr(svc, "mcp_add_async"):  # a checkout whose service is still a facade of forwards
            added = await svc.mcp_add_async("bench", config, enable_read=True)
            token = svc.gateway_client_add("bench")["token"]
        else:
            added = await svc.connectors.add_async("bench", config, enable_read=True)
            token = svc.gateway.add_client("bench")["token"]
        tool = f"{added['id']}__{TOOL}"
        await svc.close()
        serve, url = start_service(home)
        rows, cpu = await measure(url, upstream_url, token, tool, serve.pid, calls, warmup)
        report("A governed read through the gateway vs the same read direct", "ms", rows, DIRECT)
        print(f"  gateway p50 / direct p50: {pct(rows[GATEWAY], 50) / pct(rows[DIRECT], 50):.2f}x "
              "(the bar: at most 2.0x)")
        print(f"  palui serve CPU per gateway call: {cpu / calls * 1000:.2f} ms (the bar: at most 3 ms)")
        print(f"  measured: {ROOT}")
    finally:  # every process this bench started ends with it, whatever failed
        for proc in (serve, upstream):
            if proc is not None:
                proc.terminate()
                proc.wait(20)


async def measure(url: str, upstream_url: str, token: str, tool: str, pid: int, calls: int,
                  warmup: int) -> tuple[dict[str, list[float]], float]:
    """The three clients' wall times per call (ms), alternating, and the service's CPU seconds over the
    gateway calls."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=None)
    async with httpx2.AsyncClient(timeout=timeout) as plain, httpx2.AsyncClient(timeout=timeout) as plain2, \
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as authed:
        async with Client(streamable_http_client(upstream_url, http_client=plain), mode="auto") as direct, \
                Client(streamable_http_client(upstream_url, http_client=plain2), mode="legacy") as handshake, \
                Client(streamable_http_client(f"{url}/mcp", http_client=authed), mode="legacy") as gateway:
            for i in range(warmup):
                await direct.call_tool(TOOL, {"q": f"w{i}"})
                await handshake.call_tool(TOOL, {"q": f"w{i}"})
                r = await gateway.call_tool(tool, {"q": f"w{i}"})
                if r.is_error:
                    raise SystemExit(f"the gateway refused the read: {r.content}")
            rows: dict[str, list[float]] = {DIRECT: [], HANDSHAKE: [], GATEWAY: []}
            cpu = 0.0
            clients = {DIRECT: (direct, TOOL), HANDSHAKE: (handshake, TOOL), GATEWAY: (gateway, tool)}
            order = list(clients)
            for i in range(calls):
                for name in order[i % 3:] + order[:i % 3]:  # interleaved, the order rotating each round
                    client, name_called = clients[name]
                    c0, t0 = cpu_seconds(pid), time.perf_counter()
                    r = await client.call_tool(name_called, {"q": f"c{i}"})
                    rows[name].append((time.perf_counter() - t0) * 1000)
                    if name == GATEWAY:
                        cpu += cpu_seconds(pid) - c0
                        if r.is_error:
                            raise SystemExit(f"the gateway refused call {i}: {r.content}")
    return rows, cpu


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="a few calls: checks the bench runs (CI)")
    a = ap.parse_args()
    asyncio.run(main(20 if a.quick else a.calls, 3 if a.quick else 20))
