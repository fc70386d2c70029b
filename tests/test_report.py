"""How much asking costs the person (spec §5.8): ``palui report`` through the CLI over real turns, the
``/status`` section, the Governance page rendered, and the suggestion rules as tables and over random input
(never loosening a destructive or unknown class)."""

from __future__ import annotations

import json
import random
import sys

import pytest

from palui.policy.advice import ConnectorFacts, ToolFacts, advise
from palui.store.report import ask_cause, connector_of
from support.httpserver import PageServer
from support.mcp_servers import HOSTILE, READ, hostile_spec, tool
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.mcp_in_process


def run(cli, tmp_path, *steps, message="go", env=None) -> dict:
    model = write_script(tmp_path / "s.json", *steps)
    r = cli("run", "--json", "--model", model, message, env=env)
    return json.loads(r.stdout)


@pytest.mark.slow
def test_the_report_counts_asks_answers_causes_jobs_refusals_and_taint_and_suggests(cli, tmp_path, home):
    (home / "palui.toml").write_text("[web]\nallow_private = true\n[approvals]\njob_expiry_seconds = 0.5\n")
    spec = hostile_spec(tmp_path / "spec.json", [tool("lookup", annotations=READ, description="Look up.")])
    assert cli("connectors", "add", "h", "--", sys.executable, str(HOSTILE), str(spec)).returncode == 0
    assert cli("tools", "enable-read", "mcp-h").returncode == 0
    with PageServer({"/p": "<html><body>Some page.</body></html>"}) as pages:
        # 1. taint: a fetched page, then a write asks; approved.
        out = run(cli, tmp_path, calls(call("web__fetch_page", url=pages.url + "/p")),
                  calls(call("recall__add_memory", text="from the page")), text("ok"))
        assert out["status"] == "awaiting_approval"
        assert cli("approvals", "approve", out["pending_approvals"][0]["id"]).returncode == 0
    # 2. class: a destructive tool asks in a clean chat turn; denied.
    out = run(cli, tmp_path, calls(call("recall__forget_memory", id=1)), text("ok"))
    assert cli("approvals", "deny", out["pending_approvals"][0]["id"]).returncode == 0
    # 3. a job: its write waits for the person, and the approval expires.
    job_model = write_script(tmp_path / "job.json", calls(call("tasks__create_task", title="from the job")),
                             text("ok"))
    assert cli("jobs", "add", "brief", "--cron", "0 8 * * *", "--prompt", "make a task").returncode == 0
    out = json.loads(cli("jobs", "run", "brief", "--json", env={"PALUI_MODEL": job_model}).stdout)
    assert out["status"] == "awaiting_approval"
    # 4. not offered: a switched-off read tool the model keeps calling.
    assert cli("tools", "disable", "tasks__list_tasks").returncode == 0
    out = run(cli, tmp_path, calls(*[call("tasks__list_tasks", status=s) for s in ("open", "done", "all")]),
              text("ok"))
    assert out["status"] == "done"
    # 5. an MCP connector's results taint three conversations.
    for i in range(3):
        assert run(cli, tmp_path, calls(call("mcp-h__lookup", q=f"x{i}")), text("ok"))["tainted"]

    import time
    time.sleep(0.6)  # the job's approval expires
    r = cli.json("report", "--json")
    a = r["asks"]
    assert (a["total"], a["approved"], a["denied"], a["expired"], a["pending"]) == (3, 1, 1, 1, 0)
    assert a["by_cause"] == {"taint": 1, "class": 1, "job": 1, "outside": 0, "other": 0}
    assert sum(d["asks"] for d in a["per_day"]) == 3 and len(a["per_day"]) == 7
    assert a["median_answer_seconds"] is not None and a["answered_via"] == {"cli": 2}
    assert {t["tool"] for t in a["top_tools"]} == {"recall__add_memory", "recall__forget_memory",
                                                   "tasks__create_task"}
    assert r["job_turns_waited"] == {"turns": 1, "asks": 1, "expired": 1, "median_wait_seconds":
                                     r["job_turns_waited"]["median_wait_seconds"]}
    assert r["not_offered"] == {"total": 3, "by_tool": [{"tool": "tasks__list_tasks", "refused": 3}]}
    tainted = {t["connector"]: t["conversations"] for t in r["tainted_conversations"]}
    assert tainted == {"mcp-h": 3, "web": 1}
    commands = [s["command"] for s in r["suggestions"]]
    assert "palui connectors trust mcp-h" in commands and "palui connectors trust web" not in commands
    assert "palui tools enable tasks__list_tasks" in commands
    text_out = cli("report").stdout
    assert "results of mcp-h tainted 3 conversations in the last 7 days; if it returns no text written by others:" \
        in text_out and "    palui connectors trust mcp-h" in text_out
    assert "caused by: taint 1, class 1, job 1, the Rule of Two 0" in text_out
    assert "calls refused as not offered: 3 (tasks__list_tasks 3)" in text_out
    # The /status section reads the same tables.
    g = cli.json("status", "--json")["governance"]
    assert (g["asks"], g["approved"], g["denied"], g["expired"]) == (3, 1, 1, 1)
    assert "asks in the last 7 days: 3 (approved 1, denied 1, expired 1, cancelled 0)" in cli("status").stdout
    # Running the suggestion is the person's act; the report never changed anything.
    assert cli.json("connectors", "list", "--json")[-1]["trusted_source"] is False
    assert cli("report", "--days", "0").returncode == 2
    assert cli.json("report", "--days", "1", "--json")["asks"]["total"] == 3


