"""Stored and printed JSON stays strict (spec §10.1): every writer refuses ``NaN`` and ``Infinity``.

Python's ``json`` writes them unless told not to, and SQLite's JSON functions, browsers and Starlette's responses
then refuse the row or the answer. Every ``json.dumps``/``json.dump``/``JSONEncoder`` of ``src/palui`` passes
``allow_nan=False``; the few that write what a model sent (the ``script:`` model's streamed arguments, a model's
call kept in its history as text) say ``allow_nan=True`` and are listed here with their reason. Readers of rows an
earlier Palui wrote with such numbers show them as strings.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from palui.text.strict_json import dumps, finite, non_finite

SRC = Path(__file__).resolve().parents[1] / "src" / "palui"
#: Where a writer may keep NaN, and why: neither is stored or printed as JSON.
MODEL_TEXT = {
    "models.py": "the script model replays a model's arguments as the JSON text a provider sends, NaN included",
    "runner/pending.py": "a model's call kept in its history as the text it sent (a string, not JSON at rest)",
}


def _writers(path: Path) -> list[tuple[int, object]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "json"
                and node.func.attr in ("dumps", "dump", "JSONEncoder")):
            given = next((k.value for k in node.keywords if k.arg == "allow_nan"), None)
            out.append((node.lineno, given.value if isinstance(given, ast.Constant) else given))
    return out


def test_every_json_writer_refuses_nan():
    loose = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, allow in _writers(path):
            if allow is False or (allow is True and rel in MODEL_TEXT):
                continue
            loose.append(f"{rel}:{line} (allow_nan={allow})")
    assert loose == [], f"JSON writers that would write NaN: {loose}"


def test_the_helpers():
    with pytest.raises(ValueError):
        dumps({"a": math.nan})
    assert finite({"a": [math.nan, math.inf, -math.inf, 1.5], "b": "NaN"}) == {
        "a": ["NaN", "Infinity", "-Infinity", 1.5], "b": "NaN"}
    same = {"a": [1, 2]}
    assert finite(same) is same and not non_finite(same) and non_finite([{"x": math.inf}])
