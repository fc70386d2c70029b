"""``palui policy snapshot`` and ``palui policy check FILE``: the person's policy pinned as tests (issue 15 §4).

``palui policy explain`` is in :mod:`palui.cli.tools`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from palui.cli.common import emit_json, fail, policy_app, service
from palui.text.display import shown


@policy_app.command("snapshot")
def policy_snapshot() -> None:
    """Write today's verdict of every tool, per origin and taint, as CSV (tool,origin,tainted,verdict)."""
    typer.echo(service().policy_snapshot(), nl=False)


@policy_app.command("check")
def policy_check(file: Path = typer.Argument(..., metavar="FILE", help="A CSV file with the header "
                                                                      "tool,origin,tainted,verdict."),
                 as_json: bool = typer.Option(False, "--json", help="Print the mismatches as JSON.")) -> None:
    """Check every row of FILE against the live configuration; print each mismatch with the current reason (exit 1)."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read {file}: {e}")
    found = service().policy_check(text)
    if as_json:
        emit_json(found)
    else:
        for f in found:
            typer.echo(f"{f['kind']}: {shown(f['message'], one_line=True)}")
        rows = sum(1 for line in text.splitlines()[1:] if line.strip())
        typer.echo(f"{len(found)} of {rows} row(s) do not hold" if found else f"all {rows} row(s) hold")
    raise typer.Exit(1 if found else 0)
