"""``palui channels …``: chat channels (Telegram, Matrix, Slack, Discord, email) run by ``palui serve`` (spec
§8.3; docs/channels.md).

Secrets never come from the command line: a bot token, Matrix password or access token, Slack's two tokens, a
mailbox password are read from a file (``--token-file``/``--password-file``/``--app-token-file``, ``-`` for
standard input), from its variable (``PALUI_TELEGRAM_TOKEN``, ``PALUI_MATRIX_PASSWORD``, ``PALUI_MATRIX_TOKEN``,
``PALUI_SLACK_BOT_TOKEN``, ``PALUI_SLACK_APP_TOKEN``, ``PALUI_DISCORD_TOKEN``, ``PALUI_EMAIL_PASSWORD``; read
only here), or from a hidden prompt at a terminal. A Matrix password is used once to log in and never stored;
a mailbox password is stored in the channel's 0600 secrets file (IMAP and SMTP need it at every login).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from palui.channels import check_matrix_user, check_telegram_token
from palui.channels import check_url as _check_url
from palui.channels import is_loopback_url as _loopback_url
from palui.cli.common import CLEAN, emit_json, fail, group, service, table
from palui.errors import UsageError
from palui.text.display import shown
from palui.text.when import local

if TYPE_CHECKING:
    from datetime import tzinfo

    from palui.channels.redaction import Redactor
    from palui.results import ChatChannel
    from palui.service.api import Service

channels_app = group("channels", "Chat channels: talk to Palui and answer approvals from Telegram, Matrix, Slack, "
                     "Discord or email.")


def read_secret(what: str, variable: str, file: Path | None) -> str | None:
    """A secret from ``file`` (``-``: standard input; a regular file of at most 64 KiB),
    else ``variable``, else a hidden prompt at a terminal; None when none of them gives one. Raises
    UsageError for a file that cannot be read."""
    from palui.files import SECRET_MAX_BYTES, Unreadable, read_stream_text, read_text

    if file is not None:
        try:
            text = (read_stream_text(sys.stdin, SECRET_MAX_BYTES) if str(file) == "-"
                    else read_text(file, SECRET_MAX_BYTES))
        except Unreadable as e:
            raise UsageError(f"{shown(str(file), one_line=True)}: {e}") from None
        return text.strip() or None
    if os.environ.get(variable):
        return os.environ[variable].strip()
    if sys.stdin.isatty():
        return click.prompt(what, hide_input=True).strip() or None
    return None


@channels_app.command("add")
@click.argument("kind", metavar="KIND", help="telegram, matrix, slack, discord or email")
@click.option("--name", help="A name for the channel (default: the kind).")
@click.option("--token-file", type=click.Path(path_type=Path),
              help="File with the bot token (Telegram, Slack's xoxb-, Discord) or Matrix access token "
                   "('-': standard input).")
@click.option("--app-token-file", type=click.Path(path_type=Path),
              help="Slack: file with the app-level token (xapp-, for Socket Mode).")
@click.option("--password-file", type=click.Path(path_type=Path),
              help="File with the Matrix password, or the mailbox's (app) password for email.")
@click.option("--homeserver", type=CLEAN, help="Matrix: the homeserver's URL (https).")
@click.option("--user", type=CLEAN, help="Matrix: Palui's account, e.g. @palui:example.org.")
@click.option("--api-base", type=CLEAN, hidden=True,
              help="Telegram, Slack or Discord API base URL (loopback only: for tests).")
@click.option("--address", type=CLEAN,
              help="Email: the mailbox Palui reads and sends from, e.g. palui@example.org.")
@click.option("--imap-host", type=CLEAN, help="Email: the IMAP server.")
@click.option("--imap-port", type=int, default=993, show_default=True, help="Email: the IMAP port.")
@click.option("--imap-security", type=click.Choice(["tls", "starttls", "none"]),
              help="Email: implicit TLS (993), STARTTLS (143); none only on loopback. Default: by the port.")
@click.option("--smtp-host", type=CLEAN, help="Email: the SMTP server.")
@click.option("--smtp-port", type=int, default=465, show_default=True, help="Email: the SMTP port.")
@click.option("--smtp-security", type=click.Choice(["tls", "starttls", "none"]),
              help="Email: implicit TLS (465), STARTTLS (587); none only on loopback. Default: by the port.")
@click.option("--login", "login_name", type=CLEAN, help="Email: the login name, if it is not the address.")
@click.option("--authserv-id", type=CLEAN,
              help="Email: the receiving server's id in Authentication-Results (e.g. mx.google.com).")
@click.option("--folder", type=CLEAN, default="INBOX", show_default=True, help="Email: the folder Palui reads.")
@click.option("--poll-seconds", type=float, hidden=True, help="Email: seconds between polls without IDLE (tests).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def channels_add(kind: str, name: str | None, token_file: Path | None, app_token_file: Path | None,
                 password_file: Path | None, homeserver: str | None, user: str | None, api_base: str | None,
                 address: str | None, imap_host: str | None, imap_port: int, imap_security: str | None,
                 smtp_host: str | None, smtp_port: int, smtp_security: str | None, login_name: str | None,
                 authserv_id: str | None, folder: str, poll_seconds: float | None, as_json: bool) -> None:
    """Add a chat channel: Telegram, Matrix, Slack, Discord or email (docs/channels.md). It starts unpaired; pair
    it with `palui channels pair NAME`. Secrets: never on the command line. Adding a channel of the same kind
    and name again stores the new secret and keeps the pairing."""
    from palui.channels.redaction import Redactor

    redact = Redactor()
    svc = service()
    if api_base is not None and kind in ("telegram", "slack", "discord") \
            and not _loopback_url(_check_url(api_base, "--api-base")):
        raise UsageError("--api-base is for a local test API: loopback addresses only")
    if kind in ("slack", "discord"):
        app_secret, app_config, who = _chat_app(kind, token_file, app_token_file, api_base, redact)
        if _renewing(svc, kind, name):
            return _renewed(svc.channels.renew_secret(name or kind, app_secret, app_config), as_json)
        ch = svc.channels.add(kind, name, app_secret, app_config)
    elif kind == "telegram":
        from palui.channels.telegram import check_token

        token = read_secret("Bot token (from @BotFather)", "PALUI_TELEGRAM_TOKEN", token_file)
        if not token:
            fail("no bot token: give it with --token-file FILE or PALUI_TELEGRAM_TOKEN (never on the command line)", 2)
        assert token is not None
        token = check_telegram_token(token)  # garbage never reaches the network
        redact.add(token)
        import asyncio  # where used: `palui --help` does not pay for it (docs/decisions/0085-a-light-cli-start.md)

        me = asyncio.run(check_token(token, api_base, redact))
        config: dict[str, Any] = {"bot_id": me["id"], "bot_username": me["username"]}
        if api_base:
            config["api_base"] = api_base.rstrip("/")
        if _renewing(svc, kind, name):
            return _renewed(svc.channels.renew_secret(name or kind, {"token": token}, config), as_json)
        ch = svc.channels.add("telegram", name, {"token": token}, config)
        who = f"@{me['username']}"
    elif kind == "matrix":
        import asyncio

        from palui.channels.matrix import login, whoami

        if not homeserver or not user:
            fail("a Matrix channel needs --homeserver URL and --user @palui:example.org", 2)
        assert homeserver is not None and user is not None
        hs = _check_url(homeserver, "--homeserver")
        user = check_matrix_user(user)  # before a password is asked for or the homeserver contacted
        if token_file is not None or os.environ.get("PALUI_MATRIX_TOKEN"):
            token = read_secret("Access token", "PALUI_MATRIX_TOKEN", token_file)
            assert token is not None
            redact.add(token)
            found = asyncio.run(whoami(hs, user, token, redact))
            secret, device = token, found["device_id"]
        else:
            password = read_secret(f"Password of {user}", "PALUI_MATRIX_PASSWORD", password_file)
            if not password:
                fail("no password: give it with --password-file FILE, PALUI_MATRIX_PASSWORD or PALUI_MATRIX_TOKEN "
                     "(never on the command line)", 2)
            assert password is not None
            redact.add(password)
            got = asyncio.run(login(hs, user, password, redact))
            secret, device = got["access_token"], got["device_id"]
        matrix_config: dict[str, Any] = {"homeserver": hs, "user_id": user, "device_id": device}
        if _renewing(svc, kind, name):
            return _renewed(svc.channels.renew_secret(name or kind, {"access_token": secret}, matrix_config), as_json)
        ch = svc.channels.add("matrix", name, {"access_token": secret}, matrix_config)
        who = user
    elif kind == "email":
        from palui.channels.mail_setup import mail_config

        if not address:
            fail("an email channel needs --address, --imap-host, --smtp-host and --authserv-id", 2)
        cfg = mail_config(address=address or "", imap_host=imap_host, smtp_host=smtp_host, authserv_id=authserv_id,
                          imap_port=imap_port, smtp_port=smtp_port, imap_security=imap_security,
                          smtp_security=smtp_security, login=login_name, folder=folder, poll_seconds=poll_seconds)
        password = read_secret(f"Password of {cfg['login']}", "PALUI_EMAIL_PASSWORD", password_file)
        if not password:
            fail("no password: give it with --password-file FILE or PALUI_EMAIL_PASSWORD (never on the command "
                 "line)", 2)
        return _add_email(svc, name, cfg, password or "", redact, as_json)
    else:
        raise UsageError(f"unknown channel kind {kind!r} (telegram, matrix, slack, discord or email)")
    if as_json:
        return emit_json(ch)
    click.echo(f"channel {ch['name']} added ({kind}, {who}); state: unpaired")
    click.echo(f"next: palui channels pair {ch['name']}   (palui serve runs the channel)")


def _chat_app(kind: str, token_file: Path | None, app_token_file: Path | None, api_base: str | None,
              redact: Redactor) -> tuple[dict[str, str], dict[str, Any], str]:
    """Slack's two tokens or Discord's bot token, checked with the platform: ``(secret, config, account)``."""
    import asyncio

    if kind == "slack":
        from palui.channels.slack import check_token as check_slack
        from palui.channels.slack import check_tokens

        bot = read_secret("Bot token (xoxb-…)", "PALUI_SLACK_BOT_TOKEN", token_file)
        app = read_secret("App-level token (xapp-…)", "PALUI_SLACK_APP_TOKEN", app_token_file)
        if not bot or not app:
            fail("Slack needs two tokens: --token-file FILE (or PALUI_SLACK_BOT_TOKEN) with the bot token xoxb-…, "
                 "--app-token-file FILE (or PALUI_SLACK_APP_TOKEN) with the app-level token xapp-… (never on the "
                 "command line)", 2)
        assert bot is not None and app is not None
        bot, app = check_tokens(bot, app)  # garbage never reaches the network
        redact.add(bot)
        redact.add(app)
        me = asyncio.run(check_slack(bot, app, api_base, redact))
        config: dict[str, Any] = {"bot_user_id": me["bot_user_id"], "bot_name": me["user"], "team": me["team"]}
        secret = {"bot_token": bot, "app_token": app}
        who = f"@{me['user']} in {me['team']}"
    else:
        from palui.channels.discord import check_discord_token
        from palui.channels.discord import check_token as check_discord

        token = read_secret("Bot token (Discord Developer Portal → Bot)", "PALUI_DISCORD_TOKEN", token_file)
        if not token:
            fail("no bot token: give it with --token-file FILE or PALUI_DISCORD_TOKEN (never on the command line)", 2)
        assert token is not None
        token = check_discord_token(token)
        redact.add(token)
        found = asyncio.run(check_discord(token, api_base, redact))
        config = {"bot_id": found["id"], "bot_username": found["username"]}
        secret = {"token": token}
        who = f"@{found['username']}"
    if api_base:
        config["api_base"] = api_base.rstrip("/")
    return secret, config, who
def _add_email(svc: Service, name: str | None, cfg: dict[str, Any], password: str, redact: Any,
               as_json: bool) -> None:
    """The mailbox tried (both logins) before anything is stored; a new channel starts reading at the folder's
    end as it is now (``UIDVALIDITY:UIDNEXT-1``); the same kind and name again keeps its key and pairing."""
    import asyncio

    from palui.channels.mail_setup import check_account, new_secret

    redact.add(password)
    got = asyncio.run(check_account(cfg, password, redact))
    if _renewing(svc, "email", name):
        kept = svc.channels.secrets(name or "email")
        secret = {**new_secret(password), **({"reply_key": kept["reply_key"]} if kept.get("reply_key") else {})}
        return _renewed(svc.channels.renew_secret(name or "email", secret, cfg), as_json)
    ch = svc.channels.add("email", name, new_secret(password), cfg)
    svc.channel_updates.set_cursor(ch["name"], f"{got['uidvalidity']}:{max(0, got['uidnext'] - 1)}")
    if as_json:
        return emit_json(ch)
    click.echo(f"channel {ch['name']} added (email, {cfg['address']}; Authentication-Results of "
               f"{cfg['authserv_id']} believed); state: unpaired")
    click.echo(f"next: palui channels pair {ch['name']}   (palui serve runs the channel)")
    return None


def _renewing(svc: Service, kind: str, name: str | None) -> bool:
    """``channels add`` for a channel of that kind and name that exists: a new secret, the pairing kept."""
    return any(c["name"] == (name or kind) and c["kind"] == kind for c in svc.channels.list())


def _renewed(ch: ChatChannel, as_json: bool) -> None:
    if as_json:
        return emit_json(ch)
    kept = f"; still paired with {shown(ch['person'], one_line=True)}" if ch["person"] else "; state: unpaired"
    click.echo(f"channel {ch['name']}: new secret stored{kept} (palui serve starts it again with it)")
    return None


@channels_app.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def channels_list(as_json: bool) -> None:
    """List channels: kind, state (connected, unpaired, error: …, or not running when no palui serve runs them)
    and since when, the person, groups, deliveries waiting, the last delivery failure."""
    from palui.discovery import find_service

    svc = service()
    rows = svc.channels.list()
    running = bool(rows) and find_service(svc.settings) is not None
    if as_json:
        return emit_json([{k: v for k, v in c.items() if k != "config"} | {"account": _account(c)}
                          | _service_state(c, running) for c in rows])
    if not rows:
        click.echo("no channels (palui channels add telegram|matrix|slack|discord|email)")
        return
    tz = svc.status.timezone()
    table([[c["name"], c["kind"], _account(c), _state_text(c, running, tz),
            c["person"] or ("pairing…" if c["pairing"] else "-"), "on" if c["allow_groups"] else "off",
            str(c["waiting"]), c["last_failure"] or ""] for c in rows],
          ["name", "kind", "account", "state", "person", "groups", "waiting", "last failure"])


def _service_state(c: ChatChannel, running: bool) -> dict[str, Any]:
    """The state is the running service's: without one it is ``not running``, and ``last_state`` what the
    service said last (at ``state_at``)."""
    return {"running": running} if running else {"running": False, "state": "not running", "last_state": c["state"]}


def _state_text(c: ChatChannel, running: bool, tz: tzinfo | None) -> str:
    when = local(c["state_at"], tz, "%Y-%m-%d %H:%M") if c["state_at"] else None
    if not running:
        return f"not running (last: {c['state']}" + (f", {when})" if when else ")")
    return f"{c['state']}" + (f" (since {when})" if when else "")


def _account(c: ChatChannel) -> str:
    cfg = c["config"]
    if cfg.get("bot_name"):
        return f"@{cfg['bot_name']} ({cfg.get('team') or 'Slack'})"
    return f"@{cfg['bot_username']}" if cfg.get("bot_username") else str(cfg.get("user_id") or cfg.get("address") or "")


@channels_app.command("remove")
@click.argument("name")
def channels_remove(name: str) -> None:
    """Remove a channel and its secrets (a running service stops it within seconds)."""
    c = service().channels.remove(name)
    click.echo(f"channel {c['name']} removed")


@channels_app.command("pair")
@click.argument("name")
def channels_pair(name: str) -> None:
    """Print a one-time pairing code (10 minutes, 5 tries). Send /pair CODE to Palui in a private chat."""
    svc = service()
    p = svc.channels.pair_code(name)
    if p["paired_with"]:
        click.echo(f"{name} is paired with {shown(p['paired_with'], one_line=True)}; the first right /pair replaces "
                   "them")
    until = (p["expires_at"] or "")[:19].replace("T", " ")
    click.echo(f"pairing code: {p['code']}  (valid until {until} UTC, 5 tries)")
    if svc.channels.get(name)["kind"] == "email":
        address = svc.channels.get(name)["config"]["address"]
        click.echo(f"send a mail from your own address to {address} with this as its first line: /pair {p['code']}")
    else:
        click.echo(f"send this to Palui in a private chat: /pair {p['code']}")


@channels_app.command("groups")
@click.argument("name")
@click.argument("setting", metavar="on|off")
def channels_groups(name: str, setting: str) -> None:
    """Allow group chats and rooms with other members (only your messages start turns; others' are untrusted)."""
    if setting not in ("on", "off"):
        raise UsageError("groups takes on or off")
    c = service().channels.set_groups(name, setting == "on")
    click.echo(f"{c['name']}: group chats {'allowed' if c['allow_groups'] else 'refused'}")


@channels_app.command("test")
@click.argument("name")
def channels_test(name: str) -> None:
    """Check the channel's credentials and reachability; send a test message to the person when paired."""
    from palui.channels.redaction import Redactor

    svc = service()
    c = svc.channels.get(name)
    secret = svc.channels.secrets(name)
    redact = Redactor(str(v) for v in secret.values())
    import asyncio

    from palui.channels.manager import test_function

    click.echo(asyncio.run(test_function(c["kind"])(c, secret, redact)))
