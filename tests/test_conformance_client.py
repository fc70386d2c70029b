"""scripts/mcp_conformance_client.py, the conformance suite's client, reaches Palui through names that exist.

CI runs the suite only after pytest (``scripts/run_conformance.sh``); these tests run the client's
paths here so that a renamed service method fails in the suite, not an hour later in CI.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mcp_conformance_client.py"


def load_client() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mcp_conformance_client", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_pre_registration_stores_the_client_then_reports_the_connect_failure(monkeypatch) -> None:
    client = load_client()
    saved: list[tuple[str, object]] = []
    from palui.service.connectors import ConnectorsPart

    real = ConnectorsPart.save_client

    def spy(self, cid, oauth_client):  # the real method runs; the test sees what it got
        saved.append((cid, oauth_client))
        return real(self, cid, oauth_client)

    monkeypatch.setattr(ConnectorsPart, "save_client", spy)
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    problems = asyncio.run(client.run(url, "auth/pre-registration", {"client_id": "pre-id", "client_secret": "s"}, 2.0))
    assert [c for c, _ in saved] == [client.CONNECTOR_ID]
    assert getattr(saved[0][1], "client_id", None) == "pre-id"
    assert len(problems) == 1 and problems[0].startswith("connect:"), problems


@pytest.mark.slow
def test_plain_scenario_reports_the_connect_failure() -> None:
    client = load_client()
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    problems = asyncio.run(client.run(url, "tools_call", {}, 2.0))
    assert len(problems) == 1 and problems[0].startswith("connect:"), problems
