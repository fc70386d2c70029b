"""``palui`` commands: memories."""

from __future__ import annotations
