"""The HTTP edges of ``palui serve`` (spec §8.1), against a real service over real sockets.

A request's head has a deadline (``serve.header_timeout_seconds``; here 1 s) that trickling bytes does not
extend, and limits answered 414 (request line) and 431 (head) however its bytes are split; every route has a
body limit, refused from ``Content-Length`` before reading and as soon as a chunked body passes it (413, in
the OpenAPI document); a JSON key, query parameter or form field given twice is refused naming it, and so is
a query parameter the route does not take.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from palui.server.session import csrf_value, session_value
from support.live_service import LiveService
from support.scripts import text, write_script
from support.waiting import GUARD

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("edges") / "home"
    home.mkdir()
    model = write_script(home / "script.json", text("Done."))
    (home / "palui.toml").write_text(f'model = "{model}"\n[serve]\nheader_timeout_seconds = 1\n', encoding="utf-8")
    srv = LiveService(home).start()
    yield srv
    srv.stop()
    assert "Traceback" not in srv.log_text()


def connect(srv: LiveService) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.settimeout(GUARD)  # a hang guard: every read below returns as soon as the service answers or closes
    return s


def answer(s: socket.socket) -> bytes:
    """Everything the service sends until it closes the connection."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def head(srv: LiveService, target: str, *extra: str) -> bytes:
    cookie = f"Cookie: palui_session={session_value(srv.token)}\r\n"
    return (f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n{cookie}"
            + "".join(f"{h}\r\n" for h in extra) + "\r\n").encode()


def status_and_body(raw: bytes) -> tuple[int, dict]:
    first, _, rest = raw.partition(b"\r\n")
    body = rest.split(b"\r\n\r\n", 1)[1]
    return int(first.split()[1]), json.loads(body)


# -- the head: a deadline and limits ----------------------------------------------------------------------


def test_a_head_that_never_finishes_is_answered_408_and_closed(served):
    s = connect(served)
    s.sendall(head(served, "/api/status")[:40])  # half a request line, then nothing
    status, body = status_and_body(answer(s))
    assert status == 408 and body["field"] == "headers" and "within 1 seconds" in body["error"]


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(served):
    s = connect(served)
    assert answer(s) == b""  # closed at the deadline; a 408 could pass for the answer to a request sent later


