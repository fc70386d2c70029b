"""Service API part: the person's memories and tasks (SPEC §7: list, forget, trust)."""

from __future__ import annotations

from palui.api.base import ServiceBase


class MemoriesAPI(ServiceBase):
    """Memories and tasks as the person sees them."""
