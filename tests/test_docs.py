"""The README stays true: every configuration key is documented with its default, and the
test command it shows is the one .ci/run runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from palui.config import documented_keys

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _default_text(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return "[]" if isinstance(value, list) else "{}"
    return str(value)


@pytest.mark.parametrize("key,default", sorted(documented_keys().items()))
def test_every_config_key_is_in_the_readme_with_its_default(key, default):
    rows = [line for line in README.splitlines() if line.startswith(f"| `{key}` |")]
    assert rows, f"README.md does not document the configuration key {key}"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1].split(" ")[0] == _default_text(default), f"README.md shows a wrong default for {key}"


def test_readme_test_command_is_the_ci_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash .ci/run" in README
    assert ".venv/bin/python -m pytest -q" in README
    assert "\n.venv/bin/python -m pytest -q" in ci
    assert "set -euo pipefail" in ci


def test_readme_links_decisions():
    assert "docs/decisions.md" in README
    assert (ROOT / "docs" / "decisions.md").is_file()
