"""Shared pieces of the benchmarks: a throwaway PALUI_HOME, timing and the printed table.

Every benchmark runs Palui and a baseline side by side in one process, alternating, so
machine load hits both alike, and prints per-operation percentiles and their ratio.
Nothing here asserts on time: the numbers are for reading (see bench/README.md).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

#: ``--quick``: every bench runs so in ``.ci/run`` (a few rounds on small data, seconds each), so one that no
#: longer runs fails CI; its numbers are not for reading. Each bench's parser accepts the flag (``QUICK_HELP``).
QUICK = "--quick" in sys.argv[1:]
QUICK_HELP = "a few rounds on small data (seconds): checks that the bench runs; the numbers are not for reading"

#: The checkout measured: this one, or ``PALUI_BENCH_CHECKOUT`` (the previous main, run with its own venv, so
#: one bench script measures both sides: ``PALUI_BENCH_CHECKOUT=/work/base /work/base/.venv/bin/python bench/…``).
ROOT = Path(os.environ.get("PALUI_BENCH_CHECKOUT") or Path(__file__).resolve().parent.parent).resolve()
sys.path.insert(0, str(ROOT / "src"))  # run from a checkout without installing


def fresh_home(**settings: str) -> Path:
    """Point PALUI_HOME at a new temp dir and set ``PALUI_<KEY>`` variables (caps lifted for benches)."""
    for k in list(os.environ):
        if k.startswith("PALUI_"):
            del os.environ[k]
    home = Path(tempfile.mkdtemp(prefix="palui-bench-"))
    os.environ["PALUI_HOME"] = str(home)
    defaults = {"CAPS__RUNS_PER_HOUR": "10000", "CAPS__DAILY_TOKENS": "1000000000"}  # the tops of their ranges or under
    for k, v in {**defaults, **settings}.items():
        os.environ[f"PALUI_{k}"] = v
    return home


def quick(full: T, small: T) -> T:
    """``small`` under ``--quick``, else ``full``: a size or round count of a bench."""
    return small if QUICK else full


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (0-100), nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def report(title: str, unit: str, rows: dict[str, list[float]], baseline: str) -> None:
    """Print p50/p99/mean per row (values in ``unit``) and each row's ratio to ``baseline``."""
    print(f"\n{title}  (n={len(next(iter(rows.values())))}, python {platform.python_version()}, "
          f"{os.cpu_count()} cpu, {time.strftime('%Y-%m-%d')})")
    print(f"  {'':<32}{'p50':>10}{'p99':>10}{'mean':>10}   {'x p50':>7}{'x p99':>7}")
    b50, b99 = pct(rows[baseline], 50), pct(rows[baseline], 99)
    for name, v in rows.items():
        p50, p99, mean = pct(v, 50), pct(v, 99), statistics.fmean(v)
        print(f"  {name:<32}{p50:>8.3f}{unit:>2}{p99:>8.3f}{unit:>2}{mean:>8.3f}{unit:>2}"
              f"   {p50 / b50:>6.2f}x{p99 / b99:>6.2f}x")


#: The line a side run for ``--before`` prints its figures on, as JSON, for the side that started it.
RESULT_MARK = "BENCH-RESULT "


def before_side(before: str | None, args: list[str]) -> subprocess.Popen[str] | None:
    """Start this bench for the checkout at ``before`` (its own ``.venv``, its ``src`` first: ``ROOT``), in a
    process of its own at the same time as this one, so both sides share the machine's load; None when
    ``before`` is not given. ``args`` are the bench's own (``--before`` left out). Read it with
    :func:`before_result`."""
    if not before:
        return None
    python = Path(before) / ".venv" / "bin" / "python"
    env = {**os.environ, "PALUI_BENCH_CHECKOUT": str(Path(before).resolve())}
    return subprocess.Popen([str(python), sys.argv[0], *args], env=env, stdout=subprocess.PIPE, text=True)


def before_result(proc: subprocess.Popen[str] | None) -> tuple[str, dict | None]:
    """The ``before`` side's printed report and its figures (the :data:`RESULT_MARK` line); ("", None)
    without one. Raises SystemExit when the side failed."""
    if proc is None:
        return "", None
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"the before side exited {proc.returncode}:\n{out[-2000:]}")
    lines = out.splitlines()
    mark = [line for line in lines if line.startswith(RESULT_MARK)]
    text = "\n".join(line for line in lines if not line.startswith(RESULT_MARK))
    return text, json.loads(mark[-1][len(RESULT_MARK):]) if mark else None


def print_result(figures: dict) -> None:
    """Print this side's figures for the side that started it (:func:`before_side`)."""
    print(RESULT_MARK + json.dumps(figures), flush=True)


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes), as printed beside every figure."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
