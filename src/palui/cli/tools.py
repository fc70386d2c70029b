"""``palui connectors list``, ``palui tools …``, ``palui policy explain``."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from palui.cli.common import connectors_app, emit_json, fail, policy_app, read_service, service, table, tools_app
from palui.errors import UsageError
from palui.text.confusables import skeleton
from palui.text.display import shown
from palui.text.review import visible
from palui.types import NEEDS_TASKS, Origin

if TYPE_CHECKING:
    from palui.results import PendingReview

# -- connectors -----------------------------------------------------------------------------

@connectors_app.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def connectors_list(as_json: bool) -> None:
    """List connectors with their state and tool counts."""
    rows = service().connectors.list()
    if as_json:
        return emit_json(rows)
    table([[r["id"], r["kind"], r["state"], f"{r['enabled_tools']}/{r['tools']}",
            "yes" if r["trusted_source"] else ""] for r in rows],
          ["ID", "KIND", "STATE", "ON/TOOLS", "TRUSTED"])


# -- tools ----------------------------------------------------------------------------------

@tools_app.command("list")
@click.option("--connector", help="Only this connector's tools.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tools_list(connector: str | None, as_json: bool) -> None:
    """List tools: model-visible name, class and its source, switch, flags."""
    rows = read_service().tools.list(connector)
    for r in rows:  # a stored row that did not read: named, with the fix (spec §2: read as unknown)
        if r.unreadable_notice:
            click.echo(f"notice: {r.unreadable_notice}", err=True)
    if as_json:
        return emit_json([r.as_dict() for r in rows])
    table([[r.name, r.tool_class.value, r.class_source.value, "on" if r.enabled else "off",
            "untrusted" if r.output_untrusted else "",
            ", ".join(f for f, on in (("changed — review", r.changed), ("hidden characters", r.hidden),
                                      ("look-alike name", r.look_alike), ("input schema flagged", r.schema_problem),
                                      (NEEDS_TASKS, r.needs_tasks)) if on)]
           for r in rows],
          ["NAME", "CLASS", "SOURCE", "SWITCH", "OUTPUT", "FLAGS"])


@tools_app.command("set-class")
@click.argument("name")
@click.argument("tool_class", metavar="read|write|destructive")
def tools_set_class(name: str, tool_class: str) -> None:
    """Set a tool's class (your choice beats builtin and hints)."""
    row = service().tools.set_class(name, tool_class)
    click.echo(f"{row.name}: class {row.tool_class.value} (source {row.class_source.value})")


@tools_app.command("reset")
@click.argument("name")
def tools_reset(name: str) -> None:
    """Drop your class choice for a tool."""
    row = service().tools.reset_class(name)
    click.echo(f"{row.name}: class {row.tool_class.value} (source {row.class_source.value})")


@tools_app.command("enable")
@click.argument("names", nargs=-1, required=True)
def tools_enable(names: tuple[str, ...]) -> None:
    """Switch tools on."""
    for r in service().tools.set_enabled(list(names), True):
        click.echo(f"{r.name}: on")


@tools_app.command("disable")
@click.argument("names", nargs=-1, required=True)
def tools_disable(names: tuple[str, ...]) -> None:
    """Switch tools off (never offered to the model)."""
    for r in service().tools.set_enabled(list(names), False):
        click.echo(f"{r.name}: off")


@tools_app.command("enable-read")
@click.argument("connector", required=False)
def tools_enable_read(connector: str | None) -> None:
    """Switch on every read tool (of CONNECTOR, or of all), except tools flagged changed or holding hidden
    characters (named, with how to switch them on)."""
    svc = service()
    rows = svc.tools.enable_read(connector)
    for r in rows:
        click.echo(f"{r.name}: on")
    click.echo(f"{len(rows)} read tool(s) switched on")
    # Read tools it leaves off on purpose, named with why and how (docs/mcp.md; a new-user trial missed them).
    for r in svc.tools.list(connector):
        if r.tool_class.value == "read" and not r.enabled and (r.changed or r.must_be_seen):
            why = ("its definition holds hidden characters: see it escaped with palui tools show NAME, then "
                   "palui tools enable NAME") if r.hidden else (
                "its name has look-alike characters: see what it reads like with palui tools show NAME, then "
                "palui tools enable NAME") if r.look_alike else (
                f"{r.schema_problem}: see it with palui tools show NAME, then palui tools enable NAME"
                if r.schema_problem and not r.changed else "it is flagged changed: palui tools review NAME")
            click.echo(f"left off: {visible(r.name)}: {why}")
    warning = svc.tools.budget_warning()
    if warning:
        click.echo(f"warning: {warning}", err=True)


KIND_WORDS = {
    "changed": "the server changed the description or input schema; the tool is off until you accept",
    "loosened": "the server asks for a looser class; the tool keeps its stricter class until you accept",
    "tightened": "the server's hints tightened the class past your choice; the stricter class applies",
}


def _json_block(value: Any) -> list[str]:
    if value is None:
        return ["    (none)"]
    return [
        "    " + visible(line)
        for line in json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, allow_nan=False).split("\n")
    ]


def _print_pending(p: PendingReview) -> None:
    """The pending change of a flagged tool: what kind, then a unified diff per changed part."""
    click.echo(f"Pending change ({p['kind']}): {KIND_WORDS.get(p['kind'], 'changed since you accepted it')}.")
    if p.get("previous_user_class"):
        click.echo(f"  (your class was {p['previous_user_class']})")
    if p["kind"] == "changed":
        click.echo(f"  Accepting switches it {'back on' if p.get('was_enabled') else 'nowhere: it stays off'}.")
    if not p["changes"]:
        click.echo("  No difference from the accepted definition: the server went back to it after a change.")
    for part in p["changes"]:
        click.echo(part["diff"])


