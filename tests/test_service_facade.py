"""The service facade (``palui.service.api.Service``): each public method forwards, in one line, to the
one part that owns it; the parts are built once and reach each other only through references."""

from __future__ import annotations

import inspect

from palui.service.api import Service
from palui.service.forward import Forward

# Public methods of the facade that are not a forward: each composes steps of several parts in a fixed order.
COMPOSED = {"start_background"}


def forwards() -> dict[str, Forward]:
    return {name: v for name, v in vars(Service).items() if isinstance(v, Forward)}


def test_every_public_method_is_a_forward_or_a_documented_composition():
    public = {name for name, v in vars(Service).items() if not name.startswith("_") and callable(v)}
    assert public - set(forwards()) == COMPOSED
    assert len(forwards()) > 150  # the whole API: a forward per method of today


def test_each_forward_reaches_the_method_it_names(svc):
    for name, fw in forwards().items():
        part = getattr(svc, fw.part)
        assert getattr(type(part), fw.name) is fw.method, name
        assert getattr(svc, name).__func__ is fw.method, name  # svc.<name> is the part's bound method
        assert getattr(svc, name).__self__ is part, name
        assert Service.__dict__[name].__doc__ == fw.method.__doc__, name


def test_a_forward_keeps_the_method_signature():
    sig = inspect.signature(Service.answer_approval.method)
    assert list(sig.parameters)[1:] == ["approval_id", "approve", "via", "reason", "always", "confirm", "stop"]
    assert Service.tools.part == "tools_part" and repr(Service.tools) == "Forward('tools_part', ToolsPart.tools)"


def test_each_part_is_built_once_and_shared(svc):
    assert svc.status_part.mcp_part is svc.mcp_part
    assert svc.turns_part.status_part is svc.status_part
    assert svc.live_part.turn_tasks is svc.turn_tasks is svc.runtime.turn_tasks
    assert svc.runtime.tasks is svc.turn_tasks.tasks
    assert svc.hub.env.on_change == svc.redecision.redecide_approvals  # the hub calls the lowest part


def test_the_start_up_steps_run_in_order(svc):
    """The built-in tools are stored before expired approvals are swept (the sweep sees this version's tools)."""
    assert {t.connector for t in svc.tools()} >= {"recall", "tasks", "web", "messages"}
    calls: list[str] = []
    again = Service.__new__(Service)
    again.tools_part = type("T", (), {"register_builtins": lambda self: calls.append("builtins")})()
    again.turns_part = type("U", (), {"sweep_expired_approvals": lambda self: calls.append("sweep")})()
    again._start_up()
    assert calls == ["builtins", "sweep"]


async def test_start_background_checks_the_policy_file_before_the_tick(svc, home, tmp_path):
    pinned = tmp_path / "pinned.csv"
    svc.set_enabled(["recall__search_memories"], True)
    pinned.write_text(svc.policy_snapshot())
    svc.set_class("recall__search_memories", "write")  # tighter than pinned: told, nothing switched off
    (home / "palui.toml").write_text(f'[policy]\ncheck_file = "{pinned}"\n')
    from palui.config import load_settings

    live = Service(load_settings())
    checked_before_start: list[bool] = []
    start = live.runtime.start

    async def recording_start(tick_seconds: float | None = None) -> None:
        checked_before_start.append(any("does not hold" in m["text"] for m in live.inbox()))
        await start(tick_seconds)

    live.runtime.start = recording_start
    await live.start_background(tick_seconds=3600)
    try:
        assert checked_before_start == [True]
        assert live.runtime.tickers  # the tick started after the check
        assert live.tool("recall__search_memories").enabled  # tighter than pinned: nothing switched off
    finally:
        await live.stop_background(grace_seconds=1)
        live.db.close()
