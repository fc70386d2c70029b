"""The channels page (spec §8.3): state, person and the actions of ``palui channels`` in the browser
(in-process, through the app's guard; the fake Bot API checks the token)."""

from __future__ import annotations

import re

import pytest

from palui.server.app import csrf_value
from support.fake_telegram import FakeTelegram, make_token


def _post(client, path, **form):
    return client.post(path, data={"csrf": csrf_value("tok"), "back": "/channels", **form})


@pytest.mark.slow
def test_add_pair_groups_and_remove_from_the_page(svc, client):
    with FakeTelegram(max_poll_timeout=1) as fake:
        wrong = make_token(7000000077)
        r = _post(client, "/channels/add", kind="telegram", token=wrong, api_base=fake.url)
        assert r.status_code == 303
        page = client.get("/channels").text  # the flash cookie is in the client's jar
        assert "Telegram rejected the bot token" in page and wrong not in page
        r = _post(client, "/channels/add", kind="telegram", token=fake.token, api_base=fake.url, name="phone")
        assert r.status_code == 303
    page = client.get("/channels").text
    assert 'data-channel="phone"' in page and '<td class="state">unpaired</td>' in page and fake.token not in page
    assert svc.channels.secrets("phone") == {"token": fake.token}
    r = _post(client, "/channels/phone/pair")
    code = re.search(r"/pair ([0-9A-Z]{8})", r.text).group(1)
    assert svc.channels.try_pair("phone", code, "111", "@alice", "111")
    page = client.get("/channels").text
    assert '<td class="state">connected</td>' in page and "@alice" in page
    _post(client, "/channels/phone/groups-on")
    assert svc.channels.get("phone")["allow_groups"] is True
    # A non-loopback API base is refused (it would send the token elsewhere).
    r = _post(client, "/channels/add", kind="telegram", token=fake.token, api_base="http://10.0.0.1:1")
    assert svc.channels.list()[0]["name"] == "phone" and len(svc.channels.list()) == 1
    _post(client, "/channels/phone/remove")
    assert svc.channels.list() == []
    assert not (svc.settings.secrets_dir / "channel-phone.json").exists()


def test_the_page_shows_an_error_state_and_the_last_failure(svc, client):
    svc.channels.add("matrix", None, {"access_token": "syt_secret_secret_secret"},
                     {"homeserver": "https://m.example.org", "user_id": "@palui:example.org", "device_id": "D"})
    svc.channels.set_state("matrix", "error: encrypted room")
    svc.channels.set_failure("matrix", "answer of t-1: RuntimeError: the homeserver refused the message")
    page = client.get("/channels").text
    assert "error: encrypted room" in page and "the homeserver refused the message" in page
    assert "syt_secret" not in page
    from palui.web.status import status_text

    assert ("channel matrix: error: encrypted room; last delivery failure: answer of t-1: RuntimeError: the homeserver"
            " refused the message") in status_text(svc.status.get())


@pytest.mark.slow
def test_slack_and_discord_are_added_from_the_page_their_tokens_checked_and_never_shown(svc, client):
    from support.fake_discord import FakeDiscord
    from support.fake_slack import FakeSlack

    slack, discord = FakeSlack().start(), FakeDiscord().start()
    try:
        r = _post(client, "/channels/add", kind="slack", token=slack.app_token, app_token=slack.app_token,
                  api_base=slack.url)
        page = client.get("/channels").text
        assert "not a Slack bot token" in page and slack.app_token not in page and slack.calls == []
        _post(client, "/channels/add", kind="slack", token=slack.bot_token, app_token=slack.app_token,
              api_base=slack.url)
        r = _post(client, "/channels/add", kind="discord", token=discord.token, api_base=discord.url)
        assert r.status_code == 303
        page = client.get("/channels").text
        assert 'data-channel="slack"' in page and "@palui (Palui Test)" in page
        assert 'data-channel="discord"' in page and "@palui" in page
        assert slack.bot_token not in page and discord.token not in page
        assert svc.channels.secrets("slack") == {"bot_token": slack.bot_token, "app_token": slack.app_token}
        assert svc.channels.secrets("discord") == {"token": discord.token}
        r = _post(client, "/channels/discord/test")
        assert "ok: Discord answers as @palui" in client.get("/channels").text
    finally:
        slack.close()
        discord.close()
