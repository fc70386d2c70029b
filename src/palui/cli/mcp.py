"""``palui connectors add|import|remove|refresh|trust|show|enable|disable`` (MCP servers, SPEC §7)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from palui.cli.common import connectors_app, emit_json, service
from palui.errors import UsageError
from palui.text.display import shown, shown_json


def _print_report(r: dict) -> None:
    for key, label in (("changed", "changed — switched off, review it"), ("tightened", "class tightened — review it"),
                       ("loosening_held", "asks for a looser class — held until review"),
                       ("removed", "no longer listed"), ("refused_duplicates", "listed twice — both refused")):
        for name in r.get(key, []):
            typer.echo(f"  {name}: {label}")
    for c in r.get("class_tightened", []):
        typer.echo(f"  {shown(c['tool'], one_line=True)}: class tightened by the server from {c['from']} to {c['to']}")


@connectors_app.command("add")
def connectors_add(
    name: str = typer.Argument(..., help="A name for the server; the id becomes mcp-<slug>."),
    command: list[str] | None = typer.Argument(None, metavar="-- COMMAND [ARGS…]",
                                                  help="The stdio server's command line, after --."),
    url: str | None = typer.Option(None, "--url", help="A streamable HTTP server's URL (instead of a command)."),
    env: list[str] = typer.Option([], "--env", metavar="KEY[=VALUE]",
                                  help="Environment for a stdio server (a secret). KEY alone takes $KEY."),
    header: list[str] = typer.Option([], "--header", metavar="KEY=VALUE", help="HTTP header (a secret)."),
    cwd: str | None = typer.Option(None, "--cwd", help="Working directory of a stdio server."),
    enable_read: bool = typer.Option(False, "--enable-read", help="Switch on its read tools at once."),
    timeout: float | None = typer.Option(None, "--timeout", metavar="S", help="Per-call timeout in seconds."),
    max_output: int | None = typer.Option(None, "--max-output", metavar="BYTES", help="Output size limit in bytes."),
    client_id: str | None = typer.Option(None, "--client-id", help="OAuth: a client you registered yourself."),
    client_secret_file: Path | None = typer.Option(None, "--client-secret-file", help="OAuth: its secret file."),
    client_auth: str = typer.Option("basic", "--client-auth", help="OAuth: how the client authenticates (basic|post)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="OAuth: print the sign-in address, open no browser."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Connect an MCP server, list its tools and store them (switched off). A remote server that wants
    OAuth is signed in to on the way (a browser, or the address printed and the redirect pasted)."""
    if bool(url) == bool(command):
        raise UsageError("give either -- COMMAND [ARGS…] (stdio) or --url URL (streamable HTTP)")
    if url and (env or cwd):
        raise UsageError("--env and --cwd are for stdio servers; an HTTP server takes --header")
    if command and header:
        raise UsageError("--header is for HTTP servers; a stdio server takes --env")
    if command and (client_id or client_secret_file):
        raise UsageError("--client-id is for remote (HTTP) servers that sign in with OAuth")
    from palui.text.mcp_config import ServerConfig, parse_pairs

    if url:
        config = ServerConfig("http", url=url, headers=parse_pairs(header, "--header", os.environ),
                              timeout_seconds=timeout, max_output_bytes=max_output)
    else:
        command = command or [""]  # not empty: checked above
        config = ServerConfig("stdio", command=command[0], args=tuple(command[1:]), cwd=cwd,
                              env=parse_pairs(env, "--env", os.environ),
                              timeout_seconds=timeout, max_output_bytes=max_output)
    sign_in = client = None
    if url:
        from palui.cli.signin import client_option, terminal_sign_in

        client = client_option(client_id, client_secret_file, client_auth)
        sign_in = terminal_sign_in(no_browser)
    result = service().mcp_add(name, config, enable_read=enable_read, sign_in=sign_in, client=client)
    if as_json:
        return emit_json(result)
    typer.echo(f"{result['id']}: connected, {len(result['tools'])} tool(s), "
               f"{len(result['enabled'])} switched on")
    _print_report({"refused_duplicates": result["refused_duplicates"]})
    if not enable_read:
        typer.echo(f"New tools start off: palui tools enable-read {result['id']}, or palui tools enable NAME")
    warning = service().tool_budget_warning() if enable_read else None
    if warning:
        typer.echo(f"warning: {warning}", err=True)


@connectors_app.command("import")
def connectors_import(
    file: str = typer.Argument(..., help='A JSON file {"mcpServers": {name: {command,args,env} | {url,headers}}}.'),
    enable_read: bool = typer.Option(False, "--enable-read", help="Switch on the read tools of each server."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Add every server of an mcpServers JSON file (${VAR} taken from the environment)."""
    results = service().mcp_import(file, enable_read=enable_read)
    if as_json:
        emit_json(results)
    else:
        for r in results:
            typer.echo(f"{r['name']}: {r['status']}" + (f" ({r['id']})" if r.get("id") else "")
                       + (f": {r['message']}" if r.get("message") else ""))
    if any(r["status"] == "error" for r in results):
        raise typer.Exit(1)


@connectors_app.command("remove")
def connectors_remove(cid: str = typer.Argument(..., metavar="ID")) -> None:
    """Remove an MCP connector, its tools, secrets and logs."""
    service().mcp_remove(cid)
    typer.echo(f"{cid}: removed")


@connectors_app.command("refresh")
def connectors_refresh(cid: str = typer.Argument(..., metavar="ID"),
                       as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Re-list a server's tools; changed definitions are switched off and flagged for review."""
    r = service().mcp_refresh(cid)
    if as_json:
        return emit_json(r)
    typer.echo(f"{cid}: {r['state']}; {len(r['added'])} new, {len(r['changed'])} changed, "
               f"{len(r['removed'])} gone")
    _print_report(r)


@connectors_app.command("trust")
def connectors_trust(cid: str = typer.Argument(..., metavar="ID"),
                     tool: str | None = typer.Option(None, "--tool", help="Only this tool (its name or raw name)."),
                     untrust: bool = typer.Option(False, "--untrust", help="Remove the mark again.")) -> None:
    """Mark a connector (or one tool) a trusted source: its output no longer taints turns."""
    svc = service()
    name = svc.resolve_tool(cid, tool) if tool else None
    svc.set_trusted(cid, name, not untrust)
    what = name or cid
    typer.echo(f"{what}: {'not ' if untrust else ''}a trusted source")


@connectors_app.command("show")
def connectors_show(cid: str = typer.Argument(..., metavar="ID"),
                    as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show an MCP connector's configuration (secret values redacted)."""
    cfg = service().mcp_config(cid)
    if as_json:
        return emit_json(cfg)
    for k, v in cfg.items():
        if v not in (None, [], {}):
            typer.echo(f"{k}: {shown(v if isinstance(v, str) else shown_json(v, note=False))}")


@connectors_app.command("enable")
def connectors_enable(cid: str = typer.Argument(..., metavar="ID")) -> None:
    """Enable an MCP connector again."""
    service().mcp_set_enabled(cid, True)
    typer.echo(f"{cid}: enabled")


@connectors_app.command("disable")
def connectors_disable(cid: str = typer.Argument(..., metavar="ID")) -> None:
    """Disable an MCP connector: none of its tools is offered or called."""
    service().mcp_set_enabled(cid, False)
    typer.echo(f"{cid}: disabled")