def test_trickling_bytes_does_not_extend_the_deadline(served):
    s = connect(served)
    data = head(served, "/api/status", "X-Slow: " + "a" * 4000)
    closed, end = False, time.monotonic() + GUARD
    for i in range(len(data)):  # one byte every 50 ms: the whole head would take minutes
        try:
            s.sendall(data[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        time.sleep(0.05)  # the client's pace, not a wait for the service
        if time.monotonic() > end:
            break
    raw = b"" if closed else answer(s)
    assert closed or raw.startswith(b"HTTP/1.1 408"), raw[:80]


def test_slow_heads_hold_no_one_else_up_and_are_all_closed(served):
    slow = [connect(served) for _ in range(50)]
    for s in slow:
        s.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1")
    assert served.http.get("/api/health").status_code == 200  # served meanwhile
    assert all(answer(s).startswith(b"HTTP/1.1 408") for s in slow)


@pytest.mark.parametrize("length", [8_300, 12_000, 20_000])
@pytest.mark.parametrize("split", [None, 4_096, 1_000])
def test_a_long_url_with_a_session_cookie_is_answered_414_at_once(served, length, split):
    data = head(served, "/chat?x=" + "a" * length)
    s = connect(served)
    try:
        for i in range(0, len(data), split or len(data)):
            s.sendall(data[i:i + (split or len(data))])
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before the rest was sent: the answer is already there
    status, body = status_and_body(answer(s))
    assert status == 414 and "8,192 bytes" in body["error"], body


@pytest.mark.parametrize("split", [None, 4_096])
def test_a_head_over_16_kib_is_answered_431_however_it_is_split(served, split):
    data = head(served, "/api/status", *(f"X-Pad-{i}: {'b' * 1000}" for i in range(17)))
    s = connect(served)
    try:
        for i in range(0, len(data), split or len(data)):
            s.sendall(data[i:i + (split or len(data))])
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, body = status_and_body(answer(s))
    assert status == 431 and "16,384 bytes" in body["error"], body


def test_a_kept_alive_connection_gets_a_deadline_for_each_request(served):
    s = connect(served)
    s.sendall(head(served, "/api/health"))
    first = b""
    while b'"pid"' not in first:  # the whole first answer (its body ends with the pid)
        first += s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    s.sendall(b"GET /api/health HTTP/1.1\r\n")  # the next request starts and stalls
    assert answer(s).split(b"HTTP/1.1 ")[-1].startswith(b"408")


# -- bodies --------------------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_before_it_is_read(served):
    # Content-Length says 60 MB and nothing follows: the answer comes without the body.
    s = connect(served)
    s.sendall((f"POST /api/stop HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nAuthorization: Bearer {served.token}"
               "\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n").encode())
    status, body = status_and_body(answer(s))
    assert status == 413 and body == {"error": "the request body is over 1,048,576 bytes", "kind": "usage",
                                      "field": "body"}


def test_a_chunked_body_over_the_limit_is_refused_when_it_passes_it(served):
    def chunks():
        for _ in range(64):
            yield b" " * 65536  # 4 MiB in all, no Content-Length

    r = served.http.post("/api/stop", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "body"
    turns = served.count("turns")
    r = served.http.post("/api/turns", content=b'{"message": "' + b"x" * 14_000_000 + b'"}',
                         headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "13,048,576 bytes" in r.json()["error"]
    assert served.count("turns") == turns


def test_the_openapi_document_states_every_body_limit(served):
    doc = served.get("/api/openapi.json")
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert "413" in op["responses"] and op["x-max-body-bytes"] >= 1_048_576, (method, path)
    assert doc["paths"]["/api/turns"]["post"]["x-max-body-bytes"] == 12 * 1_000_000 + 1_048_576
    assert doc["paths"]["/api/stop"]["post"]["x-max-body-bytes"] == 1_048_576


# -- each name once; no unknown query parameter ------------------------------------------------------------------


def test_a_json_key_given_twice_is_refused_naming_it(served):
    turns = served.count("turns")
    for raw, field in [(b'{"message": "hi", "message": "rm -rf"}', "message"),
                       (b'{"message": "hi", "stream": false, "stream": true}', "stream")]:
        r = served.http.post("/api/turns", content=raw, headers={"Content-Type": "application/json"})
        assert (r.status_code, r.json()) == (400, {"error": f"the key '{field}' appears twice in the body",
                                                   "kind": "usage", "field": field})
    r = served.http.post("/api/elicitations/e-1/answer", headers={"Content-Type": "application/json"},
                         content=b'{"action": "accept", "content": {"email": "a@b.org", "email": "c@d.org"}}')
    assert r.status_code == 400 and r.json()["field"] == "email"
    assert served.count("turns") == turns


def test_query_parameters_unknown_or_given_twice_are_refused(served):
    for url, field, words in [("/api/inbox?colour=red", "colour", "colour is not an input of this route"),
                              ("/api/status?x=1", "x", "x is not an input of this route"),
                              ("/api/inbox?limit=1&limit=1000", "limit", "the query parameter 'limit' is given twice"),
                              ("/api/approvals?before=garbage", "before",
                               "before pages the list of every approval: add all=1")]:
        r = served.http.get(url)
        assert (r.status_code, r.json()) == (400, {"error": words, "kind": "usage", "field": field}), url
    assert served.http.get("/api/inbox?limit=1").status_code == 200


def test_a_form_field_given_twice_is_refused_naming_it(served):
    cookies = {"palui_session": session_value(served.token)}
    with httpx.Client(base_url=served.url, cookies=cookies, timeout=60) as web:
        r = web.post("/logout", content=f"csrf={csrf_value(served.token)}&back=/a&back=/b",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400 and "the field &#39;back&#39; is given twice" in r.text


def test_a_control_character_in_a_model_string_is_a_400_naming_it(served):
    r = served.http.post("/api/turns", json={"message": "hi", "model": "script:/tmp/x\u0000.json"})
    assert (r.status_code, r.json()) == (400, {"error": "model: must not contain control characters (U+0000 at"
                                                        " character 14)", "kind": "usage", "field": "model"})


def test_the_readme_says_health_is_the_one_public_route():
    from palui.server.app import PUBLIC_PATHS

    assert PUBLIC_PATHS == ("/api/health",)
    assert "`GET /api/health` is the one public route" in " ".join(README.read_text().split())
