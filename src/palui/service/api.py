"""The service: :class:`Service` builds the shared collaborators and each part once, and exposes the parts
(the diagram is in :mod:`palui.service`; why parts and not a facade of forwards: docs/decisions/
0185-the-service-exposes-its-parts.md).

Kept out of the package's ``__init__`` so that importing one part (``palui.service.tools``)
does not import every other part (a command imports only what it needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palui.config import Settings
from palui.service.approvals import ApprovalsPart
from palui.service.audit import AuditHeadPost, AuditPart
from palui.service.brake import BrakePart
from palui.service.channel_updates import ChannelUpdatesPart
from palui.service.channels import ChannelsPart
from palui.service.collaborators import Collaborators
from palui.service.connector_import import ConnectorImportPart
from palui.service.connectors import ConnectorsPart
from palui.service.conversations import ConversationsPart
from palui.service.elicitations import ElicitationsPart
from palui.service.gateway import GatewayPart
from palui.service.gateway_content import GatewayContentPart
from palui.service.jobs import JobsPart
from palui.service.live import LivePart
from palui.service.mail_records import MailRecordsPart
from palui.service.maintenance import MaintenancePart
from palui.service.memories import MemoriesPart
from palui.service.notifier import Notices
from palui.service.outbox import OutboxPart
from palui.service.policy import PolicyPart
from palui.service.report import ReportPart
from palui.service.rules import RulesPart
from palui.service.runtime import Runtime
from palui.service.scheduler import Scheduler
from palui.service.signin import SignInPart
from palui.service.status import StatusPart
from palui.service.suggestions import SuggestionsPart
from palui.service.tools import ToolsPart
from palui.service.turn_tasks import TurnTasks
from palui.service.turns import TurnsPart
from palui.service.webhooks import WebhooksPart
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.connectors.mcp.config import TransportFactory


class Service:
    """Palui's service over one ``PALUI_HOME`` (settings + database): its parts, built once.

    A front end calls a part: ``svc.approvals.answer(…)``, ``svc.channels.pair_code(…)``,
    ``svc.gateway.call(…)``. Each part is one concept (its module is named after its class); what it
    returns are the result types of :mod:`palui.results`. The shared collaborators the parts hold (the
    connector hub, the clock, the re-decision of approvals, the turn tasks, the job scheduler) are private:
    a front end never touches them, nor ``db`` (tests/test_architecture.py).

    Args:
        settings: validated settings; ``None`` loads them from the environment.
        mcp_transport: how MCP connectors reach their servers (the test suite runs its own servers in
            its process: :data:`~palui.connectors.mcp.config.TransportFactory`); None: their real
            transports. No setting or command sets it.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).
    """

    settings: Settings
    db: Database  # for tests and the benches only: front ends never read it (tests/test_architecture.py)
    tools: ToolsPart
    connectors: ConnectorsPart
    connector_import: ConnectorImportPart
    signin: SignInPart
    policy: PolicyPart
    suggestions: SuggestionsPart
    report: ReportPart
    audit: AuditPart
    memories: MemoriesPart
    maintenance: MaintenancePart
    channels: ChannelsPart
    outbox: OutboxPart
    mail_records: MailRecordsPart
    status: StatusPart
    turns: TurnsPart
    conversations: ConversationsPart
    elicitations: ElicitationsPart
    approvals: ApprovalsPart
    channel_updates: ChannelUpdatesPart
    live: LivePart
    gateway: GatewayPart
    gateway_content: GatewayContentPart
    brake: BrakePart
    jobs: JobsPart
    webhooks: WebhooksPart
    notifier: Notices  # the person's channel as front ends see it: the inbox, notices, delivery targets
    runtime: Runtime

    def __init__(self, settings: Settings | None = None, *, mcp_transport: TransportFactory | None = None) -> None:
        home = Collaborators.open(settings, mcp_transport)
        self.settings, self.db = home.settings, home.db
        self._clock, self._redecision, self._hub = home.clock, home.redecision, home.hub
        self.notifier = home.notifier
        db, settings, clock, notifier, hub = home.db, home.settings, home.clock, home.notifier, home.hub
        redecide = home.redecision.redecide_approvals
        # Each part is built after every part it holds a reference to: the order is the parts' DAG.
        self._turn_tasks = TurnTasks()
        self.tools = ToolsPart(db, settings, hub, redecide)
        self.connectors = ConnectorsPart(db, settings, hub, notifier, clock, self.tools, redecide)
        self.connector_import = ConnectorImportPart(db, self.connectors)
        self.signin = SignInPart(db, settings, hub, self.connectors, redecide)
        self.policy = PolicyPart(settings, notifier, self.tools)
        self.suggestions = SuggestionsPart(self.tools)
        self.report = ReportPart(db, clock, self.tools)
        self.audit = AuditPart(db, notifier, clock)
        self.memories = MemoriesPart(db)
        self.maintenance = MaintenancePart(db, settings, clock)
        self.channels = ChannelsPart(db, settings, notifier, clock)
        self.outbox = OutboxPart(db, settings, clock)
        self.mail_records = MailRecordsPart(db, clock)
        self.status = StatusPart(db, settings, hub, notifier, clock, self.tools, self.channels)
        self.turns = TurnsPart(db, settings, hub, notifier, clock, self.tools, self.status, self._turn_tasks)
        self.conversations = ConversationsPart(db, self.turns, self.status)
        self.elicitations = ElicitationsPart(db, self.conversations, self.turns)
        # the standing approvals (spec §5.9) are the approvals part's own, public there: svc.approvals.rules
        self.approvals = ApprovalsPart(db, notifier, redecide, self.conversations, self.elicitations, self.turns,
                                       RulesPart(db, settings, notifier))
        self.channel_updates = ChannelUpdatesPart(db, clock, self.channels, self.turns)
        self.live = LivePart(db, self._turn_tasks, self.turns, self.status, self.approvals)
        self.gateway = GatewayPart(db, clock, self.tools, self.turns)
        self.gateway_content = GatewayContentPart(db, self.turns, self.gateway)
        self.brake = BrakePart(db, notifier, clock, self.turns)
        self.jobs = JobsPart(db, settings, notifier, clock, self.turns, self.brake)
        self.webhooks = WebhooksPart(db, settings, clock, self.turns)
        self._scheduler = Scheduler(db, settings, notifier, clock, self.jobs, self.brake, self.turns,
                                    self._turn_tasks)
        # ``palui serve``: the policy file is checked before the tick starts (it switches off what would be
        # looser than pinned, and never raises: PolicyPart.enforce_file).
        self.runtime = Runtime(db, hub, clock, self._turn_tasks, self.turns, self.maintenance, redecide,
                               tickers=(self._scheduler.tick, AuditHeadPost(self.audit, clock).tick),
                               before_start=self.policy.enforce_file)
        self._start_up()

    def _start_up(self) -> None:
        """The start-up steps of every service, in this order: the built-in connectors and tools are
        stored as this version defines them, then expired approvals are swept (spec §5), so the sweep
        sees the catalog of this version."""
        self.tools.register_builtins()
        self.approvals.sweep_expired()

    async def close(self) -> None:
        """Close the connectors this process started (MCP servers' sessions and processes)."""
        await self._hub.close()
