"""The fast net's guard (tests/support/fast_net.py): a test not marked ``slow`` that starts a process, a
browser or a network socket fails; what stays in the process passes.

Each case watches a stretch of its own (the innermost watch wins), so the forbidden call is refused
before anything starts and this module itself stays in the fast net; the last test runs pytest on a
small suite with this repository's conftest to show the guard fails an unmarked test end to end.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from support.fast_net import NotInTheFastNet, watch

TESTS = Path(__file__).resolve().parent


def plain(seen: list[str]) -> list[str]:
    """What the guard recorded, without the `` (from FILE:LINE)`` that names where it came from."""
    return [re.sub(r" \(from [^()]*:\d+\)$", "", s) for s in seen]


def refused(action) -> list[str]:
    """Run ``action`` under a watch of its own; return what the guard refused (it must refuse something)."""
    with watch("case") as w:
        with pytest.raises(NotInTheFastNet):
            action()
    assert w.seen, "the guard let it through"
    return plain(w.seen)


def test_a_process_is_refused_before_it_starts(tmp_path):
    marker = tmp_path / "ran"
    seen = refused(lambda: subprocess.run(["touch", str(marker)], check=False))
    assert seen == [f"a process (touch {marker})"]
    assert not marker.exists()  # refused before the process started, not after
    assert refused(lambda: os.system(f"touch {marker}")) == [f"a process (os.system 'touch {marker}')"]
    assert "os.posix_spawn" in refused(lambda: os.posix_spawn("/usr/bin/touch", ["touch", str(marker)],
                                                              dict(os.environ)))[0]
    assert getattr(os.fork, "_fast_net", False)  # never fork the test process if the guard were missing
    assert refused(os.fork) == ["os.fork()"]
    assert not marker.exists()


def test_the_refusal_names_where_it_came_from():
    with watch("where") as w:
        with pytest.raises(NotInTheFastNet):
            subprocess.run(["true"], check=False)  # this line
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.endswith("# this line"))
    assert w.seen == [f"a process (true) (from tests/test_fast_net.py:{line})"]


def test_an_asyncio_subprocess_is_refused():
    async def start():
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    assert refused(lambda: asyncio.run(start()))[0].startswith(f"a process ({sys.executable} -c pass")


def test_a_multiprocessing_start_is_refused():
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    assert refused(lambda: ctx.Process(target=print).start())[0].startswith("a process (")


def test_a_browser_is_refused():
    """Playwright starts its driver as a process (and the driver the browser)."""
    pytest.importorskip("playwright")
    from playwright.sync_api import Error, sync_playwright

    with watch("browser") as w:
        with pytest.raises((NotInTheFastNet, Error)):
            with sync_playwright() as p:
                p.chromium.launch(executable_path="/usr/bin/chromium")
    assert w.seen and w.seen[0].startswith("a process (")


@pytest.mark.parametrize("family, host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_a_network_socket_is_refused(family, host):
    def listen():
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, 0))

    def connect():
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.connect((host, 9))

    def connect_ex():
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.connect_ex((host, 9))

    def datagram():
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.sendto(b"x", (host, 9))

    for action, call in ((listen, "bind"), (connect, "connect"), (connect_ex, "connect_ex"), (datagram, "sendto")):
        assert refused(action) == [f"socket.{call}(({host!r}, {0 if call == 'bind' else 9})) on an "
                                   f"{family.name} socket"]


def test_an_http_client_that_swallows_the_refusal_still_fails_the_test():
    """httpx turns the refused connect into its own error; the guard has recorded it anyway."""
    with watch("httpx") as w:
        with pytest.raises(httpx.ConnectError):
            httpx.get("http://127.0.0.1:9/", timeout=5)
        try:  # code under test that catches everything: the refusal is still on record
            subprocess.run(["true"], check=False)
        except Exception:
            pass
    assert plain(w.seen) == ["socket.connect(('127.0.0.1', 9)) on an AF_INET socket", "a process (true)"]


def test_what_stays_in_the_process_passes(tmp_path):
    with watch("allowed") as w:
        a, b = socket.socketpair()  # asyncio's self-pipe is such a pair
        a.sendall(b"x")
        assert b.recv(1) == b"x"
        a.close(), b.close()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as u:
            u.bind(str(tmp_path / "u.sock"))
        asyncio.run(asyncio.sleep(0))
        transport = httpx.MockTransport(lambda request: httpx.Response(200, text="in process"))
        assert httpx.Client(transport=transport).get("http://example.test/").text == "in process"
    assert w.seen == []


def test_a_thread_of_the_test_is_watched_and_an_older_one_is_not():
    go, done = threading.Event(), threading.Event()
    older_result: list[str] = []

    def older():  # a session rig's thread, running before the watch began
        go.wait(60)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
            older_result.append("bound")
        finally:
            done.set()

    rig = threading.Thread(target=older, daemon=True)
    rig.start()
    with watch("threads") as w:
        go.set()
        assert done.wait(60)
        errors: list[BaseException] = []

        def newer():
            try:
                subprocess.run(["true"], check=False)
            except NotInTheFastNet as e:
                errors.append(e)

        t = threading.Thread(target=newer)
        t.start()
        t.join(60)
    assert older_result == ["bound"]
    assert len(errors) == 1 and plain(w.seen) == ["a process (true)"]


def test_a_test_marked_slow_may_start_what_it_needs():
    """A watch that allows (the test is marked slow) refuses nothing; a refused call outside any watch goes through
    the same way (the guard only acts on a watched stretch). Checked on a socket bind, which starts nothing."""
    with watch("slow", allowed=True) as w:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
    assert w.seen == []


@pytest.mark.slow
def test_the_conftest_fails_an_unmarked_test_end_to_end(pytester):
    """pytest on a small suite under this repository's conftest (in a child process): the unmarked test that
    starts a process fails with the guard's message; the same test marked slow passes; one that swallows
    the refused connect fails too."""
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n"
                     "markers =\n    slow: left out of the fast net\n")
    pytester.makepyfile(test_cases="""
        import subprocess, pytest, httpx

        def test_unmarked_starts_a_process():
            subprocess.run(["true"], check=True)

        @pytest.mark.slow
        def test_marked_starts_a_process():
            subprocess.run(["true"], check=True)

        def test_unmarked_swallows_a_refused_connect():
            try:
                httpx.get("http://127.0.0.1:9/", timeout=5)
            except Exception:
                pass

        def test_unmarked_in_process():
            assert sum(range(4)) == 6
    """)
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_unmarked_starts_a_process _*",
        "not marked slow, but its call started a process (true) (mark it @pytest.mark.slow, *",
        "*_ test_unmarked_swallows_a_refused_connect _*",
        "not marked slow, but its call started socket.connect(('127.0.0.1', 9)) on an AF_INET socket *",
    ])
