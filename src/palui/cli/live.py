"""Where a command's turn runs: in the live service of this PALUI_HOME when one runs (over HTTP,
:mod:`palui.cli.client`), else in this process (spec §8).

Shared by the commands that run or resume turns (``palui run``, ``approvals``, ``elicitations
answer``, ``jobs run``); kept apart from them so that none of those modules imports another.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from palui.cli.client import ServiceClient
    from palui.service.api import Service

T = TypeVar("T")


def run_async(svc: Service, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a new event loop, then close the connectors it started in this process."""
    # here, not at the top: only commands that run a loop pay for it (docs/decisions/0085-a-light-cli-start.md)
    import asyncio

    async def wrapper() -> T:
        try:
            return await coro
        finally:
            await svc.close()

    return asyncio.run(wrapper())


def live_service(svc: Service) -> ServiceClient | None:
    """A client for the service running on this PALUI_HOME, or None (then the turn runs in-process)."""
    from palui.server.discovery import find_service

    info = find_service(svc.settings)
    if info is None:
        return None
    from palui.cli.client import ServiceClient

    client = ServiceClient(info)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:  # its connections close with the command, not only with the process
        ctx.call_on_close(client.close)
    return client
