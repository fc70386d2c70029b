"""``palui policy snapshot`` and ``palui policy check FILE``: the person's policy pinned as tests (spec §3.4).

``palui policy explain`` is in :mod:`palui.cli.tools`.
"""

from __future__ import annotations

from pathlib import Path

import click

from palui.cli.common import emit_json, fail, policy_app, service
from palui.text.display import shown


@policy_app.command("snapshot")
def policy_snapshot() -> None:
    """Write today's verdict of every tool, per origin and taint, as CSV (tool,origin,tainted,verdict)."""
    click.echo(service().policy.snapshot(), nl=False)


@policy_app.command("check")
@click.argument("file", metavar="FILE", type=click.Path(path_type=Path),
                help="A CSV file with the header tool,origin,tainted,verdict.")
@click.option("--json", "as_json", is_flag=True, help="Print the mismatches as JSON.")
def policy_check(file: Path, as_json: bool) -> None:
    """Check every row of FILE against the live configuration; print each mismatch with the current reason (exit 1)."""
    from palui.files import POLICY_MAX_BYTES, Unreadable, read_text

    try:
        text = read_text(file, POLICY_MAX_BYTES)
    except Unreadable as e:
        fail(f"cannot read {file}: {e}")
    found = service().policy.check(text)
    if as_json:
        emit_json(found)
    else:
        for f in found:
            click.echo(f"{f['kind']}: {shown(f['message'], one_line=True)}")
        rows = sum(1 for line in text.splitlines()[1:] if line.strip())
        click.echo(f"{len(found)} of {rows} row(s) do not hold" if found else f"all {rows} row(s) hold")
    raise click.exceptions.Exit(1 if found else 0)
