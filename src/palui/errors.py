"""The exception tree of Palui.

    PaluiError                 base; ``str(e)`` is a message fit for the person
    ├── ConfigError            bad palui.toml or PALUI_* variable (refuses to start, spec §10)
    ├── NotFound               unknown tool, connector, approval, memory, task, job, webhook
    ├── UsageError             a request that is well-formed but not allowed (bad class word, ...)
    ├── NamingError            a connector or tool name that cannot be mapped (spec §7)
    ├── ApprovalError          an approval answer refused: expired, cancelled, re-decided, replayed (spec §5)
    ├── ModelConfigError       no model configured, or a model string that cannot be used (spec §9)
    ├── ConnectorError         a connector failed (MCP server down, hang, malformed result)
    ├── JobRefused             a job run not started because a cap refused it (spec §6)
    └── WebhookRefused         a webhook delivery refused with an HTTP status (spec §8)
"""

from __future__ import annotations

#: What a turn without a model says (spec §10: "turns then say how to configure one, and mention script:").
NO_MODEL_HELP = (
    "No model is configured. Set one in palui.toml (model = \"openai:gpt-4.1-mini\") or with PALUI_MODEL "
    "or --model, and the provider's key (OPENAI_API_KEY, ANTHROPIC_API_KEY). To try Palui without a provider, "
    "use the replay model: --model script:PATH (see the README, 'The script: model')."
)


class PaluiError(Exception):
    """Base of every error Palui raises on purpose. The message is for the person."""


class ConfigError(PaluiError):
    """The configuration is invalid; Palui refuses to start (fail closed)."""


class NotFound(PaluiError):
    """A named thing does not exist."""


class UsageError(PaluiError):
    """A request is not allowed as given."""


class NamingError(PaluiError):
    """A connector or tool name cannot be mapped to a valid unique name."""


class ApprovalError(PaluiError):
    """An approval answer was refused (expired, cancelled, re-decided, already answered).

    ``turn_id`` is the approval's turn when the refusal leaves that turn able to go on (an
    expired or cancelled-by-re-decision approval counts as a denial): the caller resumes it.
    """

    def __init__(self, message: str, turn_id: str | None = None) -> None:
        super().__init__(message)
        self.turn_id = turn_id


class ModelConfigError(PaluiError):
    """No usable model is configured."""


class ConnectorError(PaluiError):
    """A connector could not list or call its tools."""


class JobRefused(PaluiError):
    """A job run was not started because a cap refused it (spec §6). ``cap`` names the cap,
    ``until`` is the epoch time the run is postponed to."""

    def __init__(self, message: str, cap: str, until: float | None) -> None:
        super().__init__(message)
        self.cap = cap
        self.until = until


class WebhookRefused(PaluiError):
    """A delivery refused with an HTTP ``status`` (401, 404, 413, 429); the message says why
    without echoing any credential. ``retry_after`` is in seconds (429 only)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
