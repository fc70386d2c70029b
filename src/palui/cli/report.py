"""``palui report [--days N] [--json]``: how much asking costs you, and what to do about it (spec §5.8)."""

from __future__ import annotations

import click

from palui.cli.common import app, emit_json, service
from palui.text.display import shown


def _secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


@app.command("report")
@click.option("--days", type=int, default=7, metavar="N", help="The last N days, today included.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def report_cmd(days: int, as_json: bool) -> None:
    """Asks per day and how they were answered, what caused them, the tools asked most, job turns that waited,
    calls refused as not offered, what tainted your conversations — and suggestions, one command each."""
    r = service().report.build(days)
    if as_json:
        return emit_json(r)
    a = r["asks"]
    click.echo(f"Governance, the last {r['days']} day(s) (since {r['since'][:10]}): {r['turns']} turn(s), "
               f"{r['calls']} tool call(s), {a['total']} ask(s)")
    click.echo("asks per day: " + "  ".join(f"{d['day'][5:]} {d['asks']}" for d in a["per_day"]))
    tk = r.get("tokens")
    if tk is not None:
        click.echo(f"tokens counted against the caps: {tk['counted']:,}; cached input among them: "
                   f"{tk['cached_input']:,} tokens, each counted at its weight (caps.cached_input_weight)")
    click.echo(f"answers: approved {a['approved']}, denied {a['denied']}, expired {a['expired']}, cancelled "
               f"{a['cancelled']}, pending {a['pending']}; median time to answer {_secs(a['median_answer_seconds'])}"
               + (" (" + ", ".join(f"{k} {v}" for k, v in a["answered_via"].items()) + ")" if a["answered_via"]
                  else ""))
    v = r.get("avoided") or {"total": 0, "by_rule": []}
    click.echo(f"asks avoided by standing approvals: {v['total']}" + (
        " (" + shown(", ".join(f"{x['rule'][:12]} {x['tool']} in {x['context']} {x['asks']}" for x in v["by_rule"][:5]),
                     one_line=True) + ")" if v["by_rule"] else "") + " (palui rules list)")
    c = a["by_cause"]
    click.echo(f"caused by: taint {c['taint']}, class {c['class']}, job {c['job']}, the Rule of Two {c['outside']}"
               + (f", other {c['other']}" if c["other"] else ""))
    if a["top_tools"]:
        click.echo("asked most: " + shown(", ".join(f"{t['tool']} {t['asks']} ({t['approved']} approved, "
                                                     f"{t['denied']} denied)" for t in a["top_tools"][:5]),
                                           one_line=True))
    j = r["job_turns_waited"]
    click.echo(f"job turns that waited for you: {j['turns']} ({j['asks']} ask(s), {j['expired']} expired; median "
               f"wait {_secs(j['median_wait_seconds'])})")
    n = r["not_offered"]
    click.echo(f"calls refused as not offered: {n['total']}" + (
        " (" + shown(", ".join(f"{t['tool']} {t['refused']}" for t in n["by_tool"][:5]), one_line=True) + ")"
        if n["by_tool"] else ""))
    if r["tainted_conversations"]:
        click.echo("conversations tainted, per connector: " + shown(", ".join(
            f"{t['connector']} {t['conversations']}" for t in r["tainted_conversations"]), one_line=True))
    if r["suggestions"]:
        click.echo("\nSuggestions (nothing changes until you run one):")
        for s in r["suggestions"]:
            click.echo(f"- {shown(s['text'], one_line=True)}\n    {shown(s['command'], one_line=True)}")
    else:
        click.echo("\nNo suggestions.")
