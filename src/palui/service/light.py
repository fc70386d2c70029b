"""A service of read parts, for the read-only commands: each builds only the part it reads.

A CLI command imports only what it needs (its start cost, docs/decisions/0085-a-light-cli-start.md). The
read-only commands (``palui tools list``, ``status``, ``approvals list``, ``audit``, ``conversations list``,
``jobs list``) read rows; building the whole :class:`~palui.service.api.Service` for them would import every
part, and with them the runner, the MCP connectors and the model library. They use :class:`ReadService`
instead: the same shared collaborators (:mod:`palui.service.collaborators`: the settings check, the database and
its migrations), the built-in tools stored as the full service stores them, and one part per command, built
when the command first reads it (so importing its module is that command's alone). The other start-up step
(the sweep of expired approvals) and ``palui serve``'s policy check are left to the next full service; none
of it changes what these commands show (an expired approval is shown expired whether swept or not).

Its parts are the full service's of the same names and classes (``tools``, ``status``, ``audit``), or the read
part the full one answers its ``list`` through (``approvals``, ``conversations``, ``jobs``:
:mod:`palui.service.reads`), so a read is one query whichever service runs it (``tests/test_cli_start.py``
checks both agree).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from palui.config import Settings
from palui.service.collaborators import Collaborators
from palui.service.tools import ToolsPart
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.service.audit import AuditPart
    from palui.service.reads import ApprovalReads, ConversationReads, JobReads
    from palui.service.status import StatusPart

#: The parts of :class:`ReadService` that are the full service's parts themselves (same names and classes).
LIGHT_PARTS = ("tools", "status", "audit")
#: The parts of :class:`ReadService` that are the read part a full part holds as ``reads`` (same name).
READ_PARTS = ("approvals", "conversations", "jobs")


class ReadService:
    """The read parts only, for read-only commands; each part is built on first use.

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

    settings: Settings
    db: Database  # for tests only, as on the full service
    tools: ToolsPart

    def __init__(self, settings: Settings | None = None) -> None:
        self._home = home = Collaborators.open(settings)
        self.settings, self.db = home.settings, home.db
        self.tools = ToolsPart(home.db, home.settings, home.hub, home.redecision.redecide_approvals)
        self.tools.register_builtins()

    @cached_property
    def status(self) -> StatusPart:
        """:class:`~palui.service.status.StatusPart` (connector states read from their stored rows)."""
        from palui.service.channels import ChannelsPart
        from palui.service.status import StatusPart

        h = self._home
        channels = ChannelsPart(h.db, h.settings, h.notifier, h.clock)
        return StatusPart(h.db, h.settings, h.hub, h.notifier, h.clock, self.tools, channels)

    @cached_property
    def audit(self) -> AuditPart:
        """:class:`~palui.service.audit.AuditPart`."""
        from palui.service.audit import AuditPart

        return AuditPart(self._home.db, self._home.notifier, self._home.clock)

    @cached_property
    def approvals(self) -> ApprovalReads:
        """:class:`~palui.service.reads.ApprovalReads` (pending ones re-decided first, as on the full service)."""
        from palui.service.reads import ApprovalReads

        return ApprovalReads(self._home.db, self._home.redecision.redecide_approvals)

    @cached_property
    def conversations(self) -> ConversationReads:
        """:class:`~palui.service.reads.ConversationReads`."""
        from palui.service.reads import ConversationReads

        return ConversationReads(self._home.db)

    @cached_property
    def jobs(self) -> JobReads:
        """:class:`~palui.service.reads.JobReads`."""
        from palui.service.reads import JobReads

        return JobReads(self._home.db, self._home.settings, self._home.clock)
