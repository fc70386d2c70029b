"""What a CLI command costs before it does anything: ``palui --help``, the read-only commands, ``python3 -c pass``.

Each is a whole process (``python -m palui …`` with the benchmark's interpreter), run in
turn, round-robin, on one fresh PALUI_HOME (the database and the bytecode caches are made by an
untimed first run; ``PYTHONDONTWRITEBYTECODE`` is dropped, as a person's shell does not set it). CPU is
the process's user + system time (``resource.getrusage(RUSAGE_CHILDREN)``), so machine load
moves it less than wall time; both are printed. Target (docs/decisions/0085-a-light-cli-start.md): ≤ 0.12 s CPU each.

Usage: ``.venv/bin/python bench/cli_start.py [--runs N] [--callgrind [--before CHECKOUT]]`` (default 15). With
``--before`` (another checkout with its own ``.venv``, e.g. the previous main) the instruction counts of both
are printed side by side, the two sides run alternately, command by command. Also prints which
heavy modules each command imported (rich, pydantic, httpx, asyncio, mcp, the model library). With
``--callgrind`` each command also runs once under ``valgrind --tool=callgrind`` and its instruction count
(whole process, the interpreter's start included) is printed: unlike CPU time it does not move with the
machine's load. Targets in instructions: ``palui --help`` and every read-only command (``tools list``,
``status``, ``approvals list``, ``audit``, ``conversations list``, ``jobs list``) ≤ 250 M.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from common import QUICK_HELP, ROOT, quick

HEAVY = ("rich", "pydantic", "pydantic_ai", "httpx", "asyncio", "mcp", "apprise", "starlette", "uvicorn", "sqlite3")


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        raise SystemExit(f"{args} exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def imported(cmd: list[str], env: dict[str, str]) -> list[str]:
    """The heavy top-level packages a command imports (run once more under ``-X importtime``)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "palui", *cmd], env=env, capture_output=True,
                       text=True)
    names = {line.split("|")[-1].strip().split(".")[0] for line in r.stderr.splitlines() if "|" in line}
    return sorted(n for n in names if n in HEAVY)


def instructions(args: list[str], env: dict[str, str]) -> int:
    """Instructions one whole process executes (callgrind's ``summary:`` line)."""
    with tempfile.NamedTemporaryFile(prefix="palui-bench-cg-", suffix=".out") as out:
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}", *args], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode:
            raise SystemExit(f"valgrind {args} exited {r.returncode}: {r.stderr.decode()[-500:]}")
        m = re.search(r"^(?:summary|totals): (\d+)", open(out.name).read(), re.M)
    assert m, "no summary line in the callgrind output"
    return int(m.group(1))


READ_ONLY = (["tools", "list"], ["status"], ["approvals", "list"], ["audit"], ["conversations", "list"],
             ["jobs", "list"])


def main(runs: int, callgrind: bool = False, before: str | None = None) -> None:
    home = tempfile.mkdtemp(prefix="palui-bench-cli-")
    # A person's Python writes bytecode caches on first import; a shell with PYTHONDONTWRITEBYTECODE
    # (this machine's sessions) would make every run compile every module from source instead.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PALUI_HOME=home, PYTHONPATH=str(ROOT / "src"))
    cases = {
        "python3 -c pass": [sys.executable, "-c", "pass"],
        "palui --help": [sys.executable, "-m", "palui", "--help"],
        **{"palui " + " ".join(c): [sys.executable, "-m", "palui", *c] for c in READ_ONLY},
    }
    run(cases["palui tools list"], env)  # creates the database (migrations) and the bytecode caches, untimed
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    wall: dict[str, list[float]] = {k: [] for k in cases}
    names = list(cases)
    for i in range(runs + 1):
        for name in names[i % len(names):] + names[:i % len(names)]:
            c, w = run(cases[name], env)
            if i:
                cpu[name].append(c)
                wall[name].append(w)
    print(f"CLI start ({time.strftime('%Y-%m-%d %H:%M')}, {runs} runs each, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cpu, load average {os.getloadavg()[0]:.1f})")
    base = statistics.median(cpu["python3 -c pass"])
    print(f"  {'':<28}{'CPU median':>12}{'CPU min':>10}{'wall median':>13}{'x pass':>9}")
    for name in cases:
        m, w = statistics.median(cpu[name]), statistics.median(wall[name])
        print(f"  {name:<28}{m * 1000:>10.0f}ms{min(cpu[name]) * 1000:>8.0f}ms{w * 1000:>11.0f}ms{m / base:>8.1f}x")
    for name, cmd in (("palui --help", ["--help"]), *(("palui " + " ".join(c), c) for c in READ_ONLY)):
        print(f"  {name} imports: {', '.join(imported(cmd, env)) or 'none of ' + json.dumps(HEAVY)}")
    if callgrind:
        other = None
        if before:  # the same commands with the other checkout's interpreter and sources, on a home of its own
            other_home = tempfile.mkdtemp(prefix="palui-bench-cli-before-")
            other = {**env, "PALUI_HOME": other_home, "PYTHONPATH": os.path.join(before, "src")}
            py = os.path.join(before, ".venv", "bin", "python")
            run([py, "-m", "palui", "tools", "list"], other)  # its database and bytecode caches, untimed
        print(f"  instructions (callgrind, one run each; load average {os.getloadavg()[0]:.1f}):"
              + (f"  this checkout | {before}" if before else ""))
        for name, args in cases.items():
            mine = instructions(args, env) / 1e6
            if other is None:
                print(f"  {name:<28}{mine:>10.0f} M")
                continue
            theirs = instructions([py, *args[1:]], other) / 1e6
            print(f"  {name:<28}{mine:>10.0f} M {theirs:>10.0f} M {mine / theirs:>7.2f}x")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=quick(15, 1))
    ap.add_argument("--callgrind", action="store_true", help="also count instructions (valgrind, one run each)")
    ap.add_argument("--before", help="with --callgrind: another checkout (its .venv) measured beside this one")
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    main(a.runs, a.callgrind, a.before)
