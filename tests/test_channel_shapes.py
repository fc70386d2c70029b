"""Shapes checked before the network (spec §8.3): a Telegram bot token must look like one
(``^\\d+:[A-Za-z0-9_-]{30,}$``) and a Matrix user id like ``@local:server`` before any request is made, and the
refusal says what is wrong. Through ``palui channels add`` (a subprocess) and the web page's Channels form, with
the fake Bot API or a bare listening socket counting what reaches them."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from palui.channels import check_matrix_user, check_telegram_token
from palui.errors import UsageError
from palui.server.app import create_app, csrf_value, session_value
from support.fake_telegram import FakeTelegram, make_token


@pytest.fixture
def listener() -> Iterator[tuple[str, socket.socket]]:
    """A loopback socket nobody answers: ``(url, socket)``; a connection to it shows something was sent."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}", s
    finally:
        s.close()


def contacted(s: socket.socket) -> bool:
    try:
        conn, _ = s.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize(("token", "why"), [
    ("garbage", "it has no ':' between the bot's number and its secret"),
    ("123:\x1babcdefghijklmnopqrstuvwxyzabcdefgh", "a control character"),
    ("bot:abcdefghijklmnopqrstuvwxyzabcdefgh", "the part before ':' must be the bot's number"),
    ("123:abcdefghij/lmnopqrstuvwxyzabcdefgh", "the part after ':' may hold only letters, digits, _ and -"),
    ("123:short", "the part after ':' has 5 characters, a bot token's has 30 or more"),
])
@pytest.mark.slow
def test_a_telegram_token_of_the_wrong_shape_never_reaches_the_bot_api(cli, token, why):
    with FakeTelegram(max_poll_timeout=1) as fake:
        r = cli("channels", "add", "telegram", "--token-file", "-", "--api-base", fake.url, input=token + "\n")
        assert not fake.calls, fake.calls  # nothing was sent
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "that is not a bot token from @BotFather" in r.stderr and why in r.stderr, r.stderr
    assert "unreachable" not in r.stderr and "InvalidURL" not in r.stderr
    assert "\x1b" not in r.stderr and "abcdefghij" not in r.stderr  # the secret is never echoed
    assert cli.json("channels", "list", "--json") == []


@pytest.mark.slow
def test_a_token_of_the_right_shape_is_still_checked_by_telegram(cli):
    with FakeTelegram(max_poll_timeout=1) as fake:
        r = cli("channels", "add", "telegram", "--token-file", "-", "--api-base", fake.url, input=fake.token + "\n")
        assert r.returncode == 0, r.stderr
        assert [c.method for c in fake.calls][:1] == ["getMe"]


@pytest.mark.slow
def test_a_matrix_user_that_is_not_a_user_id_never_reaches_the_homeserver(cli, listener):
    url, s = listener
    r = cli("channels", "add", "matrix", "--homeserver", url, "--user", "not a user", "--password-file", "-",
            input="pw\n")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "that is not a Matrix user id: a Matrix user id starts with @ (e.g. @palui:example.org)" in r.stderr
    assert not contacted(s)


@pytest.mark.parametrize(("user", "why"), [
    ("@palui", "it needs :server after the name"),
    ("@pa lui:example.org", "the name before ':' may hold only printable ASCII characters"),
    ("@palui:exa mple.org", "the server part 'exa mple.org' is not a host name"),
    ("@" + "a" * 300 + ":example.org", "it has 313 characters, a Matrix user id at most 255"),
])
def test_the_refusal_says_what_is_wrong_with_a_matrix_user(user, why):
    with pytest.raises(UsageError) as e:
        check_matrix_user(user)
    assert why in str(e.value), str(e.value)


@pytest.mark.parametrize("user", ["@palui:example.org", "@p.a_l=u-i/1:matrix.example.org:8448",
                                  "@palui:127.0.0.1:8008", "@palui:[::1]:8448"])
def test_real_matrix_user_ids_pass(user):
    assert check_matrix_user(f" {user} ") == user


def test_real_telegram_tokens_pass():
    for _ in range(20):
        token = make_token()
        assert check_telegram_token(f"{token}\n") == token


def _post(client, **form):
    return client.post("/channels/add", data={"csrf": csrf_value("tok"), "back": "/channels", **form})


@pytest.mark.slow
def test_the_web_form_checks_the_shapes_before_the_network(svc, listener):
    url, s = listener
    with TestClient(create_app(svc, "tok", port=8765), base_url="http://127.0.0.1:8765", follow_redirects=False,
                    cookies={"palui_session": session_value("tok")}) as client:
        r = _post(client, kind="telegram", token="123:\x1bnot-a-token", api_base=url)
        assert r.status_code == 303
        page = client.get("/channels").text
        assert "that is not a bot token from @BotFather" in page and "unreachable" not in page
        r = _post(client, kind="matrix", homeserver=url, user="not a user", password="pw")
        assert r.status_code == 303
        page = client.get("/channels").text
        assert "that is not a Matrix user id: a Matrix user id starts with @" in page
    assert not contacted(s)
    assert svc.channels.list() == []
