"""The service exposes its parts (docs/decisions/0185-the-service-exposes-its-parts.md): a front end calls
``svc.approvals.answer(…)``; the parts are built once and reach each other only through references; the
shared collaborators are private."""

from __future__ import annotations

import typing

from palui.service.api import Service
from palui.service.notifier import Notifier
from palui.service.rules import RulesPart

# Every public attribute of the service, in the order they are built (at most 30: a part that does not fit
# is a part of another part, or the service has grown a second concern).
PUBLIC = ["settings", "db", "notifier", "tools", "connectors", "connector_import", "signin", "policy", "suggestions",
          "report", "audit", "memories", "maintenance", "channels", "outbox", "mail_records", "status", "turns",
          "conversations", "elicitations", "approvals", "channel_updates", "live", "gateway", "gateway_content",
          "brake", "jobs", "webhooks", "runtime"]


def test_the_service_has_these_public_attributes_and_close(svc):
    assert [name for name in vars(svc) if not name.startswith("_")] == PUBLIC
    assert [name for name, v in vars(Service).items() if not name.startswith("_") and callable(v)] == ["close"]
    assert len(PUBLIC) + 1 <= 30


def test_each_public_attribute_is_typed_with_what_it_holds(svc):
    """The annotations on the class are what mypy checks the front ends against: each one is the part's own
    class, or the small Protocol of what front ends may use of it (the notifier)."""
    hints = typing.get_type_hints(Service)
    assert set(hints) == set(PUBLIC)
    for name in PUBLIC:
        value = getattr(svc, name)
        if name == "notifier":
            assert isinstance(value, Notifier) and hints[name] is not Notifier  # typed as the Notices protocol
        else:
            assert isinstance(value, hints[name]), name


def test_the_shared_collaborators_are_private(svc):
    for name in ("hub", "clock", "redecision", "turn_tasks", "scheduler"):
        assert not hasattr(svc, name) and hasattr(svc, f"_{name}"), name


def test_each_part_is_built_once_and_shared(svc):
    assert svc.status.tools_part is svc.tools
    assert svc.approvals.reads.db is svc.db and svc.jobs.reads.clock is svc.jobs.clock
    assert svc.turns.status_part is svc.status
    assert svc.live.turn_tasks is svc._turn_tasks is svc.runtime.turn_tasks
    assert svc.runtime.tasks is svc._turn_tasks.tasks
    assert svc._hub.env.on_change == svc._redecision.redecide_approvals  # the hub calls the lowest part
    # the standing approvals (spec §5.9) are the approvals part's own: the answers given in advance
    assert isinstance(svc.approvals.rules, RulesPart) and not hasattr(svc, "rules")


def test_the_start_up_steps_run_in_order(svc):
    """The built-in tools are stored before expired approvals are swept (the sweep sees this version's tools)."""
    assert {t.connector for t in svc.tools.list()} >= {"recall", "tasks", "web", "messages"}
    calls: list[str] = []
    again = Service.__new__(Service)
    again.tools = type("T", (), {"register_builtins": lambda self: calls.append("builtins")})()
    again.approvals = type("A", (), {"sweep_expired": lambda self: calls.append("sweep")})()
    again._start_up()
    assert calls == ["builtins", "sweep"]


async def test_the_runtime_checks_the_policy_file_before_the_tick(svc, home, tmp_path):
    pinned = tmp_path / "pinned.csv"
    svc.tools.set_enabled(["recall__search_memories"], True)
    pinned.write_text(svc.policy.snapshot())
    svc.tools.set_class("recall__search_memories", "write")  # tighter than pinned: told, nothing switched off
    (home / "palui.toml").write_text(f'[policy]\ncheck_file = "{pinned}"\n')
    from palui.config import load_settings

    live = Service(load_settings())
    checked_before_tick: list[bool] = []
    install = live.runtime.install_tickers

    def recording_install() -> None:
        checked_before_tick.append(any("does not hold" in m["text"] for m in live.notifier.inbox()))
        install()

    live.runtime.install_tickers = recording_install
    await live.runtime.start(tick_seconds=3600)
    try:
        assert checked_before_tick == [True]
        assert live.runtime.tickers  # the tick started after the check
        assert live.tools.get("recall__search_memories").enabled  # tighter than pinned: nothing switched off
    finally:
        await live.runtime.shutdown(grace_seconds=1)
        live.db.close()
