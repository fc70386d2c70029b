"""The gateway's MCP handlers (spec §8.6): ``tools/list|call``, ``resources/list|read`` and ``prompts/list|get``,
each a door to the service, shared by every session of ``/mcp``.

- A call tells its client the wait for the person and the server's own progress, as one increasing count
  (:class:`Told`), when the request asked for progress.
- A call whose client went away (:class:`~palui.gateway.transport.Body`) stops waiting for the person: the
  approval runs nothing by itself.
- A server's question during a call goes to the client itself only when the client is ``--context trusted`` and
  declared elicitation (:meth:`Calls.may_ask`), and never one asking for a secret: the service decides which; this
  module only sends it (:meth:`Calls.ask`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from palui.errors import NotFound, PaluiError, UsageError
from palui.gateway.tools import as_call_result, as_mcp_tool, with_hidden_listed
from palui.gateway.transport import body_of

if TYPE_CHECKING:
    from palui.service.api import Service
    from palui.service.gateway import ClientAsk

Context = Any  # the SDK's ServerRequestContext[Any, Any]


class Told:
    """Progress notifications for one request, strictly increasing as MCP requires: the wait for the person
    counts first; the server's own progress, when it starts again from below, is counted on from there."""

    def __init__(self, ctx: Context, token: str | int) -> None:
        self._ctx = ctx
        self._token = token
        self._last = 0.0
        self._base: float | None = None

    async def __call__(self, done: float, total: float | None, message: str | None) -> None:
        if self._base is None and self._last > 0 and done <= self._last:
            self._base = self._last  # the server's count after Palui's wait
        value = done + (self._base or 0.0)
        if value <= self._last:
            return
        self._last = value
        with contextlib.suppress(Exception):  # a client gone mid-wait must not break the call
            await self._ctx.session.send_progress_notification(
                self._token, value, None if total is None else total + (self._base or 0.0), message,
                related_request_id=str(self._ctx.request_id))


class Calls:
    """The handlers.

    Args:
        svc: the service, through its door.
        session: the service's gateway session of a request (opened on first use; raises MCPError when the brake
            pauses the gateway) and whether its client may be asked a server's questions (:meth:`may_ask`).
    """

    def __init__(self, svc: Service, session: Callable[[Context], tuple[str, bool]]) -> None:
        self.svc = svc
        self._session = session

    def may_ask(self, client: str, declared: bool) -> bool:
        """Whether a server's questions may go to this client: ``--context trusted`` and it ``declared`` form
        elicitation at ``initialize`` (spec §8.6)."""
        try:
            return declared and self.svc.gateway.client(client)["context"] == "trusted"
        except NotFound:
            return False

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[as_mcp_tool(t) for t in self.svc.gateway.tools(self._session(ctx)[0])])

    async def call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            session, may_ask = self._session(ctx)
        except MCPError as e:  # no session opens (the brake): the call's answer says why, as a refused call's does
            return as_call_result({"text": f"Error: {e.error.message}", "is_error": True, "result": None})
        meta: Any = ctx.meta or {}
        token = meta.get("progressToken", meta.get("progress_token")) if isinstance(meta, dict) else None
        body = body_of(ctx.request.scope if ctx.request is not None else None)
        # the arguments as the client sent them: the governed call checks them (spec §3.3), not this front end
        args: Any = params.arguments if params.arguments is not None else {}
        result = await self.svc.gateway.call(session, params.name, args, Told(ctx, token) if token is not None
                                             else None, (lambda: body.gone) if body is not None else None,
                                             self._asker(ctx) if may_ask else None)
        return as_call_result(result)

    def _asker(self, ctx: Context) -> ClientAsk:
        """Sends a server's question (its message and requested schema) to this request's client, and returns the
        client's ``(action, content)`` (given only for a client that may be asked; the service never gives it a
        question with a secret field)."""

        async def ask(message: str, schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
            got = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
            return got.action, dict(got.content) if got.content is not None else None

        return ask

    async def list_resources(self, ctx: Context, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        listed = await self._door(self.svc.gateway_content.resources(self._session(ctx)[0]))
        return types.ListResourcesResult.model_validate({"resources": listed}, by_name=False)

    async def read_resource(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        got = await self._door(self.svc.gateway_content.read_resource(self._session(ctx)[0], str(params.uri)))
        return types.ReadResourceResult.model_validate(with_hidden_listed(got, ("contents",)), by_name=False)

    async def list_prompts(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        listed = await self._door(self.svc.gateway_content.prompts(self._session(ctx)[0]))
        return types.ListPromptsResult.model_validate({"prompts": listed}, by_name=False)

    async def get_prompt(self, ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        got = await self._door(self.svc.gateway_content.get_prompt(self._session(ctx)[0], params.name,
                                                           dict(params.arguments or {})))
        return types.GetPromptResult.model_validate(got, by_name=False)

    @staticmethod
    async def _door(answer: Awaitable[Any]) -> Any:
        """The service's answer; a refusal is the request's error, in the service's words."""
        try:
            return await answer
        except (UsageError, NotFound) as e:
            raise MCPError(types.INVALID_PARAMS, str(e)) from None
        except PaluiError as e:
            raise MCPError(types.INTERNAL_ERROR, str(e)) from None

