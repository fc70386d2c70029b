"""@modelcontextprotocol/server-everything's elicitation tools over stdio (spec §7.8).

Advertising elicitation (and nothing else) makes it list two more tools, which arrive switched off
like any new tool; its task-only tool is never offered. Its 13-field form (string formats, ranges,
defaults, single- and multi-select enums, legacy ``enumNames``) passes Palui's schema check and is
answered through the one door; its URL-mode question shows the full URL and its host and is declined.
"""

from __future__ import annotations

import asyncio

import pytest

from palui.text.elicitation import fields
from palui.text.mcp_config import ServerConfig
from support.mcp_servers import node_server
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow
CID = "mcp-everything"


@pytest.fixture
async def svc_everything(svc):
    config = ServerConfig("stdio", command=str(node_server("mcp-server-everything")))
    await svc.connectors.add_async("everything", config)
    yield svc
    await svc.close()


async def test_two_more_tools_switched_off_and_the_task_tool_never_offered(svc_everything, tmp_path):
    svc = svc_everything
    tools = {t.tool: t for t in svc.tools.list(CID)}
    assert len(tools) == 15
    for name in ("trigger-elicitation-request", "trigger-url-elicitation"):
        assert not tools[name].enabled  # new tools start off
    assert not [n for n in tools if "sampling" in n or "roots" in n]
    task_tool = tools["simulate-research-query"]
    assert task_tool.needs_tasks and svc.tools.details(task_tool.name)["needs_tasks"]
    svc.tools.set_enabled([task_tool.name, f"{CID}__echo"], True)
    model = write_script(tmp_path / "s.json", calls(call(task_tool.name, topic="x")), text("ok"))
    r = await svc.turns.send("research", model=model)
    assert task_tool.name not in r["events"][0]["tools_offered"] and f"{CID}__echo" in r["events"][0]["tools_offered"]
    [ev] = [e for e in r["events"] if e["type"] == "tool_call"]
    assert ev["verdict"] == "unavailable" and "needs MCP tasks, not supported yet" in ev["result"]


async def _wait(svc) -> dict:
    for _ in range(400):
        pending = svc.elicitations.list("pending")
        if pending:
            return pending[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no question")


async def test_its_form_and_its_url_question(svc_everything, tmp_path):
    svc = svc_everything
    form_tool, url_tool = f"{CID}__trigger-elicitation-request", f"{CID}__trigger-url-elicitation"
    svc.tools.set_enabled([form_tool, url_tool], True)
    for name in (form_tool, url_tool):
        svc.tools.set_class(name, "read")
    svc.tools.set_trusted(CID)
    model = write_script(tmp_path / "s.json", calls(call(form_tool)),
                         calls(call(url_tool, url="https://accounts.example.com/link?code=1")), text("ok"))
    turn = asyncio.create_task(svc.turns.send("try the forms", model=model))
    q = await _wait(svc)
    assert len(q["fields"]) == 13 and q["status"] == "pending"  # every field is one a flat form can show
    kinds = {f.name: f.kind for f in fields(q["schema"])}
    assert kinds["untitledMultipleSelectEnum"] == kinds["titledMultipleSelectEnum"] == "choices"
    assert kinds["legacyTitledEnum"] == "choice" and kinds["check"] == "boolean"
    svc.elicitations.answer(q["id"], "accept", {"name": "Ada"}, "api")  # the schema's defaults fill the rest
    u = None
    for _ in range(400):
        u = next((x for x in svc.elicitations.list("pending") if x["mode"] == "url"), None)
        if u:
            break
        await asyncio.sleep(0.05)
    assert u is not None
    assert (u["url"], u["url_host"]) == ("https://accounts.example.com/link?code=1", "accounts.example.com")
    notice = [n["text"] for n in svc.notifier.inbox() if n["kind"] == "elicitation"][-1]
    assert "https://accounts.example.com/link?code=1" in notice and "host: accounts.example.com" in notice
    assert "Palui never opens it" in notice
    svc.elicitations.answer(u["id"], "decline", None, "api")
    r = await turn
    results = {e["tool"]: e["result"] for e in r["events"] if e["type"] == "tool_call"}
    assert "User provided the requested information" in results[form_tool]
    assert "declined" in results[url_tool]
