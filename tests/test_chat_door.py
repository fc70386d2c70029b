"""The terminal chat's door (``palui.cli.chat.door.ChatDoor``, decision record 0149) against its two backends.

mypy checks each backend against the Protocol (typed assignments at the end of ``palui/cli/chat/door.py``);
these tests check the same at run time, parameter by parameter (names, kinds, defaults, async or not), so a
backend that drifts from the door fails here too.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Protocol

import pytest

from palui.cli.chat.backends import LocalBackend, RemoteBackend
from palui.cli.chat.door import ChatDoor


def members(door: type) -> dict[str, object]:
    """The methods and attributes a Protocol names (its own and its bases'), without the typing machinery."""
    out: dict[str, object] = {}
    for klass in reversed(door.__mro__):
        if klass in (object, Protocol) or klass.__module__ == "typing":
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_"):
                out[name] = value
        out.update({name: None for name in getattr(klass, "__annotations__", {}) if not name.startswith("_")})
    return out


def sets_attribute(impl: type, name: str) -> bool:
    """Whether a constructor of ``impl`` or its bases assigns ``self.<name>`` (alone or in a tuple)."""
    for k in impl.__mro__:
        if k is object or "__init__" not in vars(k):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(k.__init__)))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                for leaf in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) \
                            and leaf.value.id == "self" and leaf.attr == name:
                        return True
    return False


def differences(door: type, impl: type) -> list[str]:
    """What ``impl`` lacks or has differently from ``door``: a missing member, another parameter list
    (names, kinds, defaults; a door's default ``...`` stands for the implementation's), sync vs async."""
    out = []
    for name, want in members(door).items():
        if want is None:  # an attribute: on the class, or set by a constructor
            if not hasattr(impl, name) and not sets_attribute(impl, name):
                out.append(f"{name}: missing")
            continue
        if not hasattr(impl, name):
            out.append(f"{name}: missing")
            continue
        have = getattr(impl, name)
        if inspect.iscoroutinefunction(want) != inspect.iscoroutinefunction(have):
            out.append(f"{name}: async differs")
        wp = list(inspect.signature(want).parameters.values())
        hp = list(inspect.signature(have).parameters.values())
        if [(p.name, p.kind) for p in wp] != [(p.name, p.kind) for p in hp]:
            out.append(f"{name}: parameters {[p.name for p in wp]} != {[p.name for p in hp]}")
            continue
        for w, h in zip(wp, hp, strict=True):
            if (w.default is inspect.Parameter.empty) != (h.default is inspect.Parameter.empty):
                out.append(f"{name}({w.name}): a default on one side only")
            elif w.default is not Ellipsis and w.default != h.default:
                out.append(f"{name}({w.name}): default {w.default!r} != {h.default!r}")
    return out


@pytest.mark.parametrize("backend", [LocalBackend, RemoteBackend])
def test_both_chat_backends_are_chat_doors(backend):
    assert differences(ChatDoor, backend) == []
    assert {LocalBackend.runs_here, RemoteBackend.runs_here} == {True, False}


def test_a_drifted_implementation_is_caught():
    """The checker itself: a missing method, a renamed parameter, another default, sync for async."""

    class Door(Protocol):
        async def go(self, turn_id: str, after: int = 0) -> None: ...
        def stop(self, via: str = "cli") -> None: ...
        def gone(self) -> None: ...

        settings: object
        where: str

    class Drifted:
        where = "here"

        def go(self, turn: str, after: int = 0) -> None: ...
        def stop(self, via: str = "api") -> None: ...

    assert differences(Door, Drifted) == [
        "go: async differs", "go: parameters ['self', 'turn_id', 'after'] != ['self', 'turn', 'after']",
        "stop(via): default 'cli' != 'api'", "gone: missing", "settings: missing"]
