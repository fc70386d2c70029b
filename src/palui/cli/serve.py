"""``palui serve``: the long-running service (spec §8)."""

from __future__ import annotations

import click

from palui.cli.common import Setting, app, fail, service
from palui.errors import ConfigError


@app.command("serve")
@click.option("--host", type=Setting("serve.host"), metavar="HOST",
              help="Address to listen on (default serve.host, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default serve.port, 8765; 0 picks a free one).")
def serve_cmd(host: str | None, port: int | None) -> None:
    """Run the service: scheduler, webhooks, the JSON API and the web page. Stops cleanly on SIGTERM/SIGINT."""
    from palui.channels.manager import ChannelManager
    from palui.server.main import serve

    svc = service()
    try:
        serve(
            svc,
            host or svc.settings.serve.host,
            svc.settings.serve.port if port is None else port,
            click.echo,
            tick_seconds=float(__import__("os").environ.get("PALUI_TICK_SECONDS", "1")),
            serve_hooks=[ChannelManager],  # the chat channels run with the service (spec §8.3)
        )
    except ConfigError as e:  # the full apprise check (every other start checks the syntax only)
        fail(f"configuration error: {e}")
