"""What the turn runner may touch: the narrow seam between the service and one turn (docs/architecture.md).

The runner never sees the service object. It gets the database, the settings, the
connector hub of this process, the person's channel and a lookup of a job's own token cap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from palui.config import Settings
from palui.connectors.base import PersonChannel
from palui.connectors.hub import ConnectorHub
from palui.store.db import Database


@dataclass(frozen=True)
class RunnerDeps:
    """The runner's dependencies.

    ``notify`` puts a message on the person's channel (answers, approval requests);
    ``job_token_cap(job_id)`` is that job's own daily token cap, None for the default
    (``caps.job_daily_tokens``) or a turn that is not a job's. ``job_connectors(job_id)`` is the
    connectors a job is limited to (spec §8.4), None for every connector.
    """

    db: Database
    settings: Settings
    hub: ConnectorHub
    notify: PersonChannel
    job_token_cap: Callable[[str | None], int | None]
    job_connectors: Callable[[str | None], list[str] | None] = lambda _job_id: None
