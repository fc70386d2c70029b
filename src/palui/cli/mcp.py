"""``palui connectors add|import|remove|refresh|trust|show|enable|disable`` (MCP servers, spec §7)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from palui.cli.common import CLEAN, Setting, connectors_app, emit_json, service
from palui.errors import UsageError
from palui.text.display import shown, shown_json


def _print_report(r: Mapping[str, Any]) -> None:
    """What a listing changed (:class:`~palui.results.ListingChanges`, or some of its keys), one line each."""
    for key, label in (("changed", "changed — switched off, review it"), ("tightened", "class tightened — review it"),
                       ("loosening_held", "asks for a looser class — held until review"),
                       ("removed", "no longer listed"), ("refused_duplicates", "listed twice — both refused")):
        for name in r.get(key, []):
            click.echo(f"  {name}: {label}")
    for c in r.get("class_tightened", []):
        click.echo(f"  {shown(c['tool'], one_line=True)}: class tightened by the server from {c['from']} to {c['to']}")
    for f in r.get("schema_flagged", []):
        click.echo(f"  {shown(f['tool'], one_line=True)}: {shown(f['why'], one_line=True)}; it stays off until you "
                   "have seen it: palui tools show NAME")


@connectors_app.command("add")
@click.argument("name", help="A name for the server; the id becomes mcp-<slug>.")
@click.argument("command", nargs=-1, required=False, metavar="[-- COMMAND [ARGS…]]",
                help="The stdio server's command line, after --.")
@click.option("--url", type=CLEAN, help="A streamable HTTP server's URL (instead of a command).")
@click.option("--env", multiple=True, metavar="KEY[=VALUE]",
              help="Environment for a stdio server (a secret). KEY alone takes $KEY.")
@click.option("--header", multiple=True, metavar="KEY=VALUE", help="HTTP header (a secret).")
@click.option("--cwd", type=CLEAN, help="Working directory of a stdio server.")
@click.option("--enable-read", is_flag=True, help="Switch on its read tools at once.")
@click.option("--timeout", type=Setting("mcp.call_timeout_seconds"), metavar="S",
              help="Per-call timeout in seconds (default and range: mcp.call_timeout_seconds).")
@click.option("--max-output", type=Setting("mcp.max_output_bytes"), metavar="BYTES",
              help="Output size limit in bytes (default and range: mcp.max_output_bytes).")
@click.option("--client-id", help="OAuth: a client you registered yourself.")
@click.option("--client-secret-file", type=click.Path(path_type=Path), help="OAuth: its secret file.")
@click.option("--client-auth", default="basic", help="OAuth: how the client authenticates (basic|post).")
@click.option("--redirect-uri", type=CLEAN,
              help="OAuth: the loopback redirect URI that client fixes (http://127.0.0.1:PORT/…).")
@click.option("--no-browser", is_flag=True, help="OAuth: print the sign-in address, open no browser.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def connectors_add(name: str, command: tuple[str, ...], url: str | None, env: tuple[str, ...],
                   header: tuple[str, ...], cwd: str | None, enable_read: bool, timeout: float | None,
                   max_output: int | None, client_id: str | None, client_secret_file: Path | None, client_auth: str,
                   redirect_uri: str | None, no_browser: bool, as_json: bool) -> None:
    """Connect an MCP server, list its tools and store them (switched off). A remote server that wants
    OAuth is signed in to on the way (a browser, or the address printed and the redirect pasted)."""
    if bool(url) == bool(command):
        raise UsageError("give either -- COMMAND [ARGS…] (stdio) or --url URL (streamable HTTP)")
    if url and (env or cwd):
        raise UsageError("--env and --cwd are for stdio servers; an HTTP server takes --header")
    if command and header:
        raise UsageError("--header is for HTTP servers; a stdio server takes --env")
    if command and (client_id or client_secret_file or redirect_uri):
        raise UsageError("--client-id is for remote (HTTP) servers that sign in with OAuth")
    from palui.text.mcp_config import ServerConfig, parse_pairs

    if url:
        config = ServerConfig("http", url=url, headers=parse_pairs(header, "--header", os.environ),
                              timeout_seconds=timeout, max_output_bytes=max_output)
    else:
        words = list(command) or [""]  # not empty: checked above
        config = ServerConfig("stdio", command=words[0], args=tuple(words[1:]), cwd=cwd,
                              env=parse_pairs(env, "--env", os.environ),
                              timeout_seconds=timeout, max_output_bytes=max_output)
    sign_in = client = None
    if url:
        from palui.cli.signin import client_option, terminal_sign_in

        client = client_option(client_id, client_secret_file, client_auth, redirect_uri)
        sign_in = terminal_sign_in(no_browser)
    result = service().connectors.add(name, config, enable_read=enable_read, sign_in=sign_in, client=client)
    if as_json:
        return emit_json(result)
    click.echo(f"{result['id']}: connected, {len(result['tools'])} tool(s), "
               f"{len(result['enabled'])} switched on")
    _print_report({"refused_duplicates": result["refused_duplicates"], "schema_flagged": result["schema_flagged"]})
    if not enable_read:
        click.echo(f"New tools start off: palui tools enable-read {result['id']}, or palui tools enable NAME")
    warning = service().tools.budget_warning() if enable_read else None
    if warning:
        click.echo(f"warning: {warning}", err=True)


@connectors_app.command("import")
@click.argument("file", help='A JSON file {"mcpServers": {name: {command,args,env} | {url,headers}}}.')
@click.option("--enable-read", is_flag=True, help="Switch on the read tools of each server.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def connectors_import(file: str, enable_read: bool, as_json: bool) -> None:
    """Add every server of an mcpServers JSON file (${VAR} taken from the environment)."""
    results = service().connector_import.from_file(file, enable_read=enable_read)
    if as_json:
        emit_json(results)
    else:
        for r in results:
            # The name and message come from the file: escaped like every other surface (spec §4.7).
            click.echo(f"{shown(r['name'], one_line=True)}: {r['status']}" + (f" ({r['id']})" if r.get("id") else "")
                       + (f": {shown(r['message'])}" if r.get("message") else ""))
    if any(r["status"] == "error" for r in results):
        raise click.exceptions.Exit(1)


@connectors_app.command("remove")
@click.argument("cid", metavar="ID")
def connectors_remove(cid: str) -> None:
    """Remove an MCP connector, its tools, secrets and logs."""
    service().connectors.remove(cid)
    click.echo(f"{cid}: removed")


@connectors_app.command("refresh")
@click.argument("cid", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def connectors_refresh(cid: str, as_json: bool) -> None:
    """Re-list a server's tools; changed definitions are switched off and flagged for review. With a
    ``palui serve`` running, its own session is refreshed (a session the server lost is started again)."""
    from palui.cli.client import segment
    from palui.cli.live import live_service

    svc = service()
    client = live_service(svc)
    if client is not None:
        try:
            r = client.post(f"/api/connectors/{segment(cid, 'connector id')}/refresh")
        finally:
            client.close()
    else:
        r = svc.connectors.refresh(cid)
    if as_json:
        return emit_json(r)
    click.echo(f"{cid}: {r['state']}; {len(r['added'])} new, {len(r['changed'])} changed, "
               f"{len(r['removed'])} gone")
    if r.get("recovered"):
        click.echo(f"  recovered: {shown(r['recovered'], one_line=True)}")
    _print_report(r)


@connectors_app.command("trust")
@click.argument("cid", metavar="ID")
@click.option("--tool", help="Only this tool (its name or raw name).")
@click.option("--untrust", is_flag=True, help="Remove the mark again.")
def connectors_trust(cid: str, tool: str | None, untrust: bool) -> None:
    """Mark a connector (or one tool) a trusted source: its output no longer taints turns."""
    svc = service()
    name = svc.connectors.resolve_tool(cid, tool) if tool else None
    svc.tools.set_trusted(cid, name, not untrust)
    what = name or cid
    click.echo(f"{what}: {'not ' if untrust else ''}a trusted source")


@connectors_app.command("show")
@click.argument("cid", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def connectors_show(cid: str, as_json: bool) -> None:
    """Show an MCP connector's configuration (secret values redacted)."""
    cfg = service().connectors.config(cid)
    if as_json:
        return emit_json(cfg)
    for k, v in cfg.items():
        if v not in (None, [], {}):
            click.echo(f"{k}: {shown(v if isinstance(v, str) else shown_json(v, note=False))}")


@connectors_app.command("enable")
@click.argument("cid", metavar="ID")
def connectors_enable(cid: str) -> None:
    """Enable an MCP connector again."""
    service().connectors.set_enabled(cid, True)
    click.echo(f"{cid}: enabled")


@connectors_app.command("disable")
@click.argument("cid", metavar="ID")
def connectors_disable(cid: str) -> None:
    """Disable an MCP connector: none of its tools is offered or called."""
    service().connectors.set_enabled(cid, False)
    click.echo(f"{cid}: disabled")

