"""What a person's read and an idle service cost after a year of history (``bench/scale.py`` parts).

- ``web``: CPU of ``GET /chat`` and ``GET /approvals`` (the app in process, no lifespan: no tick runs) on
  homes with 0 / 1,000 / 10,000 / 100,000 stored turns (over a year), and one with 1,000,000 stored
  approvals over 100,000 turns (target ≤ 1.3× the empty home);
- ``cli``: CPU of the whole processes ``palui approvals list``, ``palui status`` and ``palui audit`` on the
  same homes (≤ 1.3× at 100,000 turns);
- ``idle``: CPU of an idle ``palui serve`` per home, all running at once, over the same window
  (≤ 0.5 % of a core at 100,000 turns).

Every case of a part runs round-robin in one process, so machine load hits all alike. Homes are filled by
cloning one real turn (``fill.py``); with ``PALUI_BENCH_CHECKOUT`` the same script measures another checkout.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import fill
from common import ROOT

SIZES = (0, 1_000, 10_000, 100_000)


def _label(n: int, approvals: int = 0) -> str:
    if approvals:
        return f"{approvals:,} approvals ({n:,} turns)"
    return "empty home" if n == 0 else f"{n:,} turns"


def add_approvals(db, n: int, seed: int = 5) -> None:
    """``n`` answered approvals spread over the stored turns (their times), and three pending ones."""
    rnd = random.Random(seed)
    turns = [(r[0], r[1]) for r in db.all("SELECT id, created_at FROM turns")]
    rows = []
    for i in range(n):
        tid, t = turns[i % len(turns)]
        status = ("approved", "denied", "expired", "cancelled")[rnd.randrange(4)]
        rows.append((f"a-{i:010x}", tid, f"s1c{i % 7}", "recall__forget_memory", "destructive", "builtin", "chat",
                     "ask: destructive", '{"id":1}', "0" * 64, "[]", status, t, t + 1800, t + 5,
                     int(status == "approved"), "cli"))
    now = time.time()
    for j in range(3):
        tid, _ = turns[-1 - j]
        rows.append((f"a-p{j:09x}", tid, "s1c1", "recall__forget_memory", "destructive", "builtin", "chat",
                     "ask: destructive", '{"id":1}', "0" * 64, "[]", "pending", now, now + 86400, None, 0, None))
    with db.write() as c:
        c.executemany("INSERT INTO approvals (id, turn_id, tool_call_id, tool, class, class_source, origin, reason,"
                      " args_json, args_hash, untrusted_args, status, created_at, expires_at, answered_at, used,"
                      " answered_via) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)


async def homes(sizes: tuple[int, ...], approvals: int) -> dict[str, tuple[Path, object]]:
    """label → (home, service) filled with history (turns over a year) and, for the last, approvals."""
    from scale import QUESTION, make_home, service

    out: dict[str, tuple[Path, object]] = {}
    tpl = None
    plan = [(n, 0) for n in sizes] + ([(max(sizes), approvals)] if approvals else [])
    for n, a in plan:
        home, model = make_home(f"r{n}-{a}")
        svc = service(home)
        r = await svc.turns.send(QUESTION, model=model)  # one real turn in every home
        if tpl is None:
            tpl = fill.template(svc.db, r["turn"])
        t0 = time.perf_counter()
        if n:
            fill.clone_turns(svc.db, tpl, fill.history_times(n, "year"))
        if a:
            add_approvals(svc.db, a)
        if n or a:
            size = svc.settings.db_path.stat().st_size >> 20
            print(f"  filled {_label(n, a)} in {time.perf_counter() - t0:.1f} s ({size} MiB)", file=sys.stderr)
        out[_label(n, a)] = (home, svc)
    return out


# -- web -------------------------------------------------------------------------------------------------

async def part_web(rounds: int, sizes: tuple[int, ...] = SIZES, approvals: int = 1_000_000) -> None:
    from scale import round_robin, table
    from starlette.testclient import TestClient

    from palui.server.app import create_app

    try:
        from palui.server.session import session_value
    except ImportError:  # the previous main kept it in the app's module
        from palui.server.app import session_value  # type: ignore[attr-defined,no-redef]

    made = await homes(sizes, approvals)
    clients = {}
    for label, (_home, svc) in made.items():
        app = create_app(svc, "tok", port=8765)  # no lifespan: the tick does not run while pages are measured
        clients[label] = TestClient(app, base_url="http://127.0.0.1:8765", follow_redirects=False,
                                    cookies={"palui_session": session_value("tok")})

    def case(client, path: str):
        async def go() -> None:
            r = client.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:500])
        return go

    base = _label(0)
    for path in ("/chat", "/approvals"):
        rows = await round_robin({label: case(c, path) for label, c in clients.items()}, rounds, 3)
        table(f"GET {path} (CPU of the request, the app in process)", rows, base)


# -- cli -------------------------------------------------------------------------------------------------

def _env(home: Path) -> dict[str, str]:
    from scale import LIFTED

    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"PALUI_HOME": str(home), **LIFTED, "PYTHONPATH": str(ROOT / "src")})
    return env


def _cpu_of(args: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-m", "palui", *args], capture_output=True, text=True, env=env, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, (args, r.stderr[-2000:])
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


async def part_cli(rounds: int, sizes: tuple[int, ...] = SIZES, approvals: int = 0) -> None:
    from scale import table

    made = await homes(sizes, approvals)
    for _home, svc in made.values():
        svc.db.close()
    commands = {"palui approvals list": ["approvals", "list"], "palui status": ["status"],
                "palui audit": ["audit"]}
    for title, args in commands.items():
        rows: dict[str, list[float]] = {k: [] for k in made}
        names = list(made)
        for i in range(rounds + 1):  # the first round writes the bytecode caches: not counted
            for name in names[i % len(names):] + names[:i % len(names)]:
                dt = _cpu_of(args, _env(made[name][0]))
                if i:
                    rows[name].append(dt)
        table(f"`{title}` (CPU of the whole process)", rows, _label(0))


# -- idle ------------------------------------------------------------------------------------------------

def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def part_idle(rounds: int, sizes: tuple[int, ...] = SIZES, approvals: int = 0,
                    settle: float = 10.0) -> None:
    made = await homes(sizes, approvals)
    procs = {}
    for label, (home, svc) in made.items():
        svc.db.close()
        env = _env(home)
        procs[label] = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], env=env,
                                        stdout=subprocess.DEVNULL, stderr=open(home / "serve.log", "wb"))
    try:
        for label, p in procs.items():
            info = made[label][0] / "serve.json"
            deadline = time.monotonic() + 120
            while not (info.exists() and json.loads(info.read_text() or "{}").get("pid") == p.pid):
                if p.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"palui serve ({label}) did not start: see {made[label][0] / 'serve.log'}")
                time.sleep(0.1)
        time.sleep(settle)  # start-up work (the sweep at start, the first ticks) is not idle
        window = max(10.0, float(rounds))
        start = {k: _proc_cpu(p.pid) for k, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(window)
        wall = time.monotonic() - t0
        used = {k: _proc_cpu(p.pid) - start[k] for k, p in procs.items()}
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(timeout=60)
    print(f"\nidle `palui serve`, every home at once, over {wall:.0f} s (CPU of the process, % of one core)")
    base = used[_label(0)] or 1e-9
    for label, cpu in used.items():
        print(f"  {label:<44}{cpu / wall * 100:>8.2f} %   {cpu / base:>6.2f}x   ({cpu * 1000:.0f} ms CPU)")

