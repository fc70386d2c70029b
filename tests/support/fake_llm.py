"""A fake model provider on 127.0.0.1: the OpenAI chat-completions and Anthropic Messages wire APIs.

Non-streaming only. Serves ``POST /v1/chat/completions`` (OpenAI) and ``POST /v1/messages``
(Anthropic) from a thread, answering from a queue of scripted replies; the same reply is
rendered in whichever wire format the request came in. Every request body is recorded so
tests can assert what the model was offered (``tools``) and which tool results came back.

    with FakeLLM() as fake:
        fake.tool_call("recall__add_memory", {"text": "buy milk"}, input_tokens=30, output_tokens=7)
        fake.text("Saved.", input_tokens=50, output_tokens=3)
        model = f"openai:gpt-test@{fake.openai_url}"      # or f"anthropic:claude-test@{fake.anthropic_url}"

``fake.error(429, times=2)`` answers the next two requests with 429 (``retry_after="0"`` adds that
header); ``delay=`` on any reply
makes it slow (the handler waits, and is released early by ``close()``). With the queue empty
the fake answers 418, which is not retried, so a test that under-scripts fails loudly.
"""

from __future__ import annotations

import json
import threading
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
    input_tokens: int = 10
    output_tokens: int = 5
    status: int = 200
    message: str = ""
    delay: float = 0.0
    retry_after: str | None = None


@dataclass
class Received:
    """A request the fake received: its path (which wire), headers (lower-case keys), JSON body and the JSON it answered."""

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
        """Tool results sent back: ``{"id", "content"}`` from OpenAI ``tool`` messages or Anthropic ``tool_result`` blocks."""
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
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with fake._lock:
                    fake.requests.append(got := Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    reply = fake.replies.pop(0) if fake.replies else Reply(status=418, message="fake_llm: no scripted reply left")
                if reply.delay:
                    fake._closing.wait(reply.delay)
                if self.path == OPENAI_PATH:
                    payload = _openai(reply, body) if reply.status == 200 else {
                        "error": {"message": reply.message or f"fake error {reply.status}", "type": "fake", "code": None}}
                elif self.path == ANTHROPIC_PATH:
                    payload = _anthropic(reply, body) if reply.status == 200 else {
                        "type": "error", "error": {"type": "fake_error", "message": reply.message or f"fake error {reply.status}"}}
                else:
                    reply, payload = Reply(status=404), {"error": {"message": f"fake_llm: no route {self.path}"}}
                got.response = payload
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

    def text(self, text: str, **kw: Any) -> "FakeLLM":
        self.replies.append(Reply(text=text, **kw))
        return self

    def tool_call(self, name: str, args: dict[str, Any], **kw: Any) -> "FakeLLM":
        self.replies.append(Reply(tool_calls=[(name, args)], **kw))
        return self

    def error(self, status: int, times: int = 1, message: str = "", retry_after: str | None = None) -> "FakeLLM":
        self.replies.extend(Reply(status=status, message=message, retry_after=retry_after) for _ in range(times))
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeLLM":
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
                      "total_tokens": r.input_tokens + r.output_tokens}}


def _anthropic(r: Reply, req: dict[str, Any]) -> dict[str, Any]:
    n = len(req.get("messages", []))
    content: list[dict[str, Any]] = [{"type": "text", "text": r.text}] if r.text else []
    content += [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(r.tool_calls)]
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": req.get("model", "fake"),
            "content": content, "stop_reason": "tool_use" if r.tool_calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens}}
