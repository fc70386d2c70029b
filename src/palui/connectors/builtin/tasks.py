"""The ``tasks`` connector: the person's task list in SQLite, with provenance (spec §7, §4).

A task created or changed while the turn is tainted is stored ``untrusted``; any
result that shows an untrusted task (a listing, or the task echoed after a change) is
untrusted, any other result is not.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from palui.connectors.base import CallContext, ToolResult, ToolSpec
from palui.connectors.builtin.common import (
    TRUSTED,
    ArgError,
    BuiltinConnector,
    dispatch,
    int_arg,
    result,
    str_arg,
    write_provenance,
)
from palui.store import memories as store
from palui.types import ToolClass

MAX_TITLE_CHARS = 500    # characters of a task's title
MAX_NOTES_CHARS = 8192   # characters of a task's notes

TOOLS = [
    ToolSpec(
        name="list_tasks",
        description="List the person's tasks. By default only open tasks.",
        input_schema={
            "type": "object",
            "properties": {"status": {"type": "string", "enum": ["open", "done", "all"], "default": "open"}},
        },
        declared_class=ToolClass.READ,
        untrusted_output=False,
    ),
    ToolSpec(
        name="create_task",
        description="Create a task for the person.",
        input_schema={
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
                "notes": {"type": "string", "maxLength": MAX_NOTES_CHARS},
                "due": {"type": "string", "description": "Due date, ISO 8601 (optional)."},
            },
            "required": ["title"],
        },
        declared_class=ToolClass.WRITE,
        untrusted_output=False,
    ),
    ToolSpec(
        name="update_task",
        description="Change a task: its title, notes, due date or status (open/done).",
        input_schema={
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
                "notes": {"type": "string", "maxLength": MAX_NOTES_CHARS},
                "due": {"type": "string"},
                "status": {"type": "string", "enum": ["open", "done"]},
            },
            "required": ["id"],
        },
        declared_class=ToolClass.WRITE,
        untrusted_output=False,
    ),
    ToolSpec(
        name="delete_task",
        description="Delete a task by its id.",
        input_schema={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        declared_class=ToolClass.DESTRUCTIVE,
        untrusted_output=False,
    ),
]


class TasksConnector(BuiltinConnector):
    """Tasks: ``list_tasks`` [read], ``create_task`` / ``update_task`` [write], ``delete_task`` [destructive]."""

    id = "tasks"

    tools = TOOLS

    async def call_checked(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        """Run one tool. Bad arguments and unknown ids come back as ``is_error`` results."""
        return dispatch(
            "tasks",
            {
                "list_tasks": self._list,
                "create_task": self._create,
                "update_task": self._update,
                "delete_task": self._delete,
            },
            name,
            args,
            ctx,
        )

    def _list(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        status = str_arg(args, "status", required=False) or "open"
        if status not in ("open", "done", "all"):
            raise ArgError("argument 'status' must be open, done or all")
        rows = store.list_tasks(ctx.db, status)
        if not rows:
            text = "No tasks." if status == "all" else f"No {status} tasks."
        else:
            text = "\n".join(task_line(t) for t in rows)
        return result(text, rows, "task", task_text)

    def _create(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        title = str_arg(args, "title", max_chars=MAX_TITLE_CHARS).strip()
        notes = str_arg(args, "notes", required=False, max_chars=MAX_NOTES_CHARS) or ""
        due = _due(args)
        provenance, source = write_provenance(ctx)
        row = store.create_task(ctx.db, title, notes, due, provenance, source, ctx.turn_id)
        return result(f"Created task {task_line(row)}", [row], "task", task_text)

    def _update(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tid = int_arg(args, "id")
        changes: dict[str, Any] = {}
        title = str_arg(args, "title", required=False, max_chars=MAX_TITLE_CHARS)
        if title is not None:
            if not title.strip():
                raise ArgError("argument 'title' must not be empty")
            changes["title"] = title.strip()
        notes = str_arg(args, "notes", required=False, max_chars=MAX_NOTES_CHARS)
        if notes is not None:
            changes["notes"] = notes
        if "due" in args:
            changes["due"] = _due(args)
        status = str_arg(args, "status", required=False)
        if status is not None:
            if status not in store.TASK_STATUSES:
                raise ArgError("argument 'status' must be open or done")
            changes["status"] = status
        if not changes:
            raise ArgError("nothing to change: give title, notes, due or status")
        provenance, source = write_provenance(ctx)
        row = store.update_task(ctx.db, tid, changes, provenance != TRUSTED, source, ctx.turn_id)
        if row is None:
            return ToolResult(text=f"No task with id {tid} (list_tasks lists ids).", is_error=True, untrusted=False)
        return result(f"Updated task {task_line(row)}", [row], "task", task_text)

    def _delete(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tid = int_arg(args, "id")
        row = store.delete_task(ctx.db, tid)
        if row is None:
            return ToolResult(text=f"No task with id {tid} (list_tasks lists ids).", is_error=True, untrusted=False)
        return result(f"Deleted task {task_line(row)}", [row], "task", task_text)


def _due(args: dict[str, Any]) -> str | None:
    """An ISO 8601 date or date-time, stored as given so that text order is date order; "" clears it."""
    due = str_arg(args, "due", required=False)
    if due is None or not due.strip():
        return None
    due = due.strip()
    parse = date.fromisoformat if len(due) == 10 else datetime.fromisoformat
    try:
        parse(due)
    except ValueError:
        raise ArgError(f"argument 'due' must be an ISO 8601 date like 2026-05-01 (or date-time), not {due!r}") from None
    return due


def task_text(t: dict[str, Any]) -> str:
    """The stored text of a task (title and notes): what may carry third-party content."""
    return f"{t['title']}\n{t['notes']}".strip()


def task_line(t: dict[str, Any]) -> str:
    """One task as the model sees it: ``[3] (open, due 2026-05-01) title — notes``."""
    meta = t["status"] + (f", due {t['due']}" if t["due"] else "")
    notes = f" — {t['notes']}" if t["notes"] else ""
    return f"[{t['id']}] ({meta}) {t['title']}{notes}"