def numbers(top=(), tainted=(), refused=(), days=7, repeated=()):
    return {"days": days, "asks": {"top_tools": list(top)}, "tainted_conversations": list(tainted),
            "not_offered": {"by_tool": list(refused)}, "repeated": list(repeated)}


def again(tool_name, n, cls="write", context="tainted chat", made=False):
    return {"tool": tool_name, "context": context, "class": cls, "approvals": n, "latest": f"a-{tool_name}",
            "made": made}


def asked(tool_name, asks, approved=0, denied=0, cause="taint"):
    return {"tool": tool_name, "asks": asks, "approved": approved, "denied": denied, "expired": 0, "cancelled": 0,
            "by_cause": {cause: asks}}


TOOLS = {"w": ToolFacts("write", "hints", True, "mcp-a"), "d": ToolFacts("destructive", "hints", True, "mcp-a"),
         "u": ToolFacts("destructive", "unknown", True, "mcp-a"), "r": ToolFacts("read", "builtin", False, "web"),
         "ro": ToolFacts("read", "user", True, "mcp-a", outside_flag=True),
         "woff": ToolFacts("write", "hints", False, "mcp-a"), "doff": ToolFacts("destructive", "hints", False, "mcp-a")}
CONNS = {"mcp-a": ConnectorFacts("mcp", False), "mcp-t": ConnectorFacts("mcp", True), "web": ConnectorFacts("builtin",
                                                                                                           False)}


@pytest.mark.parametrize("n,expected", [
    (numbers(tainted=[{"connector": "mcp-a", "conversations": 3}]), ["palui connectors trust mcp-a"]),
    (numbers(tainted=[{"connector": "mcp-a", "conversations": 2}]), []),
    (numbers(tainted=[{"connector": "mcp-t", "conversations": 9}]), []),  # already trusted
    (numbers(tainted=[{"connector": "web", "conversations": 9}]), []),  # web pages are text by others
    (numbers(tainted=[{"connector": "webhook", "conversations": 9}]), []),
    (numbers(top=[asked("w", 5, approved=5)]), ["palui tools set-class w read"]),
    (numbers(top=[asked("w", 5, approved=4, denied=1)]), []),
    (numbers(top=[asked("d", 9, approved=9)]), []),  # never loosen destructive
    (numbers(top=[asked("u", 9, approved=9)]), ["palui tools suggest mcp-a"]),  # unknown: only suggestions
    (numbers(top=[asked("ro", 5, approved=5, cause="outside")]), ["palui tools reaches-outside ro --off"]),
    (numbers(top=[asked("w", 3, denied=3)]), ["palui tools disable w"]),
    (numbers(top=[asked("d", 3, denied=3)]), ["palui tools disable d"]),
    (numbers(refused=[{"tool": "r", "refused": 3}]), ["palui tools enable r"]),
    (numbers(refused=[{"tool": "woff", "refused": 4}]), ["palui tools enable woff"]),
    (numbers(refused=[{"tool": "doff", "refused": 9}]), []),  # never switch on a destructive tool
    (numbers(refused=[{"tool": "r", "refused": 2}]), []),
    (numbers(refused=[{"tool": "gone", "refused": 9}]), []),
    # a call approved 3 times with the same arguments in one context: a standing approval, pinned (spec §5.9)
    (numbers(repeated=[again("w", 3)]), ["palui rules add a-w"]),
    (numbers(repeated=[again("w", 2)]), []),
    (numbers(repeated=[again("w", 5, made=True)]), []),  # one was made from it already
    (numbers(repeated=[again("r", 4, cls="read", context="gateway:coder")]), ["palui rules add a-r"]),
    (numbers(repeated=[again("d", 9, cls="destructive", context="chat")]), []),  # never destructive (0130)
    (numbers(repeated=[again("u", 9, cls="destructive", context="chat")]), []),  # nor unknown
])
def test_the_suggestion_table(n, expected):
    assert [s["command"] for s in advise(n, TOOLS, CONNS)] == expected


LOOSENING = ("palui tools set-class", "palui tools enable", "palui tools reaches-outside")


