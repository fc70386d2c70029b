"""The service: the one API every front end (CLI, HTTP routes, web pages, chat channels, the gateway) uses.

Front ends parse and print; everything else happens here or below (docs/architecture.md).
:class:`~palui.service.api.Service` builds the shared collaborators and each part once and exposes the
parts as typed attributes: a front end calls ``svc.approvals.answer(…)``, ``svc.channels.pair_code(…)``,
``svc.gateway.call(…)`` (docs/decisions/0185-the-service-exposes-its-parts.md). A part is a plain class,
one concept per module named after it; it inherits from no other part and reaches another only through a
reference given to its ``__init__`` (named ``<part>_part``). Built in this order, each part after the parts
it holds (``→``), so the parts form a DAG and the modules import no circle (``svc.`` names the attribute)::

    shared collaborators (collaborators.py), private to the service: settings, database, Clock (clock.py),
      the person's channel Notifier (notifier.py; front ends see its Notices protocol as svc.notifier),
      Redecision (re-decides pending approvals, suspends standing approvals whose tool changed: the lowest
      part), ConnectorHub (its on_change is
      Redecision's method: the hub, below the service, never sees a part)

    TurnTasks            the turn tasks of this process and their events    (turn_tasks.py)
    svc.tools            ToolsPart: connectors' rows, tools, classes,       (tools.py)            → redecide
                         switches, review, the Rule of Two's flags, explain
    svc.connectors       ConnectorsPart: MCP servers: add, refresh,         (connectors.py)       → Tools, redecide
                         remove, enable; the connectors as shown
    svc.connector_import ConnectorImportPart: an mcpServers file            (connector_import.py) → Connectors
    svc.signin           SignInPart: OAuth login, logout, the web sign-in   (signin.py)           → Connectors,
                                                                                                    redecide
    svc.policy           PolicyPart: snapshot, check, policy.check_file     (policy.py)           → Tools
    svc.suggestions      SuggestionsPart: classes for unknown tools         (suggestions.py)      → Tools
    svc.report           ReportPart: the governance report                  (report.py)           → Tools
    svc.audit            AuditPart: rows, verify, export, the daily head    (audit.py)
    svc.memories         MemoriesPart: memories and tasks                   (memories.py)
    svc.maintenance      MaintenancePart: retention and backups             (maintenance.py)
    svc.channels         ChannelsPart: chat channels, pairing, invites      (channels.py)
    svc.outbox           OutboxPart: the channels' durable outbox, what     (outbox.py)
                         they sent
    svc.mail_records     MailRecordsPart: the email channel's answer        (mail_records.py)
                         addresses and threads
    svc.status           StatusPart: /status, the pause, the webhook share  (status.py)           → Connectors,
                                                                                                    Channels
    svc.turns            TurnsPart: start, claim, launch, run, resume,      (turns.py)            → Tools, Status,
                         stop                                                                       TurnTasks
    svc.conversations    ConversationsPart: conversations and turns shown   (conversations.py)    → Turns, Status
    svc.elicitations     ElicitationsPart: the one door for a server's      (elicitations.py)     → Conversations,
                         questions                                                                  Turns
    svc.approvals.rules  RulesPart: standing approvals: list, make,         (rules.py)
                         remove, suspend (built for the approvals part,
                         public there: the answers given in advance)
    svc.approvals        ApprovalsPart: the one door for answers            (approvals.py)        → Conversations,
                                                                                                    Elicitations,
                                                                                                    Turns, Rules,
                                                                                                    redecide
    svc.channel_updates  ChannelUpdatesPart: updates once, a chat's         (channel_updates.py)  → Channels, Turns
                         conversation and messages
    svc.live             LivePart: following a turn, waiting for an answer  (live.py)             → TurnTasks, Turns,
                                                                                                    Status, Approvals
    svc.gateway          GatewayPart: clients, sessions, tools, calls,      (gateway.py)          → Tools, Turns
                         a client's policy explained
    svc.gateway_content  GatewayContentPart: the gateway's resources and    (gateway_content.py)  → Turns, Gateway
                         prompts, each read governed
    svc.brake            BrakePart: stop everything, pause/resume jobs      (brake.py)            → Turns
                         and the gateway
    svc.jobs             JobsPart: scheduled jobs, a run started now        (jobs.py)             → Turns, Brake
    svc.webhooks         WebhooksPart: webhooks, a delivery received        (webhooks.py)         → Turns
    Scheduler            due jobs, every tick                               (scheduler.py)        → Jobs, Brake,
                                                                                                    Turns, TurnTasks
    svc.runtime          Runtime: palui serve's tick, its tickers, the      (runtime.py)          → TurnTasks, Turns,
                         drain; the policy file checked before it starts                            Maintenance, Policy,
                                                                                                    redecide, tickers

Where several parts contribute to one answer, one owner composes it: ``status.get()`` is the status
part's, which asks the channels part for its lines last; ``connectors.list()`` is the connectors part's,
over the tools part's stored rows; ``connectors.oauth_state()`` is the connectors part's (the sign-in part
asks it); ``jobs.start_now()`` is the jobs part's, which asks the brake part first. The service runs the
start-up steps in a fixed order (the built-in tools stored, then expired approvals swept); the runtime's
``start()`` checks the policy file first (its start hook), then starts the tick. The light service
(:mod:`palui.service.light`) is the same collaborators and the same tools part, nothing else built.
Methods raise :class:`~palui.errors.PaluiError` subclasses with messages fit for the person.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from palui.service.api import Service
    from palui.service.turns import Launched

__all__ = ["Launched", "Service"]


def __getattr__(name: str) -> Any:
    """``Service`` and ``Launched`` are imported on first use (PEP 562), so that importing one part
    (``palui.service.tools``) does not import every part."""
    if name == "Service":
        from palui.service.api import Service

        return Service
    if name == "Launched":
        from palui.service.turns import Launched

        return Launched
    raise AttributeError(f"module 'palui.service' has no attribute {name!r}")
