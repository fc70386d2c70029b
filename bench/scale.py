"""Does a turn cost the same after a year of use and with a thousand tools? (decision records 0072-0080)

Every part runs its cases side by side in one process, round-robin turn by turn (so machine
load hits all alike), and prints the median CPU time (``time.process_time``) per operation
and its ratio to the smallest case. The turn is the one of ``turn_overhead.py``: the
``script:`` model asks for ``recall__search_memories``, the tool runs, the model answers.

Parts (``--part``, default all):

- ``history``: per-turn CPU with 0 / 1,000 / 10,000 / 100,000 stored turns, all of today
  (the last 20 hours) and spread over a year (target ≤ 1.3× at 100,000);
- ``catalog``: per-turn CPU with 39 / 300 / 1,000 / 3,000 enabled tools (9 built-in, the rest
  MCP over connectors of 25; target ≤ 1.5× at 3,000); ``select()`` over 1,000 tools (≤ 5 ms)
  and the offering step over 1,000 tools (≤ 10 ms);
- ``sync``: ``sync_tools`` storing a new listing of 300 / 3,000 tools (linear: ≤ 12×);
- ``conversation``: per-turn CPU with 0 / 100 / 1,000 earlier turns in the conversation (≤ 1.3×);
- ``web``, ``cli``, ``idle`` (``bench/reads.py``): ``GET /chat`` and ``GET /approvals``; ``palui approvals
  list``, ``status`` and ``audit``; an idle ``palui serve``, on homes of 0 to 100,000 stored turns and
  one of 1,000,000 stored approvals (≤ 1.3× the empty home; idle ≤ 0.5 % of a core);
- ``process``: a whole ``palui run`` process (CPU of it and its children) with a 1,000-tool
  MCP server connected, the turn calling none of its tools, against the same turn with no
  server (≤ 1.5×).

Usage: ``.venv/bin/python bench/scale.py [--part P] [--rounds N]``. Homes are left in
``/tmp/palui-bench-*``. No thresholds are asserted: read the numbers (bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fill
from common import QUICK_HELP, ROOT, quick

QUESTION = "Search my memories: do I need to buy milk?"
SCRIPT = {"steps": [
    {"tool_calls": [{"tool": "recall__search_memories", "args": {"query": "milk"}}],
     "usage": {"input_tokens": 400, "output_tokens": 20}},
    {"text": "Yes: you saved 'buy milk'.", "usage": {"input_tokens": 450, "output_tokens": 12}},
]}
LIFTED = {"PALUI_CAPS__RUNS_PER_HOUR": "10000", "PALUI_CAPS__DAILY_TOKENS": "100000000000",
          "PALUI_CAPS__TIMEZONE": "UTC"}


def make_home(label: str) -> tuple[Path, str]:
    home = Path(tempfile.mkdtemp(prefix=f"palui-bench-{label}-"))
    path = home / "bench-script.json"
    path.write_text(json.dumps(SCRIPT))
    return home, f"script:{path}"


def service(home: Path):
    from palui.config import load_settings
    from palui.service import Service
    from palui.store import memories

    svc = Service(load_settings({"PALUI_HOME": str(home), **LIFTED}))
    for text in ("buy milk", "dentist on Tuesday", "call Ana about the flat", "oat milk, not cow's milk"):
        memories.add_memory(svc.db, text, memories.TRUSTED, "bench", None)
    return svc


def median_ms(v: list[float]) -> float:
    return statistics.median(v) * 1000


def table(title: str, rows: dict[str, list[float]], base: str) -> None:
    print(f"\n{title}  (median of {len(next(iter(rows.values())))}, CPU ms per operation)")
    b = median_ms(rows[base])
    for name, v in rows.items():
        m = median_ms(v)
        print(f"  {name:<44}{m:>9.2f} ms   {m / b:>6.2f}x   (p90 {sorted(v)[int(len(v) * 0.9)] * 1000:.2f} ms)")


async def round_robin(cases: dict, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Run each case's coroutine factory once per round, in rotating order; CPU seconds per call
    (a case that returns a number measured its own part: that number is taken instead)."""
    out: dict[str, list[float]] = {k: [] for k in cases}
    names = list(cases)
    for i in range(warmup + rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            t0 = time.process_time()
            own = await cases[name]()
            dt = time.process_time() - t0 if own is None else own
            if i >= warmup:
                out[name].append(dt)
    return out


def turn_case(svc, model: str, conversation=None):
    async def go() -> None:
        conv = conversation() if callable(conversation) else conversation
        r = await svc.turns.send(QUESTION, model=model, conversation=conv)
        assert r["status"] == "done" and r["usage"]["steps"] == 2, r
        assert any(e["type"] == "tool_call" and not e["is_error"] for e in r["events"]), r["events"]
    return go


# -- history ------------------------------------------------------------------------------------------

async def part_history(rounds: int) -> None:
    cases, tpl = {}, None
    for spread in ("today", "year"):
        for n in quick((0, 1_000, 10_000, 100_000), (0, 200)):
            if n == 0 and spread == "year":
                continue
            when = "all of today" if spread == "today" else "over a year"
            label = f"{n} stored turns" + ("" if n == 0 else f", {when}")
            home, model = make_home(f"h{n}{spread[0]}")
            svc = service(home)
            if tpl is None:
                r = await svc.turns.send(QUESTION, model=model)
                tpl = fill.template(svc.db, r["turn"])
            t0 = time.perf_counter()
            fill.clone_turns(svc.db, tpl, fill.history_times(n, spread))
            if n:
                size = svc.settings.db_path.stat().st_size >> 20
                print(f"  filled {label} in {time.perf_counter() - t0:.1f} s ({size} MiB)", file=sys.stderr)
            cases[label] = turn_case(svc, model)
    table("per-turn CPU by stored history (new conversation per turn)", await round_robin(cases, rounds, 3),
          "0 stored turns")


# -- catalog ------------------------------------------------------------------------------------------

class Idle:
    """Stands in for an MCP connector in the hub, so an offer that connects first finds it at once."""

    def __init__(self, cid: str) -> None:
        self.id, self.kind = cid, "mcp"

    async def list_tools(self):
        return []

    async def close(self) -> None:
        pass

    def state(self) -> str:
        return "connected"


async def part_catalog(rounds: int) -> None:
    cases, svcs = {}, {}
    for total in quick((39, 300, 1_000, 3_000), (39, 300, 1_000)):
        home, model = make_home(f"cat{total}")
        svc = service(home)
        for cid in fill.add_catalog(svc, total - 9):
            svc._hub._live[cid] = Idle(cid)  # bench only: nothing to start
        enabled = sum(1 for r in svc.tools.list() if r.enabled)
        label = f"{enabled} enabled tools"
        cases[label], svcs[total] = turn_case(svc, model), (svc, model)
    table("per-turn CPU by enabled catalog", await round_robin(cases, rounds, 3), next(iter(cases)))
    await offer_and_select(*svcs[1_000], rounds)


async def offer_and_select(svc, model: str, rounds: int) -> None:
    from palui.policy import budget
    from palui.runner import state as st
    from palui.runner.turn_runner import TurnRunner

    tid = svc.turns.start(QUESTION, model=model)
    t = st.load(svc.db, tid)
    runner = TurnRunner(svc.turns.runner_deps())
    offered: list[str] = []

    async def offer() -> None:
        nonlocal offered
        offered = await runner._offer(t)

    flip = next(r.name for r in svc.tools.list() if r.connector == "mcp-bench-039")

    async def offer_cold() -> float:
        # Switching one tool on or off changes the catalog (the version moves) and this situation's
        # candidates: the next offer re-reads the catalog and rebuilds what is derived from it, once.
        with svc.db.write() as c:
            c.execute("UPDATE tools SET enabled = 1 - enabled WHERE name = ?", (flip,))
        t0 = time.process_time()
        await offer()
        return time.process_time() - t0

    rows = await round_robin({"offering step, 1,000 tools": offer,
                              "the same right after a switch changed": offer_cold}, rounds * 3, 3)
    table("the offering step (TurnRunner._offer) over 1,000 enabled tools", rows, "offering step, 1,000 tools")
    print(f"  offered {len(offered)}: {', '.join(sorted({n.split('__')[0] for n in offered}))}")
    cands = [budget.Candidate(r.name, r.connector, r.connector in ("recall", "tasks", "web", "messages"),
                              f"{r.connector} {r.tool} {r.description}") for r in svc.tools.list() if r.enabled]
    index = budget.rank_index(cands) if hasattr(budget, "rank_index") else None

    async def sel() -> None:
        if index is None:
            budget.select(cands, QUESTION, 30)
        else:
            budget.select(cands, QUESTION, 30, index=index)

    rows = await round_robin({f"select() over {len(cands)} tools": sel}, rounds * 3, 3)
    table("select() (pure; the index is built once per catalog version)", rows, f"select() over {len(cands)} tools")
    if index is not None:
        t0 = time.process_time()
        budget.rank_index(cands)
        print(f"  building the ranking index once: {(time.process_time() - t0) * 1000:.2f} ms CPU")


# -- sync ----------------------------------------------------------------------------------------------

async def part_sync(rounds: int) -> None:
    from palui.connectors.registry import sync_tools
    from palui.store import tools as tools_store

    home, _ = make_home("sync")
    svc = service(home)
    specs = {n: fill.mcp_specs(n, seed=n) for n in quick((300, 3_000), (300,))}
    counter = iter(range(10**6))

    def case(n: int, again: bool):
        async def go() -> float | None:
            if again:
                sync_tools(svc.db, f"mcp-sync-{n}", specs[n], builtin=False)
                return None
            cid = f"mcp-new-{next(counter)}"
            tools_store.ensure_connector(svc.db, cid, "mcp", cid)
            t0 = time.process_time()
            sync_tools(svc.db, cid, specs[n], builtin=False)
            dt = time.process_time() - t0
            with svc.db.write() as c:  # the next round stores into a table of the same size
                c.execute("DELETE FROM tools WHERE connector_id = ?", (cid,))
                c.execute("DELETE FROM connectors WHERE id = ?", (cid,))
            return dt
        return go

    for n in specs:
        tools_store.ensure_connector(svc.db, f"mcp-sync-{n}", "mcp", f"mcp-sync-{n}")
        sync_tools(svc.db, f"mcp-sync-{n}", specs[n], builtin=False)
    rows = await round_robin({f"new listing of {n} tools": case(n, False) for n in specs}, max(3, rounds // 5), 1)
    table("sync_tools: storing a new listing", rows, "new listing of 300 tools")
    rows = await round_robin({f"unchanged listing of {n} tools": case(n, True) for n in specs}, max(3, rounds // 5), 1)
    table("sync_tools: the same listing again (every connection)", rows, "unchanged listing of 300 tools")


# -- conversation --------------------------------------------------------------------------------------

async def part_conversation(rounds: int) -> None:
    cases, tpl = {}, None
    for n in quick((0, 100, 1_000), (0, 20)):
        home, model = make_home(f"conv{n}")
        svc = service(home)
        if tpl is None:
            r = await svc.turns.send(QUESTION, model=model)
            tpl = fill.template(svc.db, r["turn"])
        if n == 0:
            cases["0 earlier turns (a new conversation)"] = turn_case(svc, model)
            continue
        cid = svc.turns.new_conversation()
        now = time.time()
        fill.clone_turns(svc.db, tpl, [now - 60 * (n - i) for i in range(n)], conversation=cid)
        cases[f"{n} earlier turns in the conversation"] = turn_case(svc, model, cid)
    table("per-turn CPU by conversation length", await round_robin(cases, rounds, 3),
          "0 earlier turns (a new conversation)")


# -- a whole process -----------------------------------------------------------------------------------

def part_process(rounds: int) -> None:
    from palui.config import load_settings
    from palui.connectors.mcp.config import ServerConfig
    from palui.service import Service

    hostile = ROOT / "tests" / "support" / "mcp_hostile.py"
    homes = {}
    for label, tools in (("no MCP server", 0), ("a 1,000-tool MCP server connected", quick(1_000, 30))):
        home, model = make_home("proc")
        svc = Service(load_settings({"PALUI_HOME": str(home), **LIFTED}))
        if tools:
            spec = home / "server.json"
            spec.write_text(json.dumps({"tools": [
                {"name": f"lookup_{i}", "description": f"look up record {i} in the archive",
                 "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
                 "annotations": {"readOnlyHint": True}, "behaviour": "echo"} for i in range(tools)]}))
            config = ServerConfig("stdio", command=sys.executable, args=(str(hostile), str(spec)))
            added = svc.connectors.add("archive", config, enable_read=True)
            print(f"  {added['id']}: {len(added['enabled'])} tools switched on", file=sys.stderr)
        svc.db.close()
        homes[label] = (home, model)

    def run(home: Path, model: str) -> float:
        # As a person's shell runs it: bytecode caches written (PYTHONDONTWRITEBYTECODE dropped).
        env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update({"PALUI_HOME": str(home), **LIFTED, "PYTHONPATH": str(ROOT / "src")})
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([sys.executable, "-m", "palui", "run", QUESTION, "--model", model, "--json"],
                           capture_output=True, text=True, env=env, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = json.loads(r.stdout)
        assert out["status"] == "done", (out, r.stderr[-2000:])
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    rows: dict[str, list[float]] = {k: [] for k in homes}
    names = list(homes)
    for i in range(rounds + 1):
        for name in names[i % 2:] + names[:i % 2]:
            dt = run(*homes[name])
            if i:
                rows[name].append(dt)
    table("a whole in-process `palui run` (CPU of the process and its children)", rows, "no MCP server")


PARTS = {"history": part_history, "catalog": part_catalog, "sync": part_sync, "conversation": part_conversation}
READS = ("web", "cli", "idle")  # bench/reads.py; run only when asked by name (they fill homes of 100,000 turns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=[*PARTS, "process", *READS, "all"], default="all")
    ap.add_argument("--rounds", type=int, default=quick(30, 2))
    ap.add_argument("--sizes", default=quick("0,1000,10000,100000", "0,100"),
                    help="stored turns per home (web, cli, idle)")
    ap.add_argument("--approvals", type=int, default=quick(1_000_000, 1_000),
                    help="stored approvals of the last home (web)")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="seconds an idle service runs before its window (idle: start-up work is not idle)")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    print(f"bench/scale.py  {time.strftime('%Y-%m-%d %H:%M')}, python {platform.python_version()}, "
          f"{os.cpu_count()} cpu, load average {os.getloadavg()[0]:.1f}")
    for name, fn in PARTS.items():
        if a.part in (name, "all"):
            asyncio.run(fn(a.rounds))
    if a.part in ("process", "all"):
        part_process(quick(max(3, a.rounds // 3), 1))
    if a.part in READS:
        import reads

        sizes = tuple(int(n) for n in a.sizes.split(","))
        if a.part == "idle":
            asyncio.run(reads.part_idle(a.rounds, sizes, 0, a.settle))
        else:
            fn = {"web": reads.part_web, "cli": reads.part_cli}[a.part]
            asyncio.run(fn(a.rounds, sizes, a.approvals if a.part == "web" else 0))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
