"""The chat channels page (spec §8.3): each channel's state (``connected``, ``unpaired``, ``error: …``),
the person it is paired with, and the actions of ``palui channels``: add (Telegram bot token;
Matrix homeserver, user and password — used once to log in, never stored; Slack's bot and app-level
tokens; Discord's bot token; an email mailbox, its servers, the receiving server's authserv-id and its
password, stored in the channel's secrets file), pair (the one-time code is shown on the page that answers,
never in a URL or cookie), test, groups on/off, remove.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from palui.errors import UsageError
from palui.server.raw_path import RawPathRoute
from palui.web.base import action, page, redirect, render, svc_of

if TYPE_CHECKING:
    from palui.channels.redaction import Redactor
    from palui.results import ChatChannel
    from palui.service.api import Service


@page
async def channels_page(request: Request) -> Response:
    """``GET /channels``: every channel with its state, person, groups switch, last delivery failure."""
    return render(request, "channels.html", channels=svc_of(request).channels.list(), code=None, tested=None)


@action
async def add_channel(request: Request, form: dict[str, str]) -> Response:
    """``POST /channels/add`` ``kind, name?, token`` (Telegram, Discord), ``token, app_token`` (Slack),
    ``homeserver, user, password|token`` (Matrix) or ``address, imap_host, imap_port?, smtp_host, smtp_port?,
    imap_security?, smtp_security?, login?, authserv_id, password`` (email; security by the port unless given,
    ``none`` only on loopback); ``api_base`` (Telegram, Slack, Discord: loopback only, tests)."""
    from palui.channels import check_matrix_user, check_telegram_token, is_loopback_url
    from palui.channels import check_url as _check_url
    from palui.channels.redaction import Redactor

    svc = svc_of(request)
    kind, name = form.get("kind", ""), form.get("name", "").strip() or None
    redact = Redactor()
    api_base = form.get("api_base", "").strip() or None  # a local test API only, as `--api-base`
    if api_base and not is_loopback_url(_check_url(api_base, "the API base")):
        raise UsageError("an API base other than the platform's must be on loopback (tests)")
    if kind == "slack":
        from palui.channels.slack import check_token as check_slack
        from palui.channels.slack import check_tokens

        bot, app = check_tokens(form.get("token", ""), form.get("app_token", ""))  # before any request
        redact.add(bot)
        redact.add(app)
        me = await check_slack(bot, app, api_base, redact)
        ch = svc.channels.add("slack", name, {"bot_token": bot, "app_token": app},
                              {"bot_user_id": me["bot_user_id"], "bot_name": me["user"], "team": me["team"],
                               **({"api_base": api_base} if api_base else {})})
    elif kind == "discord":
        from palui.channels.discord import check_discord_token
        from palui.channels.discord import check_token as check_discord

        token = check_discord_token(form.get("token", ""))
        redact.add(token)
        found = await check_discord(token, api_base, redact)
        ch = svc.channels.add("discord", name, {"token": token},
                              {"bot_id": found["id"], "bot_username": found["username"],
                               **({"api_base": api_base} if api_base else {})})
    elif kind == "telegram":
        from palui.channels.telegram import check_token

        token = form.get("token", "").strip()
        if not token:
            raise UsageError("paste the bot token from @BotFather")
        token = check_telegram_token(token)  # garbage never reaches the network
        redact.add(token)
        me = await check_token(token, api_base, redact)
        config = {"bot_id": me["id"], "bot_username": me["username"], **({"api_base": api_base} if api_base else {})}
        ch = svc.channels.add("telegram", name, {"token": token}, config)
    elif kind == "matrix":
        from palui.channels.matrix import login, whoami

        hs = _check_url(form.get("homeserver", "").strip(), "the homeserver")
        user = check_matrix_user(form.get("user", ""))
        if form.get("token", "").strip():
            token = form["token"].strip()
            redact.add(token)
            found = await whoami(hs, user, token, redact)
            secret, device = token, found["device_id"]
        else:
            password = form.get("password", "")
            if not password:
                raise UsageError("give the account's password (used once to log in, never stored) or an access token")
            redact.add(password)
            got = await login(hs, user, password, redact)
            secret, device = got["access_token"], got["device_id"]
        ch = svc.channels.add("matrix", name, {"access_token": secret},
                              {"homeserver": hs, "user_id": user, "device_id": device})
    elif kind == "email":
        ch = await _add_email(svc, name, form, redact)
    else:
        raise UsageError("choose telegram, matrix, slack, discord or email")
    return redirect("/channels", ("ok", f"Channel {ch['name']} added; pair it to start talking."))


async def _add_email(svc: Service, name: str | None, form: dict[str, str], redact: Redactor) -> ChatChannel:
    """The email form: settings checked (:func:`palui.channels.mail_setup.mail_config`), both logins tried
    before anything is stored, reading starts at the folder's end."""
    from palui.channels.mail_setup import check_account, mail_config, new_secret

    def port(key: str, default: int) -> int:
        raw = form.get(key, "").strip()
        if raw and not raw.isdigit():
            raise UsageError(f"{key.replace('_', ' ')} must be a number")
        return int(raw) if raw else default

    cfg = mail_config(address=form.get("address", ""), imap_host=form.get("imap_host"),
                      smtp_host=form.get("smtp_host"), authserv_id=form.get("authserv_id"),
                      imap_port=port("imap_port", 993), smtp_port=port("smtp_port", 465),
                      imap_security=form.get("imap_security") or None, smtp_security=form.get("smtp_security") or None,
                      login=form.get("login", "").strip() or None)
    password = form.get("password", "")
    if not password:
        raise UsageError("give the mailbox's (app) password")
    redact.add(password)
    got = await check_account(cfg, password, redact)
    ch = svc.channels.add("email", name, new_secret(password), cfg)
    svc.channel_updates.set_cursor(ch["name"], f"{got['uidvalidity']}:{max(0, got['uidnext'] - 1)}")
    return ch


@action
async def channel_action(request: Request, form: dict[str, str]) -> Response:
    """``POST /channels/{name}/pair|test|groups-on|groups-off|remove``."""
    svc = svc_of(request)
    name, verb = request.path_params["name"], request.path_params["action"]
    if verb == "pair":
        p = svc.channels.pair_code(name)
        return render(request, "channels.html", channels=svc.channels.list(), code={"name": name, **p}, tested=None)
    if verb == "test":
        from palui.channels.manager import test_function
        from palui.channels.redaction import Redactor

        c, secret = svc.channels.get(name), svc.channels.secrets(name)
        redact = Redactor(str(v) for v in secret.values())
        out = await test_function(c["kind"])(c, secret, redact)
        return redirect("/channels", ("ok", out))
    if verb in ("groups-on", "groups-off"):
        c = svc.channels.set_groups(name, verb == "groups-on")
        word = "allowed" if c["allow_groups"] else "refused"
        return redirect("/channels", ("ok", f"{c['name']}: group chats {word}."))
    if verb == "remove":
        c = svc.channels.remove(name)
        return redirect("/channels", ("ok", f"Channel {c['name']} removed."))
    raise UsageError(f"unknown action {verb!r}")


def routes() -> list[Route]:
    return [
        Route("/channels", channels_page),
        Route("/channels/add", add_channel, methods=["POST"]),
        RawPathRoute("/channels/{name}/{action}", channel_action, methods=["POST"]),
    ]