def test_never_a_loosening_of_a_destructive_or_unknown_tool_over_random_numbers():
    rng = random.Random(15)
    classes = ("read", "write", "destructive")
    for _ in range(3000):
        tools = {f"t{i}": ToolFacts(rng.choice(classes), rng.choice(("user", "builtin", "hints", "unknown")),
                                    rng.random() < 0.5, rng.choice(("mcp-a", "mcp-b", "web")), rng.random() < 0.3)
                 for i in range(6)}
        for name, t in list(tools.items()):
            if t.class_source == "unknown":
                tools[name] = ToolFacts("destructive", "unknown", t.enabled, t.connector, t.outside_flag)
        top = [asked(f"t{i}", (a := rng.randint(0, 12)), approved=(ap := rng.randint(0, a)),
                     denied=rng.randint(0, a - ap), cause=rng.choice(("taint", "outside", "class", "job")))
               for i in range(6)]
        refused = [{"tool": f"t{i}", "refused": rng.randint(0, 9)} for i in range(6)]
        tainted = [{"connector": c, "conversations": rng.randint(0, 9)} for c in ("mcp-a", "mcp-b", "web")]
        conns = {"mcp-a": ConnectorFacts("mcp", rng.random() < 0.5), "mcp-b": ConnectorFacts("mcp", False),
                 "web": ConnectorFacts("builtin", False)}
        repeated = [again(f"t{i}", rng.randint(0, 6), tools[f"t{i}"].tool_class,
                          rng.choice(("chat", "tainted chat", "job")), rng.random() < 0.2) for i in range(6)]
        for s in advise(numbers(top, tainted, refused, repeated=repeated), tools, conns):
            assert s["text"] and s["command"].startswith("palui ")
            if s["command"].startswith(LOOSENING):
                t = tools[s["command"].split()[3]]
                assert t.tool_class != "destructive" and t.class_source != "unknown", (s, t)
            if s["command"].startswith("palui rules add"):  # never for a destructive or unknown tool, never widened
                t = tools[s["command"].split()[3].removeprefix("a-")]
                assert t.tool_class != "destructive" and t.class_source != "unknown" and "--widen" not in s["command"]
            if s["command"].startswith("palui tools set-class"):
                assert s["command"].endswith(" read") and tools[s["command"].split()[3]].tool_class == "write"


@pytest.mark.parametrize("reason,cls,origin,cause", [
    ("ask: write tool in a tainted turn (tainted by web__fetch_page at step 1)", "write", "chat", "taint"),
    ("ask: destructive tool in a chat turn", "destructive", "chat", "class"),
    ("ask: destructive tool in a tainted turn", "destructive", "chat", "class"),
    ("ask: write tool in a scheduled job", "write", "job", "job"),
    ("ask: Rule of Two: fetching an address that came from untrusted content: x", "read", "chat", "outside"),
    ("ask: Rule of Two: reaching an address …", "read", "job", "outside"),
])
def test_ask_causes(reason, cls, origin, cause):
    assert ask_cause(reason, cls, origin) == cause


def test_connector_of_a_taint_source():
    assert connector_of("mcp-time__get_time at step 2 (detail)") == "mcp-time"
    assert connector_of("web__fetch_page at step 1") == "web"
    assert connector_of("webhook 'gh' payload") == "webhook"


def test_the_governance_page_renders_the_report_and_escapes(svc, client):
    import time

    from palui.runner import approvals

    now = time.time()
    with svc.db.write() as c:
        c.execute("INSERT INTO conversations (id, origin, created_at) VALUES ('c-1', 'chat', ?)", (now,))
        c.execute("INSERT INTO turns (id, conversation_id, origin, status, input, created_at, updated_at) VALUES"
                  " ('t-1', 'c-1', 'chat', 'done', 'x', ?, ?)", (now, now))
        for i in range(4):
            c.execute("INSERT INTO untrusted_content (conversation_id, turn_id, source, text, created_at) VALUES"
                      " (?, 't-1', 'mcp-n\u202e__x at step 1', 'x', ?)", (f"c-{i}", now))
    for i in range(2):
        a = approvals.create(svc.db, turn_id="t-1", conversation_id="c-1", call={"id": f"k{i}", "tool":
                             "recall__forget_memory", "args": {"id": i}}, tool_class="destructive",
                             class_source="builtin", origin="chat", reason="ask: destructive tool in a chat turn",
                             expiry_seconds=60)
        approvals.answer(svc.db, a["id"], i == 0, "web")
    html = client.get("/governance").text
    assert 'href="/governance" aria-current="page"' in html  # the nav link
    assert 'id="answers"' in html and "approved</th><td>1" in html and "denied</th><td>1" in html
    assert 'data-tool="recall__forget_memory"' in html
    assert "\u202e" not in html and "\\u202e" in html  # a connector named by a taint source, escaped
    assert client.get("/governance?days=30").status_code == 200
    assert client.get("/governance?days=0").status_code == 400
    assert client.get("/governance?days=x").status_code == 400
    assert "Asks, last 7 days" in client.get("/status").text
