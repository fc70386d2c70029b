"""``palui gateway --client NAME`` (the stdio bridge), ``palui gateway clients add|list|remove|show|clear``,
``palui gateway sessions`` and ``palui gateway resume`` (spec §8.6, docs/gateway.md)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from palui.cli.common import app, emit_json, fail, service, table

if TYPE_CHECKING:
    from palui.results import GatewayClient

TOKEN_PLACEHOLDER = "<the token shown by palui gateway clients add>"


@app.group("gateway", invoke_without_command=True)
@click.option("--client", "client", metavar="NAME", help="Run the stdio bridge for this client.")
@click.pass_context
def gateway_app(ctx: click.Context, client: str | None) -> None:
    """Offer your governed tools to other MCP clients (coding agents, desktop apps, editors).

    With --client NAME: a stdio MCP server relaying to the running service's /mcp, for clients that start
    a command; the client's token comes from PALUI_GATEWAY_TOKEN. docs/gateway.md has each client's setup.
    """
    if ctx.invoked_subcommand is not None:
        return
    if not client:
        click.echo(ctx.get_help())
        ctx.exit(2)
    import anyio

    from palui.config import load_settings
    from palui.discovery import find_service
    from palui.gateway.bridge import TOKEN_ENV, Bridge

    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        from palui.text.display import named

        fail(f"set {TOKEN_ENV} to the token of gateway client {named(client)} (palui gateway clients add NAME)")
    settings = load_settings()

    def find() -> str | None:  # asked again whenever the bridge has no connection: a service started later is found
        info = find_service(settings)
        return info.url if info else None

    anyio.run(Bridge(find, token, str(settings.home)).run)


@gateway_app.group("clients", no_args_is_help=True)
def clients_app() -> None:
    """The MCP clients allowed to use the gateway, each with its own token."""


def snippets(name: str, token: str, url: str) -> str:
    """The configuration to paste into an MCP client: over HTTP (``url`` ``/mcp`` with the token) and over
    stdio (the bridge with the token in its environment)."""
    http = {"mcpServers": {"palui": {"type": "http", "url": f"{url}/mcp",
                                     "headers": {"Authorization": f"Bearer {token}"}}}}
    command, args = _bridge_command()
    env = {"PALUI_GATEWAY_TOKEN": token}
    if os.environ.get("PALUI_HOME"):  # the client's process must find this home, not the default one
        env["PALUI_HOME"] = str(Path(os.environ["PALUI_HOME"]).resolve())
    stdio = {"mcpServers": {"palui": {"command": command, "args": [*args, "gateway", "--client", name],
                                      "env": env}}}
    return (f"Over HTTP (the service must run: palui serve):\n{json.dumps(http, indent=2, allow_nan=False)}\n"
            f"Over stdio (a client that starts a command):\n{json.dumps(stdio, indent=2, allow_nan=False)}\n"
            "docs/gateway.md shows where each client (Claude Code, Claude Desktop, Codex, Cursor, VS Code, Goose) "
            "reads this.")


def _bridge_command() -> tuple[str, list[str]]:
    """The command an MCP client starts for the stdio bridge: the full path of this installation's ``palui``
    (a client starts it without the person's shell, so neither a virtual environment nor PATH applies), else
    this interpreter with ``-m palui``."""
    script = Path(sys.executable).parent / "palui"
    if script.is_file() and os.access(script, os.X_OK):
        return str(script), []
    found = shutil.which("palui")
    return (str(Path(found).resolve()), []) if found else (sys.executable, ["-m", "palui"])


def _url() -> str:
    svc = service()
    return f"http://127.0.0.1:{svc.settings.serve.port}"


def _line(c: GatewayClient) -> str:
    seen = ", ".join(c["connectors"]) if c["connectors"] is not None else "every MCP connector"
    cap = f"{c['calls_per_hour']} calls an hour" if c["calls_per_hour"] else "the default calls an hour"
    return f"{c['name']}: sees {seen}; context {c['context']}; {cap}; {c['open_sessions']} open session(s)"


@clients_app.command("add")
@click.argument("name")
@click.option("--connectors", metavar="A,B", help="Only these connectors (default: every connector).")
@click.option("--context", type=click.Choice(["trusted"]), default=None,
              help="Its sessions start untainted (default: tainted, its context is unknown).")
@click.option("--calls-per-hour", type=click.IntRange(1, 10_000), default=None, metavar="N",
              help="At most N calls sent to connectors in any 60 minutes "
                   "(default: caps.gateway_client_calls_per_hour).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with the token).")
def clients_add(name: str, connectors: str | None, context: str | None, calls_per_hour: int | None,
                as_json: bool) -> None:
    """Add a client and print its token, once (only its hash is stored), with the configuration to paste."""
    chosen = [c.strip() for c in connectors.split(",") if c.strip()] if connectors is not None else None
    c = service().gateway.add_client(name, chosen, context or "unknown", calls_per_hour)
    if as_json:
        return emit_json(c)
    click.echo(f"Added gateway client {_line(c)}.")
    click.echo(f"Its token (shown once, stored hashed): {c.get('token')}")
    click.echo(snippets(name, c.get("token", ""), _url()))


@clients_app.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def clients_list(as_json: bool) -> None:
    """The gateway's clients."""
    rows = service().gateway.clients()
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("No gateway clients (palui gateway clients add NAME).")
        return
    table([[c["name"], ", ".join(c["connectors"]) if c["connectors"] is not None else "every MCP", c["context"],
            str(c["calls_per_hour"] or "default"), str(c["open_sessions"])] for c in rows],
          ["NAME", "CONNECTORS", "CONTEXT", "CALLS/HOUR", "OPEN SESSIONS"])


@clients_app.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def clients_show(name: str, as_json: bool) -> None:
    """A client and the configuration to paste into it (its token is not stored: paste the one shown at add)."""
    c = service().gateway.client(name)
    if as_json:
        return emit_json(c)
    click.echo(_line(c))
    click.echo(snippets(name, TOKEN_PLACEHOLDER, _url()))


@clients_app.command("remove")
@click.argument("name")
def clients_remove(name: str) -> None:
    """Remove a client: its token opens nothing from now on, its open sessions end."""
    ended = service().gateway.remove_client(name)
    click.echo(f"Removed gateway client {name}" + (f"; ended {len(ended)} open session(s)." if ended else "."))


@clients_app.command("clear")
@click.argument("name")
def clients_clear(name: str) -> None:
    """Forget what the client's sessions carried: its taint, the calls you denied, its loop counts and loop stop
    (they are kept per client, not per session). Its open sessions end; its next one starts afresh."""
    ended = service().gateway.clear_client(name)
    click.echo(f"Cleared gateway client {name}: its taint, denied calls and loop counts are forgotten"
               + (f"; ended {len(ended)} open session(s)." if ended else "."))


@gateway_app.command("resume")
def gateway_resume() -> None:
    """Take gateway calls and sessions again after palui stop --all (the emergency brake pauses the gateway)."""
    was = service().gateway.resume()
    click.echo("gateway resumed" if was else "the gateway was not paused")


@gateway_app.command("sessions")
@click.option("--client", "client", metavar="NAME", help="Only this client's sessions.")
@click.option("--end", "end", metavar="ID", multiple=True,
              help="End this open session (repeatable): its id answers 404 from then on; its approvals stay.")
@click.option("--ended", is_flag=True, help="List ended sessions too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gateway_sessions(client: str | None, end: tuple[str, ...], ended: bool, as_json: bool) -> None:
    """The gateway's open sessions (each MCP session of a client), and ending them (spec §8.6)."""
    svc = service()
    if end:
        done = [svc.gateway.stop_session(sid) for sid in end]
        if as_json:
            return emit_json(done)
        for s in done:
            click.echo(f"ended gateway session {s['id']} of {s['client']} ({s['calls']} call(s))")
        return
    rows = svc.gateway.sessions(client, ended)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("No open gateway sessions." if not ended else "No gateway sessions.")
        return
    table([[s["id"], s["client"], _when(s["created_at"]), _when(s["last_used_at"]), str(s["calls"]),
            (f"ended {_when(s['ended_at'])}: {s['end_reason']}" if s["ended_at"] else "open")] for s in rows],
          ["SESSION", "CLIENT", "OPENED", "LAST USED", "CALLS", "STATE"])


def _when(t: float | None) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""
