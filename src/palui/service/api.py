"""The composed :class:`Service` (every part of :mod:`palui.service`, one flat object).

Kept out of the package's ``__init__`` so that importing one part (``palui.service.tools``)
does not import every other part (issue 11: a command imports only what it needs).
"""
from __future__ import annotations

from palui.service.audit_log import AuditLogPart
from palui.service.brake import BrakePart
from palui.service.channel_updates import ChannelUpdatesPart
from palui.service.live import LivePart
from palui.service.maintenance import MaintenancePart
from palui.service.mcp_signin import MCPSignInPart
from palui.service.memories import MemoriesPart
from palui.service.outside import OutsidePart
from palui.service.policy_pin import PolicyPinPart
from palui.service.report import ReportPart
from palui.service.suggestions import SuggestionsPart


class Service(BrakePart, ChannelUpdatesPart, MCPSignInPart, MemoriesPart, MaintenancePart, AuditLogPart,
              PolicyPinPart, SuggestionsPart, LivePart, OutsidePart, ReportPart):
    """Palui's service API over one ``PALUI_HOME`` (settings + database).

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

