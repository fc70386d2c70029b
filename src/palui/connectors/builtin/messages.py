"""The ``messages`` connector: ``send_message`` to the person's channel or a contact (spec §7).

Without ``to`` the text goes to the person's channel: the inbox (kind ``message``), then the
``notify.apprise`` targets and the paired chat channels, through the notifier the turn passes
in its :class:`~palui.connectors.base.CallContext`. With ``to`` it goes to the contact of that
name in ``messages.contacts`` (an apprise URL). Results never show a URL (they hold
secrets) and are trusted: they only say where the text went.
"""

from __future__ import annotations

from typing import Any

from palui.connectors.base import CallContext, ToolResult, ToolSpec
from palui.connectors.builtin.common import BuiltinConnector
from palui.types import ToolClass

TOOLS = [
    ToolSpec(
        name="send_message",
        description=(
            "Send a message to the person's channel (default) or to a configured contact target by name."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The message text."},
                "to": {"type": "string", "description": "A contact target name; omit for the person's inbox."},
            },
            "required": ["text"],
        },
        declared_class=ToolClass.WRITE,
        untrusted_output=False,
    ),
]


class MessagesConnector(BuiltinConnector):
    """``send_message`` [write]."""

    id = "messages"

    tools = TOOLS

    async def call_checked(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        """Send ``args["text"]``; unknown contacts and failed contact deliveries are ``is_error`` results."""
        if name != "send_message":
            return ToolResult(text=f"messages has no tool {name!r}", is_error=True, untrusted=False)
        text, to = args.get("text"), args.get("to")
        if not isinstance(text, str) or not text.strip():
            return ToolResult(text="send_message: missing argument 'text' (the message)", is_error=True,
                              untrusted=False)
        if to is not None and not isinstance(to, str):
            return ToolResult(text="send_message: argument 'to' must be a contact name", is_error=True,
                              untrusted=False)
        if not to or not to.strip():
            return await self._to_person(text, ctx)
        return await self._to_contact(to.strip(), text, ctx)

    async def _to_person(self, text: str, ctx: CallContext) -> ToolResult:
        if ctx.notifier is None:  # fail closed: a turn always passes the person's channel
            return ToolResult(text="send_message: the person's channel is not available in this process",
                              is_error=True, untrusted=False)
        urls = ctx.settings.notify.apprise
        failures = await ctx.notifier.send_now("message", text, turn_id=ctx.turn_id,
                                               conversation_id=ctx.conversation_id)
        out = "Sent to the person's inbox."
        if urls:
            delivered = len(urls) - len(failures)
            out += f" Delivered to {delivered} of {len(urls)} other channel target(s)."
            if failures:
                out += " Not delivered: " + "; ".join(failures) + "."
        return ToolResult(text=out, untrusted=False)

    async def _to_contact(self, to: str, text: str, ctx: CallContext) -> ToolResult:
        contacts: dict[str, str] = ctx.settings.messages.contacts
        url = contacts.get(to)
        if url is None:
            # Exact names first; a case-only difference is still the same contact to a person,
            # but only when exactly one name matches that way.
            same = [k for k in contacts if k.casefold() == to.casefold()]
            if len(same) == 1:
                to, url = same[0], contacts[same[0]]
        if url is None:
            known = ", ".join(sorted(contacts)) if contacts else "none are configured (messages.contacts)"
            return ToolResult(text=f"send_message: unknown contact {to!r}; known contacts: {known}",
                              is_error=True, untrusted=False)
        from palui import delivery  # logging, threads and apprise: for a send, not for listing the tool

        failures = await delivery.deliver_async([url], text, title=delivery.TITLE)
        if failures:
            return ToolResult(text=f"send_message: could not deliver to {to}: {failures[0]}", is_error=True,
                              untrusted=False)
        return ToolResult(text=f"Sent to {to}.", untrusted=False)