@tools_app.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tools_show(name: str, as_json: bool) -> None:
    """Show a tool's stored definition and, if flagged, the pending change as a diff."""
    svc = service()
    d = svc.tools.details(name)
    if as_json:
        emit_json(d)  # escaped (hidden characters as \\u escapes): seen, so it may be switched on
        if d["hidden_characters"] or d["look_alike_name"] or d["schema_problem"]:
            svc.tools.acknowledge_hidden(name, d["definition_hash"])
        return
    flags = [
        w
        for w, on in (
            ("changed — review", d["changed"]),
            ("untrusted output", d["untrusted_output"]),
            ("trusted source", d["trusted_source"]),
            ("no longer listed", not d["present"]),
            ("hidden characters: shown escaped below", d["hidden_characters"]),
            (f"look-alike name: reads like {visible(skeleton(d['tool']))}", d["look_alike_name"]),
            (f"{NEEDS_TASKS} (never offered)", d.get("needs_tasks")),
            (f"input schema flagged: {d['schema_problem']}", d["schema_problem"]),
        )
        if on
    ]
    click.echo(d["name"])
    click.echo(f"  connector:    {d['connector']}")
    click.echo(f"  raw name:     {visible(d['tool'])}")
    click.echo(f"  class:        {d['class']} ({d['class_source']})")
    click.echo(f"  switch:       {'on' if d['enabled'] else 'off'}")
    click.echo(f"  flags:        {', '.join(flags) or '-'}")
    click.echo("  description:")
    click.echo("\n".join("    " + visible(line) for line in d["description"].split("\n")))
    click.echo(f"  input schema: {d['schema_chars']:,} characters as a model is sent it")
    click.echo("\n".join(_json_block(d["input_schema"])))
    click.echo("  annotations (raw, as sent):")
    click.echo("\n".join(_json_block(d["annotations"])))
    if d["pending"]:
        click.echo("")
        _print_pending(d["pending"])
    if d["look_alike_name"]:
        svc.tools.acknowledge_hidden(name, d["definition_hash"])
        click.echo("")
        click.echo(f"Its raw name has characters that look like others: {ascii(d['tool'])} reads like "
                   f"{visible(skeleton(d['tool']))}. Having seen it, you may switch it on: palui tools enable "
                   + d["name"])
    if d["schema_problem"] and not d["hidden_characters"]:
        svc.tools.acknowledge_hidden(name, d["definition_hash"])
        click.echo("")
        click.echo(f"Its input schema is flagged: {d['schema_problem']}. Having seen it, you may switch it on: "
                   f"palui tools enable {d['name']}")
    if d["hidden_characters"]:
        svc.tools.acknowledge_hidden(name, d["definition_hash"])
        click.echo("")
        click.echo("This definition has hidden characters (shown above as \\u… escapes); the model is sent it with them"
                   " removed. Having seen it, you may switch it on: palui tools enable " + d["name"])


@tools_app.command("review")
@click.argument("name")
@click.option("--yes", "-y", "yes", is_flag=True, help="Accept without asking (after printing the diff).")
def tools_review(name: str, yes: bool) -> None:
    """Show a changed tool's pending definition as a diff, then accept it if you confirm (spec §7)."""
    svc = service()
    d = svc.tools.details(name)
    if not d["pending"]:
        raise UsageError(f"{name} is not flagged for review")
    _print_pending(d["pending"])
    if not yes:
        if not sys.stdin.isatty():
            fail(
                f"not accepted: stdin is not a terminal; re-run with --yes to accept this definition "
                f"(palui tools review {name} --yes)"
            )
        if not click.confirm("Accept this definition?", default=False):
            fail(f"not accepted; {name} stays flagged" + (" and off" if not d["enabled"] else ""))
    # The fingerprint binds the acceptance to the change printed above (spec §7: no unseen definition).
    r = svc.tools.review(name, expected=d["pending"]["fingerprint"])
    click.echo(
        f"{r.name}: reviewed; class {r.tool_class.value} ({r.class_source.value}), {'on' if r.enabled else 'off'}"
    )


# -- policy ---------------------------------------------------------------------------------


@policy_app.command("explain")
@click.argument("name")
@click.option("--origin", default=None, help="chat (the default), job, webhook or gateway")
@click.option("--client", metavar="NAME", help="As a call of this gateway client now: its connectors and its taint "
                                               "(origin gateway).")
@click.option("--tainted", is_flag=True, help="Decide as in a tainted turn.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def policy_explain(name: str, origin: str | None, client: str | None, tainted: bool, as_json: bool) -> None:
    """Print the verdict and reason for a tool in a situation (spec §3; a gateway client's: §8.6)."""
    try:
        o = Origin(origin or ("gateway" if client else "chat"))
    except ValueError:
        fail(f"unknown origin {origin!r}: use chat, job, webhook or gateway", 2)
    if client and o is not Origin.GATEWAY:
        fail(f"--client asks about a gateway client: its origin is gateway, not {o.value}", 2)
    if client:
        result = service().gateway.explain(client, name, True if tainted else None)
    else:
        result = service().tools.explain(name, o, tainted, "the --tainted option" if tainted else None)
    if as_json:
        return emit_json(result)
    click.echo(f"{result['verdict']}: {result['reason'].split(': ', 1)[-1]}")
    for line in result.get("standing") or []:  # spec §5.9: the verdict stays ask
        click.echo(f"  then {shown(line, one_line=True)}")
    who = f"gateway client {result['client']}" if "client" in result else f"origin {result['origin']}"
    click.echo(
        f"  tool {visible(result['tool'])}, class {result['class']} ({result['class_source']}), "
        f"{who}, {'tainted' if result['tainted'] else 'untainted'}"
    )
