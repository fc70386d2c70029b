"""The exception tree of Palui.

    PaluiError                 base; ``str(e)`` is a message fit for the person
    ├── ConfigError            bad palui.toml or PALUI_* variable (refuses to start, SPEC §10)
    ├── NotFound               unknown tool, connector, approval, memory, task, job, webhook
    ├── UsageError             a request that is well-formed but not allowed (bad class word, ...)
    ├── NamingError            a connector or tool name that cannot be mapped (SPEC §7)
    ├── ApprovalError          an approval answer refused: expired, replayed, changed args (SPEC §5)
    ├── ModelConfigError       no model configured, or a model string that cannot be used (SPEC §9)
    └── ConnectorError         a connector failed (MCP server down, hang, malformed result)
"""

from __future__ import annotations


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
    """An approval answer was refused (expired, replayed, changed arguments, not pending)."""


class ModelConfigError(PaluiError):
    """No usable model is configured."""


class ConnectorError(PaluiError):
    """A connector could not list or call its tools."""
