"""The service facade: :class:`Service` builds the shared collaborators and each part once, and forwards
every public method to the one part that owns it (the diagram is in :mod:`palui.service`).

Kept out of the package's ``__init__`` so that importing one part (``palui.service.tools``)
does not import every other part (a command imports only what it needs).
"""

from __future__ import annotations

from palui.config import Settings
from palui.connectors.hub import ConnectorHub
from palui.service.approvals import ApprovalsPart
from palui.service.audit_log import AuditHeadPost, AuditLogPart
from palui.service.brake import BrakePart
from palui.service.channel_outbox import ChannelOutboxPart
from palui.service.channel_updates import ChannelUpdatesPart
from palui.service.channels import ChannelsPart
from palui.service.clock import Clock
from palui.service.collaborators import Collaborators, Redecision
from palui.service.conversations import ConversationsPart
from palui.service.elicitations import ElicitationsPart
from palui.service.forward import Forward
from palui.service.gateway import GatewayPart
from palui.service.live import LivePart
from palui.service.mail_records import MailRecordsPart
from palui.service.maintenance import MaintenancePart
from palui.service.mcp_connectors import MCPPart
from palui.service.mcp_import import MCPImportPart
from palui.service.mcp_signin import MCPSignInPart
from palui.service.memories import MemoriesPart
from palui.service.notifier import Notifier
from palui.service.outside import OutsidePart
from palui.service.policy_pin import PolicyPinPart
from palui.service.report import ReportPart
from palui.service.rules import RulesPart
from palui.service.runtime import Runtime
from palui.service.scheduler import Scheduler
from palui.service.status import StatusPart
from palui.service.suggestions import SuggestionsPart
from palui.service.tools import ToolsPart
from palui.service.triggers import TriggersPart
from palui.service.turn_tasks import TurnTasks
from palui.service.turns import TurnsPart


