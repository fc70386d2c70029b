"""The JSON API's boundaries (spec §8.1) against a real ``palui serve``: input outside a route's model is
400 naming the field (never 500, never a number taken as given), an unexpected error is a 500 with an id
logged to ``logs/palui.log`` (never a traceback on the terminal), ids reach the service exactly as typed on
every front end, and the web page's forms are held to the same bounds.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from palui.server.session import csrf_value, session_value
from support.chatdrive import PipedChat
from support.live_service import LiveService, wait_for
from support.scripts import call, text, write_script

pytestmark = pytest.mark.slow


def start_service(home: Path) -> LiveService:
    """A service whose model asks once (recall__forget_memory is destructive: it asks in a chat), then answers."""
    model = write_script(home / "script.json", {"tool_calls": [call("recall__forget_memory", id=1)]}, text("Done."))
    (home / "palui.toml").write_text(f'model = "{model}"\n', encoding="utf-8")
    return LiveService(home).start()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("api") / "home"
    home.mkdir()
    srv = start_service(home)
    yield srv
    srv.stop()
    assert "Traceback" not in srv.log_text()


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "palui", *args], capture_output=True, text=True, env=env,
                          timeout=120)


# -- input outside a route's model --------------------------------------------------------------------------

WHY = [
    ("POST", "/api/turns", {"message": "hi", "model": 5}, "model"),
    # a NUL in a script: path once made a 500 (the path reached the file system): refused as in palui.toml
    ("POST", "/api/turns", {"message": "hi", "model": "script:/tmp/a\u0000b.json"}, "model"),
    ("POST", "/api/turns", {"message": "hi", "conversation": [1]}, "conversation"),
    ("POST", "/api/turns", {"message": "hi", "channel": {"x": 1}}, "channel"),
    ("POST", "/api/stop", {"turn": {"a": 1}}, "turn"),
    ("POST", "/api/conversations", {"channel": [1]}, "channel"),
    ("GET", "/api/audit?limit=abc", None, "limit"),
    ("GET", "/api/inbox?limit=abc", None, "limit"),
    ("GET", "/api/conversations?limit=99999999999999999999999", None, "limit"),
    ("GET", "/api/audit?limit=-5", None, "limit"),
    ("GET", "/api/inbox?limit=-1", None, "limit"),
    ("POST", "/api/turns", {"message": "   "}, "message"),
    ("POST", "/api/turns", {"message": "hi", "stream": "yes"}, "stream"),
    ("POST", "/api/turns", {"message": "hi", "colour": "red"}, "colour"),
    ("POST", "/api/approvals/a-1/deny", {"reason": "x" * 1001}, "reason"),
    ("POST", "/api/elicitations/e-1/answer", {"action": "maybe"}, "action"),
    ("GET", "/api/approvals/a-1/wait?timeout=61", None, "timeout"),
    ("GET", "/api/turns/t-1/events?after=-1", None, "after"),
]


@pytest.mark.parametrize("method,path,body,field", WHY, ids=[f"{m} {p} {f}" for m, p, _b, f in WHY])
def test_input_outside_its_model_is_400_naming_the_field_and_stores_nothing(served, method, path, body, field):
    turns = served.count("turns")
    conversations = served.count("conversations")
    r = served.http.request(method, path, json=body)
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["kind"] == "usage" and answer["field"] == field, answer
    assert field in answer["error"] and "Traceback" not in r.text
    assert (served.count("turns"), served.count("conversations")) == (turns, conversations)


def test_a_control_character_in_a_model_string_is_refused_saying_where(served):
    r = served.http.post("/api/turns", json={"message": "hi", "model": "script:/tmp/a\u001b[2Jb.json"})
    assert r.status_code == 400, r.text
    assert r.json() == {"error": "model: must not contain control characters (U+001B at character 14)",
                        "kind": "usage", "field": "model"}


def test_a_body_that_is_not_a_json_object_is_400(served):
    for raw in (b"{not json", b"[1]", b'"hi"', b'{"message": "\\ud800"}'):
        r = served.http.post("/api/turns", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["kind"] == "usage" and r.json()["field"] == "body", (raw, r.text)


def test_a_validation_refusal_is_a_usage_error_for_the_cli_too(served, tmp_path):
    # The CLI's client reads "kind": "usage" as bad usage: exit 2, as in-process (spec §11).
    from palui.cli.client import raise_for
    from palui.errors import UsageError

    r = served.http.get("/api/inbox", params={"limit": 0})
    with pytest.raises(UsageError, match="limit"):
        raise_for(r)


def test_unknown_routes_and_methods_answer_in_the_apis_shape(served):
    r = served.http.get("/api/nothing-here")
    assert r.status_code == 404 and "openapi.json" in r.json()["error"]
    r = served.http.get("/api/stop")
    assert r.status_code == 405 and "POST" in r.headers["allow"] and "error" in r.json()


# -- an unexpected error ---------------------------------------------------------------------------------------


def test_an_unexpected_error_is_a_500_with_an_id_logged_never_a_traceback_on_the_terminal(home):
    srv = start_service(home)
    try:
        srv.rows("DROP TABLE inbox")  # a broken database: the route cannot expect it
        r = srv.http.get("/api/inbox")
        assert r.status_code == 500, r.text
        answer = r.json()
        assert set(answer) == {"error", "kind", "id"} and answer["kind"] == "error"
        assert answer["id"] in answer["error"] and "logs/palui.log" in answer["error"]
        assert "inbox" not in answer["error"] and "sqlite" not in answer["error"].lower()  # no bug's text
        page = srv.http.get("/status")
        assert page.status_code == 500 and "Traceback" not in page.text and "sqlite" not in page.text.lower()
        # uvicorn's own complaints go to the log too.
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
            s.recv(1024)
        log = home / "logs" / "palui.log"
        wait_for(lambda: "Invalid HTTP request" in log.read_text(), 10, what="uvicorn's warning in the log")
        logged = log.read_text()
        assert answer["id"] in logged and "Traceback" in logged and "no such table: inbox" in logged
    finally:
        srv.stop()
    terminal = srv.log_text()
    assert "Traceback" not in terminal and "Invalid HTTP request" not in terminal, terminal


# -- the OpenAPI document ----------------------------------------------------------------------------------------

OPERATIONS = {
    ("get", "/api/health"), ("get", "/api/openapi.json"), ("get", "/api/status"), ("get", "/api/inbox"),
    ("get", "/api/audit"), ("get", "/api/connectors"), ("get", "/api/tools"), ("post", "/api/tools/enable-read"),
    ("post", "/api/tools/{name}/class"), ("post", "/api/tools/{name}/reset"), ("post", "/api/tools/{name}/enable"),
    ("post", "/api/tools/{name}/disable"), ("post", "/api/tools/{name}/review"), ("post", "/api/conversations"),
    ("get", "/api/conversations"), ("get", "/api/conversations/{conversation}"), ("post", "/api/turns"),
    ("get", "/api/turns/{turn}"), ("get", "/api/turns/{turn}/events"), ("post", "/api/stop"),
    ("get", "/api/approvals"), ("get", "/api/approvals/{id}"), ("get", "/api/approvals/{id}/wait"),
    ("post", "/api/approvals/{id}/approve"), ("post", "/api/approvals/{id}/deny"), ("get", "/api/elicitations"),
    ("get", "/api/elicitations/{id}"), ("post", "/api/elicitations/{id}/answer"), ("get", "/api/jobs"),
    ("post", "/api/jobs/{name}/run"), ("get", "/api/webhooks"), ("post", "/api/connectors/{cid}/refresh"),
    ("get", "/api/rules"), ("get", "/api/rules/{id}"), ("post", "/api/rules/{id}/remove"),  # spec §5.9
}


def conforms(doc: dict, schema: dict, value: object) -> None:
    """``value`` against a schema of the document (its ``$ref``s into ``components``). Raises when it does not fit."""
    import jsonschema

    jsonschema.Draft202012Validator({**schema, "components": doc["components"]}).validate(value)


def test_the_openapi_document_is_valid_complete_and_needs_the_token(served):
    from openapi_spec_validator import validate

    assert httpx.get(served.url + "/api/openapi.json").status_code == 401
    doc = served.get("/api/openapi.json")
    validate(doc)
    assert doc["openapi"].startswith("3.1")
    ops = {(m, p) for p, item in doc["paths"].items() for m in item}
    assert ops == OPERATIONS  # every /api route, nothing else (no /hooks, no page)
    health = doc["paths"]["/api/health"]["get"]
    assert health["security"] == [] and httpx.get(served.url + "/api/health").status_code == 200
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if op is health:
                continue
            assert "security" not in op and {"200", "400", "401", "500"} <= set(op["responses"]), (method, path)
            if "{" in path:
                assert "404" in op["responses"], (method, path)
            if path.endswith(("/approve", "/deny", "/answer")):
                assert "409" in op["responses"], (method, path)
    limit = next(p for p in doc["paths"]["/api/inbox"]["get"]["parameters"] if p["name"] == "limit")
    assert limit["schema"]["minimum"] == 1 and limit["schema"]["maximum"] == 1000
    turn = doc["components"]["schemas"]["TurnResult"]
    assert turn["additionalProperties"] is False and "pending_approvals" in turn["required"]


def test_real_answers_fit_their_documented_schemas(served):
    doc = served.get("/api/openapi.json")
    r = served.post("/api/turns", {"message": "remember x"})
    assert r["status"] == "awaiting_approval"
    done = served.post(f"/api/approvals/{r['pending_approvals'][0]['id']}/deny", {"reason": "no"})
    assert done["status"] == "done"
    gets = ["/api/health", "/api/status", "/api/inbox", "/api/audit", "/api/connectors", "/api/tools",
            "/api/conversations", f"/api/conversations/{r['conversation']}", f"/api/turns/{r['turn']}",
            "/api/approvals?all=1", "/api/elicitations?all=1", "/api/jobs", "/api/webhooks"]
    for url in gets:
        path = url.split("?")[0].replace(r["conversation"], "{conversation}").replace(r["turn"], "{turn}")
        schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        conforms(doc, schema, served.http.get(url).json())
    conforms(doc, doc["paths"]["/api/turns"]["post"]["responses"]["200"]["content"]["application/json"]["schema"], r)
    refusal = served.http.get("/api/inbox", params={"limit": "x"}).json()
    conforms(doc, {"$ref": "#/components/schemas/ErrorAnswer"}, refusal)
    posted = {"/api/conversations": {"channel": "api"}, "/api/stop": {"conversation": r["conversation"]}}
    for url, body in posted.items():
        schema = doc["paths"][url]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        conforms(doc, schema, served.post(url, body))
    # The same answers are palui.results types (strict, no extra key), as tests/test_results.py holds them.
    import pydantic

    from palui import results

    for t, value in ((results.Health, served.get("/api/health")), (results.ErrorAnswer, refusal),
                     (results.NewConversation, served.post("/api/conversations", {})),
                     (results.Stopped, served.post("/api/stop", {"turn": r["turn"]}))):
        pydantic.TypeAdapter(t).validate_python(value, strict=True)


# -- ids exactly as typed ----------------------------------------------------------------------------------------

ODD = "a-../../x"
UNKNOWN = f"unknown approval '{ODD}'"


def test_an_id_reaches_the_service_exactly_as_typed_over_http(served):
    encoded = "a-..%2F..%2Fx"
    for method, path in (("GET", f"/api/approvals/{encoded}"), ("POST", f"/api/approvals/{encoded}/approve"),
                         ("POST", f"/api/approvals/{encoded}/deny"), ("GET", f"/api/approvals/{encoded}/wait")):
        r = served.http.request(method, path, **({"json": {}} if method == "POST" else {}))
        assert r.status_code == 404 and r.json()["error"].startswith(UNKNOWN), (path, r.text)
    r = served.http.get("/api/turns/t-%3F..%2Fx")
    assert r.status_code == 404 and r.json()["error"] == "unknown turn 't-?../x'"
    r = served.http.get("/api/elicitations/e-%2E%2E")
    assert r.status_code == 404 and r.json()["error"].startswith("unknown question 'e-..'")


def test_the_cli_says_the_id_as_typed_through_the_service_and_in_process(served, home):
    for where in (served.home, home):  # the first has a live service, the second none
        r = run_cli(where, "approvals", "approve", ODD)
        assert r.returncode == 1 and UNKNOWN in r.stderr and "Traceback" not in r.stderr, (where, r.stderr)
        r = run_cli(where, "approvals", "deny", "..")
        assert r.returncode == 1 and "unknown approval '..'" in r.stderr, (where, r.stderr)


def test_palui_chat_says_the_id_as_typed(served):
    with PipedChat(served.home) as chat:  # the live service runs: the chat is its client
        chat.send(f"/approve {ODD}")
        chat.wait_for(UNKNOWN, 60)
        chat.send(f"/deny {ODD} not now")
        chat.wait_for(UNKNOWN, 60, after=chat.mark())
        assert "Not Found" not in chat.output() and "unknown approval 'x'" not in chat.output()
        chat.close()


def test_the_web_page_says_the_id_as_typed(served):
    cookies = {"palui_session": session_value(served.token)}
    csrf = csrf_value(served.token)
    with httpx.Client(base_url=served.url, cookies=cookies, headers={"X-Palui-CSRF": csrf}) as page:
        r = page.post("/chat/command", json={"line": f"/approve {ODD}"})
        assert r.status_code == 400 and r.json()["error"].startswith(UNKNOWN)
        r = page.post("/approvals/a-..%2F..%2Fx/approve", data={"csrf": csrf, "back": "/approvals"})
        assert r.status_code == 303
        flash = json.loads(base64.urlsafe_b64decode(r.cookies["palui_flash"]))
        assert flash["kind"] == "error" and flash["text"].startswith(UNKNOWN)
        r = page.get("/approvals/a-..%2F..%2Fx/card")
        assert r.status_code == 404 and "unknown approval &#39;a-../../x&#39;" in r.text


def test_a_chat_channel_says_the_id_as_typed(telegram_rig):
    from support.telegram_rig import visible

    rig = telegram_rig(pair=True)
    up = rig.say(f"/approve {ODD}")
    reply = rig.reply_after(up)
    assert visible(reply).startswith(UNKNOWN), visible(reply)


# -- the web page's forms --------------------------------------------------------------------------------------


def test_web_forms_are_held_to_the_same_bounds(served):
    cookies = {"palui_session": session_value(served.token)}
    csrf = csrf_value(served.token)
    with httpx.Client(base_url=served.url, cookies=cookies) as page:
        for days in ("abc", "0", "367", "99999999999999999999999"):
            r = page.get("/governance", params={"days": days})
            assert r.status_code == 400 and "days" in r.text, days

        def flash(r: httpx.Response) -> dict:
            assert r.status_code == 303, r.text
            return json.loads(base64.urlsafe_b64decode(r.cookies["palui_flash"]))

        jobs = served.count("jobs")
        for cap in ("abc", "-1", "1e3", "99999999999999999999999"):
            f = flash(page.post("/jobs/add", data={"csrf": csrf, "back": "/jobs", "name": "j", "cron": "@daily",
                                                   "prompt": "p", "token_cap": cap}))
            assert f["kind"] == "error" and "token_cap" in f["text"], (cap, f)
        assert served.count("jobs") == jobs
        f = flash(page.post("/memories/memory/abc/forget", data={"csrf": csrf, "back": "/memories"}))
        assert f["kind"] == "error" and "no memory 'abc'" in f["text"]
        f = flash(page.post("/connectors/add", data={"csrf": csrf, "back": "/connectors", "name": "t",
                                                     "transport": "stdio", "command": "true", "timeout": "soon"}))
        assert f["kind"] == "error" and "timeout" in f["text"]
        f = flash(page.post("/chat/send", data={"csrf": csrf, "message": "x" * 100_001}))
        assert f["kind"] == "error" and "message" in f["text"]
