"""Service API part: scheduled jobs and inbound webhooks (SPEC §8)."""

from __future__ import annotations

from palui.api.base import ServiceBase


class TriggersAPI(ServiceBase):
    """Jobs and webhooks."""
