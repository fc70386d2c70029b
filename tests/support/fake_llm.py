"""A fake model provider on 127.0.0.1: the OpenAI chat-completions and Anthropic Messages wire APIs.

Serves ``POST /v1/chat/completions`` (OpenAI) and ``POST /v1/messages`` (Anthropic) from a
thread, answering from a queue of scripted replies; the same reply is rendered in whichever
wire format the request came in, as one JSON body or, when the request says ``"stream": true``,
as server-sent events (the text in ``chunks`` pieces, ``chunk_delay`` seconds apart;
``cut_after=N`` drops the connection after N text pieces, as a provider whose stream breaks). Every request
body is recorded so tests can assert what the model was offered (``tools``) and which tool results came back.

    with FakeLLM() as fake:
        fake.tool_call("recall__add_memory", {"text": "buy milk"}, input_tokens=30, output_tokens=7)
        fake.text("Saved.", input_tokens=50, output_tokens=3)
        model = f"openai:gpt-test@{fake.openai_url}"      # or f"anthropic:claude-test@{fake.anthropic_url}"

``fake.respond = f`` answers each request with ``f(body)`` (a :class:`Reply`) instead of the queue, for a
model that reacts to what it is sent.

``cached_input_tokens=N`` on a reply reports N of its ``input_tokens`` as read from the provider's prompt cache,
the way each wire says it: OpenAI counts them inside ``prompt_tokens`` and names them in
``prompt_tokens_details.cached_tokens``; Anthropic leaves them out of ``input_tokens`` and reports them as
``cache_read_input_tokens``.

``fake.error(429, times=2)`` answers the next two requests with 429 (``retry_after="0"`` adds that
header); ``delay=`` on any reply
makes it slow (the handler waits, and is released early by ``close()``). With the queue empty
the fake answers 418, which is not retried, so a test that under-scripts fails loudly.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass
class Reply:
    """One scripted answer. ``status`` other than 200 sends an error body in the wire's format."""

    text: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    input_tokens: int = 10  # every input token, the cached ones included
    output_tokens: int = 5
    cached_input_tokens: int = 0  # of input_tokens, read from the prompt cache
    status: int = 200
    message: str = ""
    delay: float = 0.0
    retry_after: str | None = None
    chunks: list[str] | None = None  # how a streamed reply splits its text (default: word by word)
    chunk_delay: float = 0.0
    cut_after: int | None = None


@dataclass
class Received:
    """A request the fake received: its path (which wire), headers (lower-case keys), JSON body and the JSON it
    answered."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    response: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_names(self) -> list[str]:
        """Names in the offered ``tools`` array (either wire)."""
        return [t["function"]["name"] if "function" in t else t["name"] for t in self.body.get("tools", [])]

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """Tool results sent back: ``{"id", "content"}`` from OpenAI ``tool`` messages or Anthropic ``tool_result``
        blocks."""
        out = []
        for m in self.body.get("messages", []):
            if m.get("role") == "tool":
                out.append({"id": m["tool_call_id"], "content": m["content"]})
            elif m.get("role") == "user" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if b.get("type") == "tool_result":
                        content = b.get("content")
                        if isinstance(content, list):
                            content = "".join(x.get("text", "") for x in content)
                        out.append({"id": b["tool_use_id"], "content": content, "is_error": b.get("is_error")})
        return out


class FakeLLM:
    """The fake provider. Use as a context manager; ``openai_url`` / ``anthropic_url`` are the base URLs."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.respond: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # chunked streams; every JSON reply has a Content-Length

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with fake._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    fake.requests.append(got := Received(self.path, headers, body))
                    reply = (fake.respond(body) if fake.respond else fake.replies.pop(0) if fake.replies
                             else Reply(status=418, message="fake_llm: no scripted reply left"))
                if reply.delay:
                    fake._closing.wait(reply.delay)
                if self.path == OPENAI_PATH:
                    payload = _openai(reply, body) if reply.status == 200 else {
                        "error": {"message": reply.message or f"fake error {reply.status}", "type": "fake",
                                  "code": None}}
                elif self.path == ANTHROPIC_PATH:
                    payload = _anthropic(reply, body) if reply.status == 200 else {
                        "type": "error",
                        "error": {"type": "fake_error", "message": reply.message or f"fake error {reply.status}"}}
                else:
                    reply, payload = Reply(status=404), {"error": {"message": f"fake_llm: no route {self.path}"}}
                got.response = payload
                if reply.status == 200 and body.get("stream"):
                    self._stream(reply, payload)
                    return
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    if reply.retry_after is not None:
                        self.send_header("Retry-After", reply.retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its time budget ran out): expected for slow replies

            def _stream(self, reply: Reply, payload: dict[str, Any]) -> None:
                events = _openai_sse(reply, payload) if self.path == OPENAI_PATH else _anthropic_sse(reply, payload)
                # Chunked transfer encoding, so a connection dropped mid-stream is an error for the client
                # (without it, the end of the connection would just end the body).
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    pieces = 0
                    for kind, data in events:
                        if kind == "text":
                            if reply.cut_after is not None and pieces >= reply.cut_after:
                                self.wfile.flush()
                                self.connection.shutdown(2)  # a dropped stream, mid-answer
                                return
                            if pieces and reply.chunk_delay:
                                fake._closing.wait(reply.chunk_delay)
                            pieces += 1
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        # The Anthropic SDK appends /v1/messages itself.
        return f"http://127.0.0.1:{self.port}"

    # -- scripting -------------------------------------------------------------------------------

    def text(self, text: str, **kw: Any) -> FakeLLM:
        self.replies.append(Reply(text=text, **kw))
        return self

    def tool_call(self, name: str, args: dict[str, Any], **kw: Any) -> FakeLLM:
        self.replies.append(Reply(tool_calls=[(name, args)], **kw))
        return self

    def error(self, status: int, times: int = 1, message: str = "", retry_after: str | None = None) -> FakeLLM:
        self.replies.extend(Reply(status=status, message=message, retry_after=retry_after) for _ in range(times))
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeLLM:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _openai(r: Reply, req: dict[str, Any]) -> dict[str, Any]:
    n = len(req.get("messages", []))
    calls = [{"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
             for i, (name, args) in enumerate(r.tool_calls)]
    message: dict[str, Any] = {"role": "assistant", "content": r.text}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": req.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": r.input_tokens, "completion_tokens": r.output_tokens,
                      "total_tokens": r.input_tokens + r.output_tokens,
                      **({"prompt_tokens_details": {"cached_tokens": r.cached_input_tokens}}
                         if r.cached_input_tokens else {})}}


