"""The benches cannot rot: every script under ``bench/`` takes ``--quick`` (a few rounds on small data) and
``.ci/run`` runs each of them so after the tests, a failing one failing the run (bench/README.md).

Timing is never asserted here or anywhere in the suite; this holds only that each bench is run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
# Benches .ci/run leaves out (none: policy.py and channel.py run again since the performance work fixed them).
LEFT_OUT: set[str] = set()


def scripts() -> list[str]:
    """The bench scripts: the files of bench/ that run as a program (common.py and fill.py are modules)."""
    return sorted(p.stem for p in BENCH.glob("*.py") if re.search(r'^if __name__ == "__main__":', p.read_text(), re.M))


def ci_benches() -> list[str]:
    """The benches .ci/run runs with --quick (its ``benches=(…)`` line)."""
    m = re.search(r"^benches=\(([^)]*)\)", (ROOT / ".ci" / "run").read_text(), re.M)
    assert m, ".ci/run has no benches=(…) line"
    return m.group(1).split()


def test_ci_runs_every_bench_with_quick():
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r'bench/\$bench\.py" "\$\{args\[@\]\}"', run) and "args=(--quick)" in run
    assert len(scripts()) >= 12
    assert sorted(ci_benches()) == sorted(set(scripts()) - LEFT_OUT)


@pytest.mark.slow
@pytest.mark.parametrize("name", scripts())
def test_every_bench_takes_quick(name):
    r = subprocess.run([sys.executable, str(BENCH / f"{name}.py"), "--help"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "--quick" in r.stdout
