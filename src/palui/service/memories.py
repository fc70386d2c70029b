"""Service part: the person's memories and tasks (spec §7: list, forget, trust; spec §4 provenance).

Times in the returned dicts are ISO 8601 strings in UTC. Marking a memory or task
trusted sets its provenance to ``trusted``: later reads of it no longer taint a turn.
"""

from __future__ import annotations

import builtins
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.errors import NotFound, UsageError
from palui.store import memories as store
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import Memory, Task

TASK_FILTERS = ("open", "done", "all")


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat() if t is not None else None


def memory_dict(m: dict[str, Any]) -> Memory:
    """``{"id","text","provenance","source","created_at"}`` (plus ``turn``)."""
    return {"id": m["id"], "text": m["text"], "provenance": m["provenance"], "source": m["source"],
            "created_at": _iso(m["created_at"]), "turn": m["turn_id"]}


def task_dict(t: dict[str, Any]) -> Task:
    """``{"id","title","notes","status","due","provenance","source","created_at","updated_at","turn"}``."""
    return {"id": t["id"], "title": t["title"], "notes": t["notes"], "status": t["status"], "due": t["due"],
            "provenance": t["provenance"], "source": t["source"], "created_at": _iso(t["created_at"]),
            "updated_at": _iso(t["updated_at"]), "turn": t["turn_id"]}


class MemoriesPart:
    """Memories and tasks as the person sees them.

    Args:
        db: the database (memories, tasks).
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def list(self, limit: int = 100) -> list[Memory]:
        """The newest ``limit`` memories, newest first (see :func:`memory_dict`). Raises UsageError for limit < 1."""
        if limit < 1:
            raise UsageError("limit must be at least 1")
        return [memory_dict(m) for m in store.recent_memories(self.db, limit)]

    def forget(self, memory_id: int) -> Memory:
        """Delete a memory; returns what was deleted. Raises NotFound."""
        row = store.delete_memory(self.db, memory_id)
        if row is None:
            raise NotFound(f"no memory with id {memory_id} (see: palui memories list)")
        return memory_dict(row)

    def trust(self, memory_id: int) -> Memory:
        """Mark a memory trusted: reading it no longer taints a turn (spec §4). Raises NotFound."""
        if not store.trust_memory(self.db, memory_id):
            raise NotFound(f"no memory with id {memory_id} (see: palui memories list)")
        row = store.get_memory(self.db, memory_id)
        if row is None:  # forgotten in between
            raise NotFound(f"no memory with id {memory_id} (see: palui memories list)")
        return memory_dict(row)

    def tasks(self, status: str = "open") -> builtins.list[Task]:
        """Tasks with ``status`` open, done or all (see :func:`task_dict`). Raises UsageError for another word."""
        if status not in TASK_FILTERS:
            raise UsageError(f"status must be one of {', '.join(TASK_FILTERS)}, not {status!r}")
        return [task_dict(t) for t in store.list_tasks(self.db, status)]

    def forget_task(self, task_id: int) -> Task:
        """Delete a task; returns what was deleted. Raises NotFound."""
        row = store.delete_task(self.db, task_id)
        if row is None:
            raise NotFound(f"no task with id {task_id} (see: palui tasks list --status all)")
        return task_dict(row)

    def trust_task(self, task_id: int) -> Task:
        """Mark a task trusted: reading it no longer taints a turn (spec §4). Raises NotFound."""
        if not store.trust_task(self.db, task_id):
            raise NotFound(f"no task with id {task_id} (see: palui tasks list --status all)")
        row = store.get_task(self.db, task_id)
        if row is None:  # deleted in between
            raise NotFound(f"no task with id {task_id} (see: palui tasks list --status all)")
        return task_dict(row)
