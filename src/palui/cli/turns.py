"""``palui`` commands: turns."""

from __future__ import annotations