def _anthropic(r: Reply, req: dict[str, Any]) -> dict[str, Any]:
    n = len(req.get("messages", []))
    content: list[dict[str, Any]] = [{"type": "text", "text": r.text}] if r.text else []
    content += [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(r.tool_calls)]
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": req.get("model", "fake"),
            "content": content, "stop_reason": "tool_use" if r.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": r.input_tokens - r.cached_input_tokens, "output_tokens": r.output_tokens,
                      **({"cache_read_input_tokens": r.cached_input_tokens, "cache_creation_input_tokens": 0}
                         if r.cached_input_tokens else {})}}


def _pieces(r: Reply) -> list[str]:
    if r.chunks is not None:
        return list(r.chunks)
    return re.findall(r"\s*\S+\s*|\s+", r.text or "")


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data) + "\n\n").encode()


def _openai_sse(r: Reply, payload: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The chat-completions stream of ``payload``: ("text" | "meta", SSE bytes) items."""
    base = {"id": payload["id"], "object": "chat.completion.chunk", "created": 0, "model": payload["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out: list[tuple[str, bytes]] = [("meta", chunk({"role": "assistant", "content": ""}))]
    out += [("text", chunk({"content": p})) for p in _pieces(r)]
    message = payload["choices"][0]["message"]
    for i, c in enumerate(message.get("tool_calls") or []):
        out.append(("meta", chunk({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                                   "function": {"name": c["function"]["name"], "arguments": ""}}]})))
        arguments = c["function"]["arguments"]
        out.append(("meta", chunk({"tool_calls": [{"index": i, "function": {"arguments": arguments}}]})))
    out.append(("meta", chunk({}, payload["choices"][0]["finish_reason"])))
    out.append(("meta", _sse({**base, "choices": [], "usage": payload["usage"]})))
    out.append(("meta", b"data: [DONE]\n\n"))
    return out


def _anthropic_sse(r: Reply, payload: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The Messages stream of ``payload``: ("text" | "meta", SSE bytes) items."""
    start = {**payload, "content": [], "stop_reason": None, "usage": {**payload["usage"], "output_tokens": 1}}
    out: list[tuple[str, bytes]] = [("meta", _sse({"type": "message_start", "message": start}, "message_start"))]
    index = 0
    if r.text:
        out.append(("meta", _sse({"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}, "content_block_start")))
        out += [("text", _sse({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": p}}, "content_block_delta")) for p in _pieces(r)]
        out.append(("meta", _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")))
        index = 1
    for block in payload["content"]:
        if block["type"] != "tool_use":
            continue
        out.append(("meta", _sse({"type": "content_block_start", "index": index,
                                  "content_block": {**block, "input": {}}}, "content_block_start")))
        out.append(("meta", _sse({"type": "content_block_delta", "index": index,
                                  "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
                                 "content_block_delta")))
        out.append(("meta", _sse({"type": "content_block_stop", "index": index}, "content_block_stop")))
        index += 1
    out.append(("meta", _sse({"type": "message_delta", "delta": {"stop_reason": payload["stop_reason"],
                                                                  "stop_sequence": None},
                              "usage": {"output_tokens": payload["usage"]["output_tokens"]}}, "message_delta")))
    out.append(("meta", _sse({"type": "message_stop"}, "message_stop")))
    return out
