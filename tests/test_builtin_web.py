"""web__fetch_page: address policy on every hop, pinned connections, limits, extraction (spec §7, §4).

Real HTTP(S) servers on loopback addresses, started per test. The "public" first hop
is simulated by injecting an address policy that allows 127.0.0.1 only (every other
address still goes through the real policy), and host names by injecting a resolver.
"""

from __future__ import annotations

import gzip
import ipaddress
import ssl
import threading
import time
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from palui.connectors.base import CallContext
from palui.connectors.builtin.extract import html_to_text
from palui.connectors.builtin.netguard import address_refusal
from palui.connectors.builtin.web import WebConnector
from palui.types import Origin

PAGE = (b"<!doctype html><html><head><title>The  Title</title><style>body{color:red}</style>"
        b"<script>var secret = 'SCRIPT TEXT';</script></head><body><h1>Hello</h1>"
        b"<p>First   para&amp;graph.</p><noscript>NOSCRIPT</noscript><ul><li>one</li><li>two</li></ul>"
        b"<svg><title>SVG TITLE</title></svg><p>Last</p></body></html>")


class Server:
    """A threaded HTTP server on ``host``; ``routes[path](handler)`` answers, ``hits`` records requests."""

    def __init__(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict = {}
        self.hits: list[tuple[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                server.hits.append((self.path, self.headers.get("Host")))
                route = server.routes.get(self.path)
                if route is None:
                    return send(self, 404, b"<html><body><p>Nothing at this path</p></body></html>", "text/html")
                route(self)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.host = host
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def url(self, path: str, scheme: str = "http", host: str | None = None) -> str:
        return f"{scheme}://{host or self.host}:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def send(h: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str | None, headers: dict | None = None):
    h.send_response(status)
    if ctype:
        h.send_header("Content-Type", ctype)
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def redirect(location: str, status: int = 302):
    return lambda h: send(h, status, b"", None, {"Location": location})


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def ctx(svc, **settings) -> CallContext:
    st = svc.settings.with_values({k.replace("__", "."): v for k, v in settings.items()})
    return CallContext(turn_id="t1", conversation_id="c1", origin=Origin.CHAT, tainted=False, taint_source=None,
                       step=1, db=svc.db, settings=st)


def only_first_loopback(ip):
    """A test policy: 127.0.0.1 stands in for a public address; everything else meets the real policy."""
    return None if str(ip) == "127.0.0.1" else address_refusal(ip)


async def fetch(svc, url, connector=None, **settings):
    return await (connector or WebConnector()).call_tool("fetch_page", {"url": url}, ctx(svc, **settings))


# -- the address policy as a table ---------------------------------------------------------------

@pytest.mark.parametrize("addr,reason", [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.1.1", "private"), ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("100.64.0.1", "not public"),  # carrier-grade NAT
    ("192.0.2.10", "private"), ("198.18.0.1", "private"), ("2001:db8::1", "private"),  # documentation, benchmark
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"), ("::ffff:169.254.169.254", "link-local"),
    ("64:ff9b::7f00:1", "loopback (inside 64:ff9b::7f00:1)"), ("64:ff9b::a00:1", "private (inside 64:ff9b::a00:1)"),
    ("2002:7f00:1::", "loopback (inside 2002:7f00:1::)"), ("2002:a00:1::", "private (inside 2002:a00:1::)"),
    ("8.8.8.8", None), ("1.1.1.1", None), ("93.184.216.34", None), ("2606:4700:4700::1111", None),
    ("::ffff:8.8.8.8", None), ("2002:808:808::", None), ("64:ff9b::808:808", None),
])
def test_address_policy_table(addr, reason):
    assert address_refusal(ipaddress.ip_address(addr)) == reason


# -- refused by default -----------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "10.0.0.1", "169.254.169.254", "0.0.0.0",
                                  "[::ffff:127.0.0.1]", "2130706433", "127.1"])
@pytest.mark.slow
async def test_private_addresses_refused_by_default(svc, server, host):
    server.routes["/"] = lambda h: send(h, 200, b"reached", "text/plain")
    r = await fetch(svc, server.url("/", host=host))
    assert r.is_error and r.untrusted is True
    assert "refused" in r.text and "web.allow_private" in r.text, r.text
    assert server.hits == []


@pytest.mark.parametrize("url", ["ftp://example.com/file", "file:///etc/passwd", "javascript:alert(1)",
                                 "not a url", "http:///nohost", "", "   "])
async def test_bad_urls_are_error_results(svc, url):
    r = await WebConnector().call_tool("fetch_page", {"url": url}, ctx(svc))
    assert r.is_error and r.untrusted is True and r.text


async def test_missing_url_argument(svc):
    r = await WebConnector().call_tool("fetch_page", {}, ctx(svc))
    assert r.is_error and r.untrusted is True


# -- allowed fetches ------------------------------------------------------------------------------------

@pytest.mark.slow
async def test_allow_private_fetches_loopback_and_extracts_text(svc, server):
    server.routes["/page"] = lambda h: send(h, 200, PAGE, "text/html; charset=utf-8")
    r = await fetch(svc, server.url("/page"), web__allow_private=True)
    assert not r.is_error and r.untrusted is True, r.text
    assert r.text.splitlines()[:2] == [f"URL: {server.url('/page')}", "Title: The Title"]
    body = r.text.split("\n\n", 1)[1]
    assert body.splitlines() == ["Hello", "First para&graph.", "- one", "- two", "Last"]
    for hidden in ("SCRIPT TEXT", "color:red", "NOSCRIPT", "SVG TITLE"):
        assert hidden not in r.text


@pytest.mark.slow
async def test_allow_private_from_the_environment(home, server, monkeypatch):
    monkeypatch.setenv("PALUI_WEB__ALLOW_PRIVATE", "true")
    from palui.service import Service

    s = Service()
    server.routes["/t"] = lambda h: send(h, 200, b"plain words", "text/plain")
    r = await WebConnector().call_tool("fetch_page", {"url": server.url("/t")}, ctx(s))
    s.db.close()
    assert not r.is_error and r.text.endswith("plain words")


@pytest.mark.parametrize("ctype,body,expect", [
    ("text/plain; charset=utf-8", "line 1\n  line 2 ünïcode".encode(), "line 1\n  line 2 ünïcode"),
    ("application/json", b'{"a": [1, 2], "b": "<p>x</p>"}', '{"a": [1, 2], "b": "<p>x</p>"}'),
    ("text/plain; charset=iso-8859-1", "café".encode("latin-1"), "café"),
    (None, b"<!DOCTYPE html><html><title>T</title><body><p>untyped html</p></body></html>", "untyped html"),
    (None, b"just some text", "just some text"),
    ("text/html", '<meta charset="windows-1252"><p>naïve</p>'.encode("cp1252"), "naïve"),
])
@pytest.mark.slow
async def test_content_types(svc, server, ctype, body, expect):
    server.routes["/c"] = lambda h: send(h, 200, body, ctype)
    r = await fetch(svc, server.url("/c"), web__allow_private=True)
    assert not r.is_error and r.text.endswith(expect), r.text


@pytest.mark.slow
async def test_binary_content_is_described_not_dumped(svc, server):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    server.routes["/img"] = lambda h: send(h, 200, png, "image/png")
    r = await fetch(svc, server.url("/img"), web__allow_private=True)
    assert not r.is_error and "image/png" in r.text and f"{len(png)} bytes" in r.text
    assert "PNG" not in r.text.replace("image/png", "")


@pytest.mark.slow
async def test_http_error_status_is_an_error_result_with_the_answer(svc, server):
    r = await fetch(svc, server.url("/missing"), web__allow_private=True)
    assert r.is_error and r.untrusted is True
    assert "HTTP 404" in r.text and "Nothing at this path" in r.text
    server.routes["/boom"] = lambda h: send(h, 503, b"down for maintenance", "text/plain")
    r = await fetch(svc, server.url("/boom"), web__allow_private=True)
    assert r.is_error and "HTTP 503" in r.text


@pytest.mark.slow
async def test_connection_refused_is_an_error_result(svc):
    s = Server()
    url = s.url("/")
    s.close()
    r = await fetch(svc, url, web__allow_private=True)
    assert r.is_error and r.untrusted is True and "could not" in r.text


# -- redirects: every hop is checked ----------------------------------------------------------------------

@pytest.mark.slow
async def test_redirect_to_private_address_is_refused(svc, server):
    other = Server("127.0.0.2")  # loopback too: the real policy refuses it
    try:
        other.routes["/secret"] = lambda h: send(h, 200, b"internal data", "text/plain")
        server.routes["/go"] = redirect(other.url("/secret"))
        server.routes["/go10"] = redirect("http://10.0.0.1/admin", 301)
        server.routes["/go-meta"] = redirect("http://169.254.169.254/latest/meta-data/", 307)
        web = WebConnector(policy=only_first_loopback)
        for path in ("/go", "/go10", "/go-meta"):
            r = await fetch(svc, server.url(path), web)
            assert r.is_error and r.untrusted is True and "refused" in r.text, r.text
            assert "internal data" not in r.text
        assert other.hits == []
        assert [p for p, _ in server.hits] == ["/go", "/go10", "/go-meta"]
    finally:
        other.close()


@pytest.mark.slow
async def test_allowed_redirects_are_followed_and_limited(svc, server):
    server.routes["/a"] = redirect("/b", 301)
    server.routes["/b"] = redirect(server.url("/c"), 308)
    server.routes["/c"] = lambda h: send(h, 200, b"arrived", "text/plain")
    web = WebConnector(policy=only_first_loopback)
    r = await fetch(svc, server.url("/a"), web)
    assert not r.is_error and r.text.startswith(f"URL: {server.url('/c')}") and r.text.endswith("arrived")

    for i in range(7):
        server.routes[f"/loop{i}"] = redirect(f"/loop{i + 1}")
    server.routes["/loop7"] = lambda h: send(h, 200, b"too far", "text/plain")
    r = await fetch(svc, server.url("/loop0"), web)
    assert r.is_error and "too many redirects" in r.text
    assert len([p for p, _ in server.hits if p.startswith("/loop")]) == 6  # the first request + 5 redirects

    server.routes["/ftp"] = redirect("ftp://example.com/x")
    r = await fetch(svc, server.url("/ftp"), web)
    assert r.is_error and "only http and https" in r.text


# -- resolution: every address checked, connection pinned to a checked one -------------------------------------

@pytest.mark.slow
async def test_host_with_any_private_address_is_refused(svc, server):
    async def resolver(host, port):
        return {"mixed.test": ["127.0.0.1", "10.1.2.3"]}[host]

    web = WebConnector(policy=only_first_loopback, resolver=resolver)
    r = await fetch(svc, server.url("/", host="mixed.test"), web)
    assert r.is_error and "10.1.2.3" in r.text and "private" in r.text
    assert server.hits == []


@pytest.mark.slow
async def test_connection_goes_to_the_checked_address_with_the_original_host(svc, server):
    calls = []

    async def resolver(host, port):
        calls.append(host)
        return ["127.0.0.1"]

    server.routes["/hello"] = lambda h: send(h, 200, b"hi", "text/plain")
    web = WebConnector(policy=only_first_loopback, resolver=resolver)
    r = await fetch(svc, server.url("/hello", host="pinned.test"), web)
    assert not r.is_error, r.text
    assert calls == ["pinned.test"]  # resolved once; httpx never resolves the name again
    assert server.hits == [("/hello", f"pinned.test:{server.port}")]
    assert r.text.startswith(f"URL: http://pinned.test:{server.port}/hello")


async def test_unresolvable_host_is_an_error_result(svc):
    async def resolver(host, port):
        raise OSError("Name or service not known")

    r = await fetch(svc, "http://nowhere.invalid/", WebConnector(resolver=resolver))
    assert r.is_error and "cannot resolve" in r.text


@pytest.fixture
def tls_pair(tmp_path):
    """A certificate for the name pinned.test, and a client context that trusts only it."""
    x509 = pytest.importorskip("cryptography.x509")
    from datetime import datetime, timedelta

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pinned.test")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("pinned.test")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert_file, key_file)
    client_ctx = ssl.create_default_context(cafile=str(cert_file))
    return server_ctx, client_ctx


@pytest.mark.slow
async def test_https_to_pinned_address_verifies_the_original_name(svc, tls_pair):
    server_ctx, client_ctx = tls_pair
    s = Server(tls=server_ctx)
    try:
        s.routes["/secure"] = lambda h: send(h, 200, b"<title>TLS</title><p>over tls</p>", "text/html")

        async def resolver(host, port):
            return ["127.0.0.1"]

        web = WebConnector(policy=only_first_loopback, resolver=resolver, verify=client_ctx)
        r = await fetch(svc, s.url("/secure", scheme="https", host="pinned.test"), web)
        assert not r.is_error, r.text
        assert "Title: TLS" in r.text and r.text.endswith("over tls")
        # Another name on the same address: the certificate does not match it, so no page.
        r = await fetch(svc, s.url("/secure", scheme="https", host="other.test"), web)
        assert r.is_error and "over tls" not in r.text
    finally:
        s.close()


# -- limits -------------------------------------------------------------------------------------------------------

@pytest.mark.slow
async def test_size_limit_truncates(svc, server):
    server.routes["/big"] = lambda h: send(h, 200, b"x" * 5000, "text/plain")
    r = await fetch(svc, server.url("/big"), web__allow_private=True, web__max_bytes=1000)
    assert not r.is_error and "Truncated" in r.text
    assert r.text.split("\n\n", 1)[1] == "x" * 1000

    under = await fetch(svc, server.url("/big"), web__allow_private=True, web__max_bytes=5000)
    assert "Truncated" not in under.text


@pytest.mark.slow
async def test_size_limit_counts_decompressed_bytes(svc, server):
    bomb = gzip.compress(b"a" * 200_000)
    server.routes["/gz"] = lambda h: send(h, 200, bomb, "text/plain", {"Content-Encoding": "gzip"})
    r = await fetch(svc, server.url("/gz"), web__allow_private=True, web__max_bytes=1000)
    assert not r.is_error and "Truncated" in r.text and r.text.split("\n\n", 1)[1] == "a" * 1000


@pytest.mark.slow
async def test_time_limit_covers_the_whole_fetch(svc, server):
    sent_all = threading.Event()

    def trickle(h):
        # Each byte comes quickly, for ten minutes, so only a limit on the whole fetch (not per read) stops
        # it before the page is whole.
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.end_headers()
        try:
            for _ in range(12_000):
                h.wfile.write(b"x")
                h.wfile.flush()
                time.sleep(0.05)
            sent_all.set()
        except OSError:
            pass

    server.routes["/slow"] = trickle
    r = await fetch(svc, server.url("/slow"), web__allow_private=True, web__timeout_seconds=0.5)
    assert r.is_error and r.untrusted is True and "timed out after 0.5 s" in r.text
    assert not sent_all.is_set()  # ended while the page still came


# -- extraction ----------------------------------------------------------------------------------------------------

def test_html_to_text_edge_cases():
    assert html_to_text("") == (None, "")
    assert html_to_text("<p>unclosed <b>bold<script>x") == (None, "unclosed bold")
    assert html_to_text("<title>a\n b</title><p>c<br>d</p><svg/>e") == ("a b", "c\nd\ne")
    assert html_to_text("<template><p>hidden</p></template><p>&lt;shown&gt; &#x41;</p>") == (None, "<shown> A")
