"""``palui jobs …`` and ``palui webhooks …`` (SPEC §8)."""

from __future__ import annotations
