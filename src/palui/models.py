"""Model strings → the model library (pydantic-ai), and the ``script:`` replay model (spec §9).

Accepted model strings:

- ``openai:MODEL`` — OpenAI (``OPENAI_API_KEY``, sent only to ``https://api.openai.com/v1``).
- ``anthropic:MODEL`` — Anthropic (``ANTHROPIC_API_KEY``, sent only to ``https://api.anthropic.com``).
- ``ollama:MODEL`` — an Ollama server (``OLLAMA_BASE_URL``, default
  ``http://127.0.0.1:11434/v1``); no key.
- ``openai:MODEL@BASE_URL`` — any OpenAI-compatible server at BASE_URL, e.g.
  ``http://127.0.0.1:8000/v1``; no key. ``anthropic:MODEL@BASE_URL`` likewise for the
  Anthropic Messages API (BASE_URL with or without a trailing ``/v1``).
- ``@NAME`` — the ``[models.NAME]`` table of the configuration (``model``, ``base_url``,
  ``api_key_env``): the only way to send a key to a base URL (spec §9.1).
- ``script:PATH`` — the replay model: a JSON script (see :class:`Script`).

Which key goes where is decided in :mod:`palui.providers` (its table); this module is the
import point. Provider failures: 408/409/429/5xx/529 and failed connections are retried
inside the turn's time budget (:func:`request`); other errors end the turn with the
provider's own message, the key redacted and the model named as written.

Only :func:`resolve_model` and :func:`request` are used by the turn runner, so the
model library stays behind this module. :func:`request` streams (the model library's streaming
request, ``pydantic_ai.direct.model_request_stream``) and hands each piece of text to the caller
as it arrives when a front end shows it (spec §9.3), and sends the plain request otherwise; the
``script:`` model streams its text word by word.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palui import providers
from palui.errors import NO_MODEL_HELP, ModelConfigError
from palui.providers import ANTHROPIC_MAX_TOKENS

if TYPE_CHECKING:  # the model library takes ~1.7 s to import: modules import it when a model is used
    from pydantic_ai.exceptions import ModelAPIError
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.usage import RequestUsage

    from palui.config import ModelEntry

__all__ = ["ANTHROPIC_MAX_TOKENS", "ModelHandle", "Script", "request", "resolve_model", "responses_in_current_turn"]

#: Receives what a request reports while it runs: ``{"type": "text_delta", "text": str}`` per piece of
#: text; ``{"type": "text_discarded", "reason": "retrying"}`` when the text streamed so far belongs to
#: an attempt that failed and is retried; ``{"type": "retry", "attempt": n, "in_seconds": s,
#: "reason": str}`` before each retry's wait.
StreamSink = Callable[[dict[str, Any]], None]


@dataclass
class ModelHandle:
    """A resolved model: the library's model object, its settings, the string it came from, and
    the secret values (the key sent, a password in the base URL) to redact from messages (spec §10)."""

    spec: str
    model: Model
    settings: ModelSettings | None = None
    secrets: tuple[str, ...] = ()
    #: The replay model's own token counts (a streamed response only has the library's estimate).
    usage_for: Callable[[list[ModelMessage]], RequestUsage] | None = None
    #: Whose bill its tokens are on: ``openai``, ``anthropic``, ``ollama`` or ``script`` (the caps' weight of
    #: cached input, spec §6.4).
    provider: str = "script"


def resolve_model(spec: str | None, env: Mapping[str, str] | None = None,
                  models: Mapping[str, ModelEntry] | None = None) -> ModelHandle:
    """Turn a model string into a :class:`ModelHandle`.

    ``env`` is the environment the keys come from (default ``os.environ``); ``models`` the
    configuration's ``[models.NAME]`` tables (``Settings.models``) that ``@NAME`` names.

    Resolved once per process: a ``script:`` file is read again only when its mtime, size or inode
    changed; a provider's handle is kept per running event loop (its SDK client belongs to one) for the
    same string, route and environment.

    Raises:
        ModelConfigError: no model, an unknown provider or ``@NAME``, a bad base URL, a
            missing key, or a bad script.
    """
    env = dict(os.environ if env is None else env)
    if not spec:
        raise ModelConfigError(NO_MODEL_HELP)
    provider, _, rest = spec.partition(":")
    if not spec.startswith("@") and not rest:
        from palui.text.display import named

        raise ModelConfigError(f"model {named(providers.public_spec(spec))}: expected PROVIDER:MODEL "
                               "(openai:, anthropic:, ollama:, script:) or @NAME")
    if provider == "script":
        return _script_handle(spec, Path(rest).expanduser())
    r = providers.route(spec, env, models or {})  # checked before the (slow) SDK imports: a refusal comes at once
    # A provider's model holds an SDK client bound to the event loop it first runs in: kept per running loop.
    key = (spec, r, tuple(sorted(env.items())))
    kept = _per_loop().get(key)
    if kept is not None:
        return kept
    model, settings = providers.build(r, env)
    handle = ModelHandle(spec, model, settings, secrets=providers.secrets(r), provider=r.provider)
    _per_loop()[key] = handle
    return handle


#: Script handles by path: (the file's mtime, size and inode when read, the handle), so a script is read and
#: checked once per process and again only when its file changes (a test or a person editing it).
_SCRIPTS: dict[str, tuple[tuple[int, int, int], ModelHandle]] = {}
_LOOPS: Any = None  # weakref.WeakKeyDictionary: running loop → {key: ModelHandle}


def _script_handle(spec: str, path: Path) -> ModelHandle:
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        stamp = None
    kept = _SCRIPTS.get(str(path))
    if kept is not None and stamp is not None and kept[0] == stamp and kept[1].spec == spec:
        return kept[1]
    script = Script.load(path)  # raises for a missing or bad file
    handle = ModelHandle(spec, script.model(), usage_for=script.usage)
    if stamp is not None:
        if len(_SCRIPTS) >= 256:
            _SCRIPTS.clear()
        _SCRIPTS[str(path)] = (stamp, handle)
    return handle


def _per_loop() -> dict[Any, ModelHandle]:
    """The provider handles kept for the running event loop (a fresh dict, kept nowhere, without one)."""
    global _LOOPS
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return {}
    if _LOOPS is None:
        import weakref

        _LOOPS = weakref.WeakKeyDictionary()
    kept: dict[Any, ModelHandle] = _LOOPS.setdefault(loop, {})
    if len(kept) > 64:
        kept.clear()
    return kept


RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
CONNECT_RETRIES = 2
MAX_RETRIES = 6


async def request(handle: ModelHandle, messages: list[ModelMessage], tools: list[ToolDefinition],
                  deadline_seconds: float, on_event: StreamSink | None = None, stream: bool = True, *,
                  tools_usable: bool = True) -> ModelResponse:
    """One model request, retrying transient provider failures within ``deadline_seconds`` (spec §9).

    ``stream``: the streaming request, each piece of text to ``on_event`` as it arrives (:data:`StreamSink`),
    for a front end that shows it; otherwise the plain request (the streamed one costs several times as
    much for the same answer). ``tools_usable`` False (a turn's last step, spec §6.3) sends ``tools`` with
    ``tool_choice`` ``none``: the model may not call them, and the definitions still go along because a
    provider may refuse a history of tool calls without them. Retried with
    exponential backoff and jitter (0.5 s doubling, at most 8 s, or the provider's ``Retry-After``
    when it sent one): HTTP 408/409/429/5xx/529 up to ``MAX_RETRIES`` times, and a failed
    connection or a dropped stream ``CONNECT_RETRIES`` times (few, so a wrong base URL fails
    fast). A retry whose wait would reach the deadline is not made. Text streamed by an attempt
    that is retried is reported discarded; only the final response's text is returned.

    Raises:
        asyncio.TimeoutError: the time budget ran out during a request.
        ModelAPIError: the provider refused (other 4xx), kept failing (also when the next
            retry would pass the deadline), or could not be reached; the message says
            which, with the provider's own words.
    """
    from pydantic_ai.exceptions import ModelConnectionError, ModelHTTPError
    from pydantic_ai.models import ModelRequestParameters

    emit = on_event or (lambda _e: None)
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_seconds
    attempt = 0
    params = ModelRequestParameters(function_tools=tools, allow_text_output=True)
    settings = handle.settings
    if tools and not tools_usable:
        settings = {**(handle.settings or {}), "tool_choice": "none"}
    last: ModelAPIError | None = None
    while True:
        left = end - loop.time()
        if left <= 0:
            raise TimeoutError()
        streamed = [False]
        try:
            async with asyncio.timeout(left):
                if stream:
                    response = await _streamed(handle, messages, params, settings, emit, streamed)
                else:
                    response = await _plain(handle, messages, params, settings)
            if handle.usage_for is not None:
                response.usage = handle.usage_for(messages)
            return response
        except ModelHTTPError as e:
            attempt += 1
            if e.status_code not in RETRY_STATUS or attempt > MAX_RETRIES:
                raise _clear(handle, e, attempt) from e
            delay, last, why = _backoff(attempt, e.retry_after), e, f"HTTP {e.status_code}"
        except ModelConnectionError as e:
            attempt += 1
            if attempt > CONNECT_RETRIES:
                raise _clear(handle, e, attempt) from e
            delay, last, why = _backoff(attempt, None), e, "the connection failed"
        if streamed[0]:
            emit({"type": "text_discarded", "reason": "retrying"})
        if loop.time() + delay >= end and last is not None:
            # Say what kept failing rather than only that time ran out.
            raise _clear(handle, last, attempt, "; no time left in the turn's budget to retry") from last
        emit({"type": "retry", "attempt": attempt, "in_seconds": round(delay, 1), "reason": why})
        await asyncio.sleep(delay)


async def _streamed(handle: ModelHandle, messages: list[ModelMessage], params: Any, settings: ModelSettings | None,
                    emit: StreamSink, streamed: list[bool]) -> ModelResponse:
    """One attempt: the streaming request, each text piece to ``emit``; ``streamed[0]`` set once one went."""
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

    async with model_request_stream(handle.model, messages, model_settings=settings,
                                    model_request_parameters=params) as stream:
        async for event in stream:
            piece = ""
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                piece = event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                piece = event.delta.content_delta
            if piece:
                streamed[0] = True
                emit({"type": "text_delta", "text": piece})
        return stream.get()


async def _plain(handle: ModelHandle, messages: list[ModelMessage], params: Any,
                 settings: ModelSettings | None) -> ModelResponse:
    """One attempt, not streamed: the whole response at once."""
    from pydantic_ai.direct import model_request

    return await model_request(handle.model, messages, model_settings=settings,
                               model_request_parameters=params)


def _backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based)."""
    if retry_after is not None and retry_after >= 0:
        return min(float(retry_after), 60.0)
    return min(8.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)


def _clear(handle: ModelHandle, e: ModelAPIError, attempts: int, note: str = "") -> ModelAPIError:
    """The same failure with a message for the person: what happened and the provider's own words."""
    from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError

    body: dict[str, Any] = e.body if isinstance(e.body, dict) else {}
    error = body.get("error")
    inner: dict[str, Any] = error if isinstance(error, dict) else body
    said = inner.get("message") if isinstance(inner.get("message"), str) else (str(e.body)[:500] if e.body else "")
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if isinstance(e, ModelHTTPError):
        kind = "kept failing" if e.status_code in RETRY_STATUS else "refused the request"
        msg = f"the provider {kind} (HTTP {e.status_code}){tries}"
    else:
        msg = f"cannot reach the provider{tries}: {e.message}"
    text = (f"{msg}: {said}" if said else msg) + note
    for secret in handle.secrets:
        text = text.replace(secret, "[redacted]")
    # The model is named as written (a URL's password masked), outside the redaction: a short
    # key that is also a word of the model string cannot turn it into "[redacted]:llama3".
    return ModelAPIError(e.model_name, f"{providers.public_spec(handle.spec)}: {text}")


# -- the script: replay model ---------------------------------------------------------------


@dataclass
class Script:
    """A replay script (spec §9)::

        {"steps": [
            {"tool_calls": [{"tool": "recall__add_memory", "args": {"text": "buy milk"}}]},
            {"text": "Saved.", "usage": {"input_tokens": 120, "output_tokens": 8}}
        ]}

    Each model request takes the step whose index is the number of model responses
    already in the current turn (so a turn resumed after an approval, even in another
    process, continues where it paused). A step has ``text``, ``tool_calls`` or both;
    A call's ``args`` is an object, or a string: the raw JSON text of the arguments, as a provider sends them
    (``"[1, 2]"``, ``"{\"id\": NaN}"``: what a model may send, which the governed call refuses, spec §3.3).
    ``usage`` is optional (default: an estimate of about 4 characters per token);
    ``delay_seconds`` (0-600, optional) makes the step answer that much later, as a slow
    provider would (benchmarks and tests of a running turn; ``/stop`` cancels the wait).
    The text streams word by word; ``stream_delay_seconds`` (0-10, optional) waits that long
    before each word after the first, so a front end shows it arriving in pieces.
    Running out of steps ends the turn with a message saying so. The file must be a regular file of
    at most 1 MB (:data:`palui.files.MAX_BYTES`): a device or a huge file is refused before it is read.
    """

    path: Path
    steps: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Script:
        """Read and check a script. Raises ModelConfigError naming the file and the problem."""
        from palui.files import Unreadable, read_text

        file = str(path) if len(str(path)) <= 200 else f"{str(path)[:200]}… ({len(str(path)):,} characters)"
        try:  # script:/dev/zero once grew to 12 GB
            data = json.loads(read_text(path))
        except Unreadable as e:
            raise ModelConfigError(f"script {file}: {e}") from None
        except (ValueError, RecursionError) as e:  # also arrays nested past the recursion limit
            raise ModelConfigError(f"script {file}: not valid JSON: {str(e)[:200]}") from None
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise ModelConfigError(f"script {file}: expected an object with a \"steps\" list")
        for i, step in enumerate(data["steps"]):
            where = f"script {file}: step {i + 1}"
            if not isinstance(step, dict) or not ("text" in step or "tool_calls" in step):
                raise ModelConfigError(f"{where}: expected an object with \"text\" and/or \"tool_calls\"")
            if "text" in step and not isinstance(step["text"], str):
                raise ModelConfigError(f"{where}: \"text\" must be a string")
            calls = step.get("tool_calls", [])
            if not isinstance(calls, list) or not all(
                isinstance(c, dict) and isinstance(c.get("tool"), str) and isinstance(c.get("args", {}), (dict, str))
                for c in calls
            ):
                raise ModelConfigError(f"{where}: \"tool_calls\" must be a list of {{\"tool\": NAME, \"args\": {{…}}}}")
            usage = step.get("usage")
            if usage is not None and not (
                isinstance(usage, dict)
                and all(isinstance(usage.get(k, 0), int) and usage.get(k, 0) >= 0
                        for k in ("input_tokens", "output_tokens"))
            ):
                raise ModelConfigError(f"{where}: \"usage\" must be {{\"input_tokens\": N, \"output_tokens\": M}}")
            delay = step.get("delay_seconds", 0)
            if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay <= 600:
                raise ModelConfigError(f"{where}: \"delay_seconds\" must be a number of seconds from 0 to 600")
            pace = step.get("stream_delay_seconds", 0)
            if isinstance(pace, bool) or not isinstance(pace, (int, float)) or not 0 <= pace <= 10:
                raise ModelConfigError(f"{where}: \"stream_delay_seconds\" must be a number of seconds from 0 to 10")
        return cls(path=path, steps=data["steps"])

    def model(self) -> Model:
        from pydantic_ai.models.function import FunctionModel

        return FunctionModel(self._respond, stream_function=self._stream, model_name=f"script:{self.path.name}")

    def _step(self, messages: list[ModelMessage]) -> tuple[int, dict[str, Any]]:
        """(index, step) for this request; past the end, a text step saying the script ran out."""
        index = responses_in_current_turn(messages)
        if index >= len(self.steps):
            text = (f"[script {self.path.name}] out of steps: the script has {len(self.steps)} step(s) and this "
                    f"turn asked for step {index + 1}. The turn ends here.")
            return index, {"text": text, "usage": {"input_tokens": 0, "output_tokens": 0}}
        return index, self.steps[index]

    def usage(self, messages: list[ModelMessage]) -> RequestUsage:
        """The step's ``usage``, or the estimate (about 4 characters per token)."""
        from pydantic_ai.usage import RequestUsage

        _index, step = self._step(messages)
        usage = step.get("usage")
        if usage is None:
            prompt_chars = sum(len(str(p)) for m in messages for p in getattr(m, "parts", []))
            usage = {"input_tokens": max(1, prompt_chars // 4),
                     "output_tokens": max(1, len(json.dumps(step, allow_nan=True)) // 4)}  # a length, not stored
        return RequestUsage(input_tokens=usage.get("input_tokens", 0), output_tokens=usage.get("output_tokens", 0))

    async def _respond(self, messages: list[ModelMessage], info: Any) -> ModelResponse:
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

        index, step = self._step(messages)
        if step.get("delay_seconds"):
            await asyncio.sleep(float(step["delay_seconds"]))
        parts: list[Any] = []
        if step.get("text"):
            parts.append(TextPart(step["text"]))
        for j, call in enumerate(step.get("tool_calls", [])):
            parts.append(ToolCallPart(tool_name=call["tool"], args=call.get("args", {}),
                                      tool_call_id=f"s{index + 1}c{j + 1}"))
        return ModelResponse(parts=parts, usage=self.usage(messages))

    async def _stream(self, messages: list[ModelMessage], info: Any) -> AsyncIterator[Any]:
        """The step streamed: its text word by word (``stream_delay_seconds`` apart), then its calls."""
        from pydantic_ai.models.function import DeltaToolCall

        index, step = self._step(messages)
        if step.get("delay_seconds"):
            await asyncio.sleep(float(step["delay_seconds"]))
        pace = float(step.get("stream_delay_seconds", 0))
        for i, piece in enumerate(_WORDS.findall(step.get("text") or "")):
            if i and pace:
                await asyncio.sleep(pace)
            yield piece
        calls = step.get("tool_calls", [])
        if calls:
            # the arguments as a provider streams them: JSON text, NaN included when the script holds one
            yield {j: DeltaToolCall(name=call["tool"], json_args=_raw_args(call.get("args", {})),
                                    tool_call_id=f"s{index + 1}c{j + 1}") for j, call in enumerate(calls)}
        elif not step.get("text"):
            yield ""  # a step with neither (never valid in a file, but the library needs one item)


_WORDS = re.compile(r"\s*\S+\s*|\s+")


def _raw_args(args: dict[str, Any] | str) -> str:
    """A script call's arguments as the JSON text a provider sends. Not stored JSON: a script replays what a model
    may send, ``NaN`` included (the governed call refuses it, spec §3.3)."""
    return args if isinstance(args, str) else json.dumps(args, allow_nan=True)


def responses_in_current_turn(messages: list[ModelMessage]) -> int:
    """How many model responses follow the last request that carries the person's (or trigger's) prompt."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, UserPromptPart

    start = 0
    for i, m in enumerate(messages):
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts):
            start = i
    return sum(1 for m in messages[start:] if isinstance(m, ModelResponse))
