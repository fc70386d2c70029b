"""``palui memories list|forget|trust`` and ``palui tasks list|forget|trust`` (spec §7, §4)."""

from __future__ import annotations

import click

from palui.cli.common import LIMIT, ROW_ID, emit_json, group, service, table
from palui.text.display import shown

memories_app = group("memories", "Your saved memories: list, forget, mark trusted.")
tasks_app = group("tasks", "Your tasks: list, forget, mark trusted.")


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@memories_app.command("list")
@click.option("--limit", type=LIMIT, default=100, help="How many, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def memories_list(limit: int, as_json: bool) -> None:
    """List memories, newest first, with their provenance (untrusted ones taint the turns that read them)."""
    rows = service().memories.list(limit)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("No memories.")
        return
    table([[str(m["id"]), m["provenance"], (m["created_at"] or "")[:19].replace("T", " "), _short(m["text"]),
            m["source"] or ""] for m in rows],
          ["ID", "PROVENANCE", "CREATED (UTC)", "TEXT", "SOURCE"])


@memories_app.command("forget")
@click.argument("memory_id", metavar="ID", type=ROW_ID)
def memories_forget(memory_id: int) -> None:
    """Delete a memory."""
    m = service().memories.forget(memory_id)
    click.echo(f"Forgot memory {m['id']}: {shown(_short(m['text']))}")


@memories_app.command("trust")
@click.argument("memory_id", metavar="ID", type=ROW_ID)
def memories_trust(memory_id: int) -> None:
    """Mark a memory trusted: reading it no longer taints a turn."""
    m = service().memories.trust(memory_id)
    click.echo(f"Memory {m['id']} is trusted: {shown(_short(m['text']))}")


@tasks_app.command("list")
@click.option("--status", default="open", metavar="open|done|all", help="Which tasks.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tasks_list(status: str, as_json: bool) -> None:
    """List tasks with their provenance."""
    rows = service().memories.tasks(status)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("No tasks." if status == "all" else f"No {status} tasks.")
        return
    table([[str(t["id"]), t["status"], t["due"] or "", t["provenance"], _short(t["title"], 50),
            t["source"] or ""] for t in rows],
          ["ID", "STATUS", "DUE", "PROVENANCE", "TITLE", "SOURCE"])


@tasks_app.command("forget")
@click.argument("task_id", metavar="ID", type=ROW_ID)
def tasks_forget(task_id: int) -> None:
    """Delete a task."""
    t = service().memories.forget_task(task_id)
    click.echo(f"Deleted task {t['id']}: {shown(_short(t['title']))}")


@tasks_app.command("trust")
@click.argument("task_id", metavar="ID", type=ROW_ID)
def tasks_trust(task_id: int) -> None:
    """Mark a task trusted: reading it no longer taints a turn."""
    t = service().memories.trust_task(task_id)
    click.echo(f"Task {t['id']} is trusted: {shown(_short(t['title']))}")
