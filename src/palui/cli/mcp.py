"""``palui`` commands: mcp."""

from __future__ import annotations
