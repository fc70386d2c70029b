"""``palui connectors login|logout`` and signing in on ``connectors add --url`` (OAuth 2.1, spec §7).

The person signs in in a browser: Palui opens it when it can (``webbrowser``) and always prints
the authorization URL; a listener on 127.0.0.1 takes the redirect. On a machine without a browser
(or with ``--no-browser``), open the URL anywhere and paste the address the browser ended on: the
first of the two that arrives is used (5 minutes at most). A client you registered yourself:
``--client-id ID``, its secret from a prompt (hidden) or ``--client-secret-file FILE``, never the
command line, and ``--redirect-uri`` when it fixes one (Palui then listens exactly there).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from palui.cli.common import CLEAN, connectors_app, emit_json, service
from palui.errors import UsageError
from palui.text.display import shown
from palui.types import OAuthClient, SignIn

if TYPE_CHECKING:
    import asyncio


def _read_pasted() -> asyncio.Future[str]:
    """A future for the next non-empty line of stdin (read in a daemon thread: an unread prompt never
    keeps the process alive); at the end of input it never resolves (the listener may still answer)."""
    import asyncio
    import threading

    loop = asyncio.get_running_loop()
    fut: asyncio.Future[str] = loop.create_future()

    def give(value: str) -> None:
        if not fut.done():
            fut.set_result(value)

    def work() -> None:
        try:
            for line in sys.stdin:
                if line.strip():
                    loop.call_soon_threadsafe(give, line.strip())
                    return
        except (OSError, ValueError):
            return

    threading.Thread(target=work, daemon=True, name="palui-paste").start()
    return fut


def terminal_sign_in(no_browser: bool = False) -> SignIn:
    """The :class:`~palui.types.SignIn` of this terminal (see the module docstring)."""

    async def show(url: str) -> None:
        import webbrowser
        from urllib.parse import parse_qs, urlsplit

        # spec §7.11: the person sees what the sign-in asks for before any browser opens
        asked = (parse_qs(urlsplit(url).query).get("scope") or [""])[0].split()
        click.echo("The sign-in asks for: " + (" ".join(shown(s, one_line=True) for s in asked) if asked
                                                else "the server's default access (no scope named)"))
        opened = False
        if not no_browser:
            try:
                webbrowser.get()
                opened = webbrowser.open(url)
            except webbrowser.Error:
                opened = False
        click.echo("The server wants you to sign in. " + ("Your browser was opened at:" if opened
                                                          else "Open this address in a browser:"))
        click.echo(f"  {url}")
        click.echo("Palui waits (5 minutes at most). If the browser cannot come back to this machine, paste the "
                   "address it ended on here:", err=True)

    async def paste() -> str:
        return await _read_pasted()

    return SignIn(show=show, paste=paste)


def client_option(client_id: str | None, secret_file: Path | None, auth: str,
                  redirect_uri: str | None = None) -> OAuthClient | None:
    """The client the person registered themselves: the secret from ``secret_file`` or a hidden prompt
    (empty: a public client), never from the command line; ``redirect_uri`` when the client fixes one
    (a loopback ``http://127.0.0.1:PORT/PATH``: Palui listens exactly there)."""
    import getpass
    from urllib.parse import urlsplit

    if not client_id:
        if secret_file is not None or redirect_uri is not None:
            raise UsageError("--client-secret-file and --redirect-uri go with --client-id")
        return None
    if redirect_uri is not None:
        try:
            parts = urlsplit(redirect_uri)
            port = parts.port
        except ValueError:
            port = None
            parts = urlsplit("")
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost") or not port or parts.query:
            raise UsageError("--redirect-uri is a loopback address with a port: http://127.0.0.1:PORT/PATH")
    if auth not in ("basic", "post"):
        raise UsageError("--client-auth is basic or post")
    if secret_file is not None:
        from palui.files import SECRET_MAX_BYTES, Unreadable, read_text

        try:
            secret = read_text(secret_file, SECRET_MAX_BYTES).strip()  # /dev/zero is endless
        except Unreadable as e:
            raise UsageError(f"--client-secret-file: cannot read {secret_file}: {e}") from None
    elif sys.stdin.isatty():
        secret = getpass.getpass(f"Client secret of {client_id} (empty for a public client): ").strip()
    else:
        secret = ""
    return OAuthClient(client_id=client_id, client_secret=secret or None, auth_method=f"client_secret_{auth}",
                       redirect_uri=redirect_uri)


@connectors_app.command("login")
@click.argument("cid", metavar="ID")
@click.option("--client-id", help="A client you registered at the server yourself.")
@click.option("--client-secret-file", type=click.Path(path_type=Path), help="Its secret, from this file.")
@click.option("--client-auth", default="basic", help="How the client authenticates: basic or post.")
@click.option("--redirect-uri", type=CLEAN, help="The loopback redirect URI that client fixes (http://127.0.0.1:PORT/…).")
@click.option("--no-browser", is_flag=True, help="Print the address instead of opening a browser.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def connectors_login(cid: str, client_id: str | None, client_secret_file: Path | None, client_auth: str,
                     redirect_uri: str | None, no_browser: bool, as_json: bool) -> None:
    """Sign in to a remote MCP server (OAuth); its tools are offered again."""
    import asyncio

    svc = service()
    client = client_option(client_id, client_secret_file, client_auth, redirect_uri)

    async def go() -> dict[str, Any]:
        try:
            return await svc.signin.login_async(cid, terminal_sign_in(no_browser), client)
        finally:
            await svc.close()

    r = asyncio.run(go())
    if as_json:
        return emit_json(r)
    click.echo(f"{cid}: signed in and connected" if r["signed_in"] else f"{cid}: connected (no sign-in was needed)")
    if r.get("scopes"):
        click.echo(f"  scopes held: {' '.join(shown(s, one_line=True) for s in r['scopes'])}")
    for rid in r.get("granted") or []:
        click.echo(f"  {rid}: granted (the tool that asked for more access can run)")
    for rid in r.get("waiting") or []:
        click.echo(f"  {rid}: still waiting (the sign-in did not give every scope it needs)")


@connectors_app.command("logout")
@click.argument("cid", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def connectors_logout(cid: str, as_json: bool) -> None:
    """Sign out of a remote MCP server: its tokens are revoked (where the server offers it) and deleted."""
    import asyncio

    r = asyncio.run(service().signin.logout_async(cid))
    if as_json:
        return emit_json(r)
    click.echo(f"{cid}: signed out (tokens deleted; revocation: {r['revocation']})")


@connectors_app.command("allow-secret-questions")
@click.argument("cid", metavar="ID")
@click.option("--off", is_flag=True, help="Refuse them again (the default).")
def connectors_allow_secret_questions(cid: str, off: bool) -> None:
    """Let this MCP server's questions ask for a secret (a password, a token, a card number…): you answer them
    with hidden input, never on a command line or in a chat, and Palui never stores the value. Without this,
    such a question is refused and you are told (spec §7.8)."""
    service().elicitations.allow_secret_questions(cid, not off)
    click.echo(f"{cid}: questions that ask for a secret are " + ("refused (the default)" if off else
               "asked with hidden input (the value is never stored, logged or put in a conversation)"))
