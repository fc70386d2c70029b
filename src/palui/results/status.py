"""``/status``, the pause, the inbox and the audit log (spec §6, §8.1, §10.3), and the emergency brake (spec §5.7)."""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


class PauseState(TypedDict):
    """Whether a global cap pauses new turns (spec §6.4): the cap's words and until when (ISO time)."""

    paused: bool
    paused_reason: str | None
    paused_until: str | None


class StatusCaps(TypedDict):
    """The global caps (spec §6.4): tokens a day, for jobs, runs an hour, the webhook share; ``timezone``
    of the day (``system`` when not set); ``cached_input_weight`` what a cached input token counts for (None:
    the provider's default)."""

    daily_tokens: int
    job_daily_tokens: int
    runs_per_hour: int
    webhook_runs_per_hour: int
    timezone: str
    cached_input_weight: NotRequired[float | None]


class WebhookShare(TypedDict):
    """The webhook share of the hourly runs (spec §6.6; not a pause): used, held, until when (ISO time)."""

    webhook_runs_last_hour: int
    webhooks_held: bool
    webhooks_held_until: str | None


class StatusConnector(TypedDict):
    """A connector on ``/status``: its state in this process and its tool counts."""

    id: str
    state: str
    tools: int
    enabled_tools: int


class AuditHead(TypedDict):
    """The audit chain's head (spec §10.3): the last row's id and hash."""

    id: int
    hash: str


class JobsPause(TypedDict):
    """The emergency brake holds the jobs (spec §5.7): ``since`` epoch seconds, ``by`` where it was pulled,
    ``noted`` whether the person was told that due runs are skipped."""

    since: float
    by: str
    noted: bool


class GatewayPause(TypedDict):
    """The emergency brake holds the gateway (spec §5.7, §8.6): ``since`` epoch seconds, ``by`` where it was
    pulled. Every gateway call and new session is refused until ``palui gateway resume``."""

    since: float
    by: str


class AsksSummary(TypedDict):
    """``/status``'s asks over the last ``days`` days (spec §5.8): how many, their answers, the median time
    to an answer (seconds, None without answers)."""

    days: int
    asks: int
    approved: int
    denied: int
    expired: int
    cancelled: int
    median_answer_seconds: float | None


class ChannelLine(TypedDict):
    """A chat channel on ``/status`` (spec §8.3)."""

    name: str
    kind: str
    state: str
    person: str | None
    last_failure: str | None


class PendingApprovalLine(TypedDict):
    """A pending approval as ``/status`` lists it (spec §8.2): its id, the tool, when it expires (ISO time)."""

    id: str
    tool: str
    expires_at: str


class Status(PauseState, WebhookShare):
    """``/status``, ``palui status --json``, ``GET /api/status`` (spec §8.1): the model, today's tokens (as the
    caps count them, ``cached_tokens_today`` the cache reads among them, counted at their weight), the
    caps, the runs of the last hour, the pause and the webhook share, the connectors, what waits for the
    person (counts, and the pending approvals by id, oldest first), the audit head, the jobs' brake, the asks
    summary and the chat channels."""

    model: str | None
    tokens_today: int
    cached_tokens_today: NotRequired[int]
    caps: StatusCaps
    runs_last_hour: int
    connectors: list[StatusConnector]
    pending_approvals: int
    pending_approval_list: list[PendingApprovalLine]
    pending_elicitations: int
    audit_head: AuditHead | None
    jobs_paused: JobsPause | None
    gateway_paused: GatewayPause | None
    governance: AsksSummary
    channels: list[ChannelLine]


class InboxItem(TypedDict):
    """A message on the person's channel (spec §8.1): ``time`` ISO 8601 UTC, ``kind`` answer / approval /
    job / webhook / cap / notice / message / elicitation, and the turn it is about."""

    time: str
    kind: str
    text: str
    turn: str | None


#: The class columns of an audit row: None for a call to a tool Palui does not know.
_AuditClass = TypedDict("_AuditClass", {"class": str | None, "class_source": str | None})


class AuditRow(_AuditClass):
    """One audit row (spec §10.3): ``time`` ISO 8601 UTC, the decision (``verdict``, ``reason``), the
    arguments' hash, the ``outcome`` (ok, error, refused, asked, denied, cancelled, may have run…), the
    call's ``duration_ms`` (milliseconds), the gateway ``client`` and ``session`` that made it (None for a turn's
    call, spec §8.6) and the row's chained ``hash``."""

    id: int
    time: str
    turn: str | None
    tool: str
    origin: str
    tainted: bool
    verdict: str
    reason: str
    args_hash: str | None
    outcome: str
    duration_ms: float | None
    client: str | None
    session: str | None
    hash: str


class Pruned(TypedDict):
    """``palui prune --before``: the cut (ISO time), the rows deleted per table, and the webhook delivery
    records older than the cut kept as replay keys until their own retention (spec §10.2, §8.5)."""

    before: str
    deleted: dict[str, int]
    replay_keys_kept: int


class Backup(TypedDict):
    """``palui backup``: the file written and its size in bytes."""

    file: str
    bytes: int


class StopAll(TypedDict):
    """The emergency brake (spec §5.7): the turns stopped, the jobs' pause and the gateway's."""

    stopped: list[str]
    jobs_paused: JobsPause
    gateway_paused: GatewayPause
