"""Service API part: turns, approvals, status and audit (SPEC §3-§6, §9)."""

from __future__ import annotations

from palui.api.base import ServiceBase


class TurnsAPI(ServiceBase):
    """Running, pausing and resuming governed turns."""
