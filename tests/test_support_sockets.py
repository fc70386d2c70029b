"""The tests' own servers listen on sockets made by one helper, ``tests/support/tcp.py`` (docs/decisions/
0081-tcp-nodelay.md's rule): a listening socket made with protocol 0 makes asyncio leave ``TCP_NODELAY`` off, and
every small answer on a kept-alive connection then waits ~40 ms for the client's delayed ACK, which a benchmark
reads as Palui's time."""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest

from support.tcp import free_port, listen_tcp

SUPPORT = Path(__file__).parent / "support"


def _socket_calls(path: Path) -> list[int]:
    """The lines of ``path`` that call ``socket.socket(`` (or a bare ``socket(`` imported from ``socket``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bare = any(isinstance(n, ast.ImportFrom) and n.module == "socket" and any(a.name == "socket" for a in n.names)
               for n in ast.walk(tree))
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if (isinstance(f, ast.Attribute) and f.attr == "socket" and isinstance(f.value, ast.Name)
                and f.value.id == "socket") or (bare and isinstance(f, ast.Name) and f.id == "socket"):
            out.append(n.lineno)
    return out


def test_no_support_file_makes_a_socket_but_the_helper():
    found = {p.name: lines for p in sorted(SUPPORT.glob("*.py")) if p.name != "tcp.py" and (lines := _socket_calls(p))}
    assert found == {}, f"make listening sockets with support.tcp.listen_tcp (IPPROTO_TCP, TCP_NODELAY): {found}"


def test_the_scan_sees_both_spellings(tmp_path):
    (tmp_path / "a.py").write_text("import socket\ns = socket.socket()\n")
    (tmp_path / "b.py").write_text("from socket import socket\ns = socket()\n")
    assert _socket_calls(tmp_path / "a.py") == [2] and _socket_calls(tmp_path / "b.py") == [2]


@pytest.mark.slow
def test_the_helper_listens_with_tcp_nodelay():
    with listen_tcp() as sock:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert sock.getsockname()[1] > 0
    assert free_port() > 0
