"""The gateway's caps on calls (spec §8.6, :mod:`palui.runner.gateway_cap`): a client's own cap and the ceiling
over every client, counted per minute, a call counting for the 60 minutes of its window, and the time the next
call is possible."""

from __future__ import annotations

from datetime import UTC, datetime

from palui.runner.gateway_cap import GatewayCap


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _cap(svc, client: str, clock: Clock, own: int | None = None) -> GatewayCap:
    return GatewayCap(svc.db, svc.settings, client, own, now=clock)


def test_a_clients_cap_frees_as_its_oldest_minute_leaves_the_window(svc):
    clock = Clock(datetime(2026, 12, 3, 10, 0, 30, tzinfo=UTC).timestamp())
    cap = _cap(svc, "coder", clock, own=3)
    assert cap.take() is None  # 10:00
    clock.t += 60 * 10
    assert cap.take() is None and cap.take() is None  # 10:10, twice
    assert cap.over() == cap.take() is not None
    assert "this client's cap of 3 calls an hour" in cap.over() and "the next call is possible at 11:00:00 UTC" in \
        cap.over()
    clock.t += 60 * 50  # 11:00:30: 10:00's call has left the window
    assert cap.over() is None and cap.take() is None
    assert "the next call is possible at 11:10:00 UTC" in cap.over()  # both 10:10 calls must leave
    clock.t += 60 * 9.5  # 11:10:00
    assert cap.over() is None
    # the counters: one row per client and minute, the old ones dropped as new ones are written
    assert cap.take() is None
    rows = svc.db.all("SELECT client, minute, calls FROM gateway_call_minutes ORDER BY client, minute")
    assert [(r["client"], r["calls"]) for r in rows] == [("", 1), ("", 1), ("coder", 1), ("coder", 1)]


def test_the_ceiling_holds_every_client_and_names_itself(svc, home):
    (home / "palui.toml").write_text("[caps]\ngateway_calls_per_hour = 2\n")
    from palui.service import Service

    s = Service()
    try:
        clock = Clock(datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC).timestamp())
        a, b = _cap(s, "a", clock), _cap(s, "b", clock)
        assert a.take() is None and b.take() is None
        why = a.over()
        assert why is not None and why.startswith("caps.gateway_calls_per_hour (2) is reached by every client's")
        assert b.take() == why  # refused at the send step too, and not counted
        assert s.db.row("SELECT calls FROM gateway_call_minutes WHERE client = 'b'")[0] == 1
    finally:
        s.db.close()