class Service:
    """Palui's service API over one ``PALUI_HOME`` (settings + database).

    Args:
        settings: validated settings; ``None`` loads them from the environment.

    Raises:
        ConfigError: the configuration is invalid (Palui refuses to start).

    Attributes:
        settings, db, clock, notifier, hub: the shared collaborators (:mod:`palui.service.collaborators`).
        runtime: the tick and the drain of ``palui serve`` (:mod:`palui.service.runtime`).
        turn_tasks, scheduler and each ``*_part``: the parts, built once; a front end calls the
            forwards below, never a part.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        home = Collaborators.open(settings)
        self.settings, self.db, self.clock = home.settings, home.db, home.clock
        self.notifier, self.redecision, self.hub = home.notifier, home.redecision, home.hub
        db, settings, clock, notifier, hub = self.db, self.settings, self.clock, self.notifier, self.hub
        redecide = self.redecision.redecide_approvals
        # Each part is built after every part it holds a reference to: the order is the parts' DAG.
        self.turn_tasks = TurnTasks()
        self.tools_part = ToolsPart(db, settings, hub, redecide)
        self.mcp_part = MCPPart(db, settings, hub, notifier, clock, self.tools_part, redecide)
        self.mcp_import_part = MCPImportPart(db, self.mcp_part)
        self.signin_part = MCPSignInPart(db, settings, hub, self.mcp_part, redecide)
        self.policy_pin_part = PolicyPinPart(settings, notifier, self.tools_part)
        self.suggestions_part = SuggestionsPart(self.tools_part)
        self.outside_part = OutsidePart(db, self.tools_part)
        self.report_part = ReportPart(db, clock, self.tools_part)
        self.audit_log_part = AuditLogPart(db, notifier, clock)
        self.memories_part = MemoriesPart(db)
        self.maintenance_part = MaintenancePart(db, settings, clock)
        self.channels_part = ChannelsPart(db, settings, notifier, clock)
        self.channel_outbox_part = ChannelOutboxPart(db, settings, clock)
        self.mail_records_part = MailRecordsPart(db, clock)
        self.status_part = StatusPart(db, settings, hub, notifier, clock, self.mcp_part, self.channels_part)
        self.turns_part = TurnsPart(db, settings, hub, notifier, clock, self.status_part, self.turn_tasks)
        self.conversations_part = ConversationsPart(db, self.turns_part, self.status_part)
        self.elicitations_part = ElicitationsPart(db, self.conversations_part, self.turns_part)
        self.rules_part = RulesPart(db, settings, notifier)
        self.approvals_part = ApprovalsPart(db, notifier, redecide, self.conversations_part,
                                            self.elicitations_part, self.turns_part, self.rules_part)
        self.channel_updates_part = ChannelUpdatesPart(db, clock, self.channels_part, self.turns_part,
                                                       self.approvals_part)
        self.live_part = LivePart(db, self.turn_tasks, self.turns_part, self.status_part, self.approvals_part)
        self.gateway_part = GatewayPart(db, clock, self.turns_part)
        self.brake_part = BrakePart(db, notifier, clock, self.turns_part)
        self.triggers_part = TriggersPart(db, settings, notifier, clock, self.turns_part, self.brake_part)
        self.scheduler = Scheduler(db, settings, notifier, clock, self.triggers_part, self.brake_part,
                                   self.turns_part, self.turn_tasks)
        self.runtime = Runtime(db, hub, clock, self.turn_tasks, self.turns_part, self.maintenance_part, redecide,
                               tickers=(self.scheduler.tick, AuditHeadPost(self.audit_log_part, clock).tick))
        self._start_up()

    def _start_up(self) -> None:
        """The start-up steps of every service, in this order: the built-in connectors and tools are
        stored as this version defines them, then expired approvals are swept (spec §5), so the sweep
        sees the catalog of this version."""
        self.tools_part.register_builtins()
        self.turns_part.sweep_expired_approvals()

    async def start_background(self, tick_seconds: float | None = None) -> None:
        """``palui serve``: check ``policy.check_file`` (it switches off what would be looser than pinned,
        and never raises: :meth:`PolicyPinPart.enforce_policy_file`), then start the tick (resumes, queued
        turns, the job scheduler). Raises ConfigError (a bad ``PALUI_TEST_CLOCK``)."""
        self.policy_pin_part.enforce_policy_file()
        await self.runtime.start(tick_seconds)

    # -- the shared collaborators ---------------------------------------------------------------------
    notify = Forward("notifier", Notifier.__call__)
    subscribe_notices = Forward("notifier", Notifier.subscribe)
    inbox = Forward("notifier", Notifier.inbox)
    check_delivery_targets = Forward("notifier", Notifier.check_delivery_targets)
    timezone = Forward("clock", Clock.timezone)
    redecide_approvals = Forward("redecision", Redecision.redecide_approvals)
    close = Forward("hub", ConnectorHub.close)

    # -- the background (runtime.py) and the turn tasks (turn_tasks.py) -------------------------------
    stop_background = Forward("runtime", Runtime.shutdown)
    begin_drain = Forward("runtime", Runtime.begin_drain)
    on_shutdown = Forward("runtime", Runtime.on_shutdown)
    subscribe = Forward("turn_tasks", TurnTasks.subscribe)
    unsubscribe = Forward("turn_tasks", TurnTasks.unsubscribe)

    # -- tools (tools.py) -----------------------------------------------------------------------------
    tools = Forward("tools_part", ToolsPart.tools)
    tool = Forward("tools_part", ToolsPart.tool)
    register_tools = Forward("tools_part", ToolsPart.register_tools)
    set_class = Forward("tools_part", ToolsPart.set_class)
    reset_class = Forward("tools_part", ToolsPart.reset_class)
    set_enabled = Forward("tools_part", ToolsPart.set_enabled)
    enable_read = Forward("tools_part", ToolsPart.enable_read)
    tools_on = Forward("tools_part", ToolsPart.tools_on)
    tool_budget_warning = Forward("tools_part", ToolsPart.tool_budget_warning)
    tool_details = Forward("tools_part", ToolsPart.tool_details)
    acknowledge_hidden = Forward("tools_part", ToolsPart.acknowledge_hidden)
    review_tool = Forward("tools_part", ToolsPart.review_tool)
    set_trusted = Forward("tools_part", ToolsPart.set_trusted)
    explain = Forward("tools_part", ToolsPart.explain)

    # -- MCP connectors (mcp_connectors.py, mcp_import.py, mcp_signin.py) -----------------------------
    connectors = Forward("mcp_part", MCPPart.connectors)
    mcp_config = Forward("mcp_part", MCPPart.mcp_config)
    oauth_state = Forward("mcp_part", MCPPart.oauth_state)
    mcp_add_async = Forward("mcp_part", MCPPart.mcp_add_async)
    mcp_add = Forward("mcp_part", MCPPart.mcp_add)
    mcp_refresh_async = Forward("mcp_part", MCPPart.mcp_refresh_async)
    mcp_refresh = Forward("mcp_part", MCPPart.mcp_refresh)
    mcp_remove = Forward("mcp_part", MCPPart.mcp_remove)
    mcp_set_enabled = Forward("mcp_part", MCPPart.mcp_set_enabled)
    resolve_tool = Forward("mcp_part", MCPPart.resolve_tool)
    mcp_import_async = Forward("mcp_import_part", MCPImportPart.mcp_import_async)
    mcp_import = Forward("mcp_import_part", MCPImportPart.mcp_import)
    mcp_login_async = Forward("signin_part", MCPSignInPart.mcp_login_async)
    mcp_logout_async = Forward("signin_part", MCPSignInPart.mcp_logout_async)
    mcp_sign_in_web = Forward("signin_part", MCPSignInPart.mcp_sign_in_web)
    mcp_sign_in_web_complete = Forward("signin_part", MCPSignInPart.mcp_sign_in_web_complete)

    # -- the person's governance of tools (policy_pin.py, suggestions.py, outside.py, report.py) -----
    policy_snapshot = Forward("policy_pin_part", PolicyPinPart.policy_snapshot)
    policy_check = Forward("policy_pin_part", PolicyPinPart.policy_check)
    policy_check_file = Forward("policy_pin_part", PolicyPinPart.policy_check_file)
    enforce_policy_file = Forward("policy_pin_part", PolicyPinPart.enforce_policy_file)
    suggest_classes = Forward("suggestions_part", SuggestionsPart.suggest_classes)
    accept_suggestions = Forward("suggestions_part", SuggestionsPart.accept_suggestions)
    accept_suggestion = Forward("suggestions_part", SuggestionsPart.accept_suggestion)
    set_reaches_outside = Forward("outside_part", OutsidePart.set_reaches_outside)
    set_private = Forward("outside_part", OutsidePart.set_private)
    report = Forward("report_part", ReportPart.report)

    # -- status and the audit log (status.py, audit_log.py) -------------------------------------------
    status = Forward("status_part", StatusPart.status)
    pause_state = Forward("status_part", StatusPart.pause_state)
    webhook_share_state = Forward("status_part", StatusPart.webhook_share_state)
    tell_webhooks_held = Forward("status_part", StatusPart.tell_webhooks_held)
    audit = Forward("status_part", StatusPart.audit)
    audit_head = Forward("audit_log_part", AuditLogPart.audit_head)
    audit_verify = Forward("audit_log_part", AuditLogPart.audit_verify)
    audit_export = Forward("audit_log_part", AuditLogPart.audit_export)
    post_audit_head = Forward("audit_log_part", AuditLogPart.post_audit_head)

    # -- turns (turns.py) -----------------------------------------------------------------------------
    runner_deps = Forward("turns_part", TurnsPart.runner_deps)
    preload = Forward("turns_part", TurnsPart.preload)
    new_conversation = Forward("turns_part", TurnsPart.new_conversation)
    check_model = Forward("turns_part", TurnsPart.check_model)
    start_turn = Forward("turns_part", TurnsPart.start_turn)
    claim = Forward("turns_part", TurnsPart.claim)
    claim_turn = Forward("turns_part", TurnsPart.claim_turn)
    launch = Forward("turns_part", TurnsPart.launch)
    run_claimed = Forward("turns_part", TurnsPart.run_claimed)
    run_turn = Forward("turns_part", TurnsPart.run_turn)
    send = Forward("turns_part", TurnsPart.send)
    resume_turn = Forward("turns_part", TurnsPart.resume_turn)
    resume_ready = Forward("turns_part", TurnsPart.resume_ready)
    job_token_cap = Forward("turns_part", TurnsPart.job_token_cap)
    job_connectors = Forward("turns_part", TurnsPart.job_connectors)
    turn_result = Forward("turns_part", TurnsPart.turn_result)
    stop = Forward("turns_part", TurnsPart.stop)
    tool_or_none = Forward("turns_part", TurnsPart.tool_or_none)

    # -- the gateway (gateway.py) ---------------------------------------------------------------------
    gateway_client_add = Forward("gateway_part", GatewayPart.gateway_client_add)
    gateway_clients = Forward("gateway_part", GatewayPart.gateway_clients)
    gateway_client = Forward("gateway_part", GatewayPart.gateway_client)
    gateway_client_remove = Forward("gateway_part", GatewayPart.gateway_client_remove)
    gateway_client_clear = Forward("gateway_part", GatewayPart.gateway_client_clear)
    gateway_client_for_token = Forward("gateway_part", GatewayPart.gateway_client_for_token)
    gateway_paused = Forward("gateway_part", GatewayPart.gateway_paused)
    gateway_resume = Forward("gateway_part", GatewayPart.gateway_resume)
    gateway_session_open = Forward("gateway_part", GatewayPart.gateway_session_open)
    gateway_session_end = Forward("gateway_part", GatewayPart.gateway_session_end)
    gateway_sessions_end_open = Forward("gateway_part", GatewayPart.gateway_sessions_end_open)
    gateway_catalog_version = Forward("gateway_part", GatewayPart.gateway_catalog_version)
    gateway_tools = Forward("gateway_part", GatewayPart.gateway_tools)
    gateway_call = Forward("gateway_part", GatewayPart.gateway_call)

    # -- conversations, questions, approvals, following (conversations.py … live.py) ------------------
    turn_detail = Forward("conversations_part", ConversationsPart.turn_detail)
    conversations = Forward("conversations_part", ConversationsPart.conversations)
    conversation = Forward("conversations_part", ConversationsPart.conversation)
    conversation_of = Forward("conversations_part", ConversationsPart.conversation_of)
    elicitations = Forward("elicitations_part", ElicitationsPart.elicitations)
    elicitation = Forward("elicitations_part", ElicitationsPart.elicitation)
    answer_elicitation = Forward("elicitations_part", ElicitationsPart.answer_elicitation)
    answer_elicitation_and_resume = Forward("elicitations_part", ElicitationsPart.answer_elicitation_and_resume)
    allow_secret_questions = Forward("elicitations_part", ElicitationsPart.allow_secret_questions)
    approvals = Forward("approvals_part", ApprovalsPart.approvals)
    approval = Forward("approvals_part", ApprovalsPart.approval)
    waiting = Forward("approvals_part", ApprovalsPart.waiting)
    answer_approval = Forward("approvals_part", ApprovalsPart.answer_approval)
    answer_and_resume = Forward("approvals_part", ApprovalsPart.answer_and_resume)
    rules = Forward("rules_part", RulesPart.rules)
    rule = Forward("rules_part", RulesPart.rule)
    make_rule = Forward("rules_part", RulesPart.make_rule)
    remove_rule = Forward("rules_part", RulesPart.remove_rule)
    turn_events = Forward("live_part", LivePart.turn_events)
    follow_turn = Forward("live_part", LivePart.follow_turn)
    wait_approval = Forward("live_part", LivePart.wait_approval)

    # -- chat channels (channels.py, channel_outbox.py, channel_updates.py, mail_records.py) -----------------------
    add_channel = Forward("channels_part", ChannelsPart.add_channel)
    channel = Forward("channels_part", ChannelsPart.channel)
    channels = Forward("channels_part", ChannelsPart.channels)
    remove_channel = Forward("channels_part", ChannelsPart.remove_channel)
    channel_secrets = Forward("channels_part", ChannelsPart.channel_secrets)
    set_channel_groups = Forward("channels_part", ChannelsPart.set_channel_groups)
    update_channel_config = Forward("channels_part", ChannelsPart.update_channel_config)
    set_channel_state = Forward("channels_part", ChannelsPart.set_channel_state)
    channel_failure = Forward("channels_part", ChannelsPart.channel_failure)
    channel_refused = Forward("channels_part", ChannelsPart.channel_refused)
    pair_code = Forward("channels_part", ChannelsPart.pair_code)
    pairing_open = Forward("channels_part", ChannelsPart.pairing_open)
    try_pair = Forward("channels_part", ChannelsPart.try_pair)
    note_stranger = Forward("channels_part", ChannelsPart.note_stranger)
    renew_channel_secret = Forward("channels_part", ChannelsPart.renew_channel_secret)
    hold_invite = Forward("channels_part", ChannelsPart.hold_invite)
    held_invites = Forward("channels_part", ChannelsPart.held_invites)
    drop_invite = Forward("channels_part", ChannelsPart.drop_invite)
    outbox_add = Forward("channel_outbox_part", ChannelOutboxPart.outbox_add)
    outbox_next = Forward("channel_outbox_part", ChannelOutboxPart.outbox_next)
    outbox_render = Forward("channel_outbox_part", ChannelOutboxPart.outbox_render)
    outbox_trying = Forward("channel_outbox_part", ChannelOutboxPart.outbox_trying)
    outbox_part_failed = Forward("channel_outbox_part", ChannelOutboxPart.outbox_part_failed)
    outbox_part_sent = Forward("channel_outbox_part", ChannelOutboxPart.outbox_part_sent)
    outbox_close = Forward("channel_outbox_part", ChannelOutboxPart.outbox_close)
    prune_outbox = Forward("channel_outbox_part", ChannelOutboxPart.prune_outbox)
    channel_update = Forward("channel_updates_part", ChannelUpdatesPart.channel_update)
    channel_mark = Forward("channel_updates_part", ChannelUpdatesPart.channel_mark)
    channel_seen = Forward("channel_updates_part", ChannelUpdatesPart.channel_seen)
    channel_next_offset = Forward("channel_updates_part", ChannelUpdatesPart.channel_next_offset)
    channel_cursor = Forward("channel_updates_part", ChannelUpdatesPart.channel_cursor)
    set_channel_cursor = Forward("channel_updates_part", ChannelUpdatesPart.set_channel_cursor)
    prune_channel_updates = Forward("channel_updates_part", ChannelUpdatesPart.prune_channel_updates)
    channel_conversation = Forward("channel_updates_part", ChannelUpdatesPart.channel_conversation)
    channel_chats_of = Forward("channel_updates_part", ChannelUpdatesPart.channel_chats_of)
    channel_message = Forward("channel_updates_part", ChannelUpdatesPart.channel_message)
    record_sent = Forward("channel_updates_part", ChannelUpdatesPart.record_sent)
    sent_message = Forward("channel_updates_part", ChannelUpdatesPart.sent_message)
    shown_approvals = Forward("channel_updates_part", ChannelUpdatesPart.shown_approvals)
    close_sent = Forward("channel_updates_part", ChannelUpdatesPart.close_sent)
    turn_status = Forward("channel_updates_part", ChannelUpdatesPart.turn_status)
    approval_or_none = Forward("channel_updates_part", ChannelUpdatesPart.approval_or_none)
    add_answer_address = Forward("mail_records_part", MailRecordsPart.add_answer_address)
    spend_answer_address = Forward("mail_records_part", MailRecordsPart.spend_answer_address)
    mail_thread = Forward("mail_records_part", MailRecordsPart.mail_thread)
    set_mail_thread = Forward("mail_records_part", MailRecordsPart.set_mail_thread)

    # -- jobs, webhooks and the emergency brake (triggers.py, brake.py) -------------------------------
    WEBHOOK_MAX_BODY_BYTES = TriggersPart.WEBHOOK_MAX_BODY_BYTES
    add_job = Forward("triggers_part", TriggersPart.add_job)
    jobs = Forward("triggers_part", TriggersPart.jobs)
    job = Forward("triggers_part", TriggersPart.job)
    remove_job = Forward("triggers_part", TriggersPart.remove_job)
    job_time = Forward("triggers_part", TriggersPart.job_time)
    job_dict = Forward("triggers_part", TriggersPart.job_dict)
    job_cap = Forward("triggers_part", TriggersPart.job_cap)
    cap_frees_at = Forward("triggers_part", TriggersPart.cap_frees_at)
    postpone_job = Forward("triggers_part", TriggersPart.postpone_job)
    start_job_turn = Forward("triggers_part", TriggersPart.start_job_turn)
    start_job_now = Forward("triggers_part", TriggersPart.start_job_now)
    run_job = Forward("triggers_part", TriggersPart.run_job)
    webhook_base_url = Forward("triggers_part", TriggersPart.webhook_base_url)
    add_webhook = Forward("triggers_part", TriggersPart.add_webhook)
    webhooks = Forward("triggers_part", TriggersPart.webhooks)
    remove_webhook = Forward("triggers_part", TriggersPart.remove_webhook)
    webhook_exists = Forward("triggers_part", TriggersPart.webhook_exists)
    receive_webhook = Forward("triggers_part", TriggersPart.receive_webhook)
    stop_all = Forward("brake_part", BrakePart.stop_all)
    pause_jobs = Forward("brake_part", BrakePart.pause_jobs)
    jobs_paused = Forward("brake_part", BrakePart.jobs_paused)
    resume_jobs = Forward("brake_part", BrakePart.resume_jobs)
    note_jobs_paused = Forward("brake_part", BrakePart.note_jobs_paused)

    # -- memories, tasks and maintenance (memories.py, maintenance.py) --------------------------------
    memories = Forward("memories_part", MemoriesPart.memories)
    forget_memory = Forward("memories_part", MemoriesPart.forget_memory)
    trust_memory = Forward("memories_part", MemoriesPart.trust_memory)
    tasks = Forward("memories_part", MemoriesPart.tasks)
    forget_task = Forward("memories_part", MemoriesPart.forget_task)
    trust_task = Forward("memories_part", MemoriesPart.trust_task)
    prune_expired = Forward("maintenance_part", MaintenancePart.prune_expired)
    prune = Forward("maintenance_part", MaintenancePart.prune)
    backup = Forward("maintenance_part", MaintenancePart.backup)
