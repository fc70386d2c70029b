"""Helpers to write ``script:`` model files for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def write_script(path: Path, *steps: dict[str, Any]) -> str:
    """Write a script file and return its model string ``script:PATH``."""
    path.write_text(json.dumps({"steps": list(steps)}), encoding="utf-8")
    return f"script:{path}"


def calls(*cs: dict[str, Any], usage: dict | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"tool_calls": list(cs)}
    if usage:
        step["usage"] = usage
    return step


def text(t: str, usage: dict | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"text": t}
    if usage:
        step["usage"] = usage
    return step
