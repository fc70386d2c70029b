"""``palui serve`` process behaviour (SPEC §8): token everywhere, one service per home, clean stop."""

from __future__ import annotations

import os
import stat

from support.service import ServiceProcess


def test_token_required_one_service_per_home_and_clean_sigterm(cli, home):
    srv = ServiceProcess(home).start()
    try:
        import httpx

        assert httpx.get(srv.url + "/api/status").status_code == 401
        assert srv.client.get("/api/status").json()["paused"] is False
        assert stat.S_IMODE(os.stat(home / "access_token").st_mode) == 0o600
        assert stat.S_IMODE(os.stat(home / "serve.json").st_mode) == 0o600
        r = cli("serve", "--port", "0")
        assert r.returncode != 0 and "already runs" in r.stderr
    finally:
        rc = srv.stop()
    assert rc == 0
    assert not (home / "serve.json").exists()
    assert (home / "access_token").exists()  # reused by the next start


def test_non_loopback_needs_an_existing_token(cli, home):
    r = cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert r.returncode == 1 and "access token" in r.stderr
    assert not (home / "access_token").exists()
