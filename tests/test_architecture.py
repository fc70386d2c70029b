"""The import contract (docs/architecture.md, "who may import whom"), checked over every module's AST.

Imports inside functions and under ``TYPE_CHECKING`` count, and so do ``importlib.import_module``
and ``__import__`` calls with a constant name: a reader's circle is a circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "palui"

FRONT_ENDS = ("palui.cli", "palui.server", "palui.web", "palui.channels", "palui.gateway")
# What a front end may import of Palui: the service API, the shared words and result types, the shared text
# helpers, the settings, and front-end code itself.
FRONT_END_ALLOWED = ("palui.service", "palui.types", "palui.results", "palui.errors", "palui.text", "palui.config",
                     "palui.config_schema", "palui.config_rules", "palui.config_section",
                     "palui.home", "palui.discovery", "palui.files", *FRONT_ENDS)
FRONT_END_FORBIDDEN = ("palui.runner", "palui.store", "palui.models", "palui.connectors", "palui.triggers")
# A front end calls the service's public parts (``svc.approvals.answer``). It never reads the database, nor a
# part's collaborators (``svc.turns.hub``) or the parts a part holds (``svc.turns.status_part``), nor a private
# attribute of the service or of a part (``svc._hub``, ``svc.tools._tools_on``): those are the parts' own.
FRONT_END_FORBIDDEN_ATTRIBUTES = ("db", "hub", "clock", "turn_tasks", "scheduler", "redecision")
FRONT_END_FORBIDDEN_SUFFIX = "_part"
# How a front end holds the service: ``svc`` (a parameter or a local), ``self.svc`` / ``self._svc``, or the call
# that hands it over (the CLI's ``service()`` / ``read_service()``, a route's ``service_of(request)``, a page's
# ``svc_of(request)``).
SERVICE_NAMES = ("svc",)
SERVICE_CALLS = ("service", "read_service", "service_of", "svc_of")
SERVICE_SIDE = ("palui.service", *FRONT_ENDS)
POLICY_STDLIB = {"__future__", "math", "re", "collections", "dataclasses", "typing", "unicodedata"}
#: A policy module that may import a library besides these, and which: the argument check validates against a
#: tool's input schema with jsonschema, whose registry it hands a retrieval that refuses (no I/O).
POLICY_LIBRARIES = {"palui.policy.input_schema": {"jsonschema", "referencing"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def exists(name: str) -> bool:
    p = SRC.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    base = me if is_package(path) else me.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base
                for _ in range(node.level - 1):
                    parent = parent.rpartition(".")[0]
                mod = f"{parent}.{node.module}" if node.module else parent
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((node.lineno, sub if exists(sub) else mod))
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                out.append((node.lineno, str(node.args[0].value)))
    return out


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


MODULES = sorted(PKG.rglob("*.py"))


def test_the_contract_sees_every_package():
    names = {module_name(p) for p in MODULES}
    for pkg in ("palui.cli", "palui.server", "palui.web", "palui.runner", "palui.connectors", "palui.service",
                "palui.policy", "palui.text"):
        assert pkg in names
    # the checker resolves relative and from-imports to modules
    assert "palui.service.tools" in {m for _, m in imports(PKG / "service" / "connectors.py")}


def on_the_service(node: ast.expr) -> bool:
    """Whether ``node`` is the service or something reached from it (``svc``, ``self.svc.turns``,
    ``svc_of(request).approvals``)."""
    while isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr in ("svc", "_svc")
        node = node.value
    if isinstance(node, ast.Call):
        f = node.func
        return (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "") in SERVICE_CALLS
    return isinstance(node, ast.Name) and node.id in SERVICE_NAMES


def front_end_violations(path: Path) -> list[tuple[int, str]]:
    bad = [(line, m) for line, m in imports(path)
           if within(m, ("palui",)) and m != "palui" and (within(m, FRONT_END_FORBIDDEN)
                                                          or not within(m, FRONT_END_ALLOWED))]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad += [(n.lineno, f".{n.attr}") for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and (n.attr in FRONT_END_FORBIDDEN_ATTRIBUTES
                                                 or n.attr.endswith(FRONT_END_FORBIDDEN_SUFFIX)
                                                 or (n.attr.startswith("_") and not n.attr.startswith("__")
                                                     and on_the_service(n.value)))]
    return bad


@pytest.mark.parametrize("path", [p for p in MODULES if within(module_name(p), FRONT_ENDS)],
                         ids=lambda p: module_name(p))
def test_front_ends_reach_palui_only_through_the_service(path):
    bad = front_end_violations(path)
    assert not bad, f"{module_name(path)} reaches internals (imports or service attributes): {bad}"


@pytest.mark.parametrize("path", [p for p in MODULES if within(module_name(p), ("palui.runner", "palui.connectors",
                                                                                "palui.policy", "palui.store",
                                                                                "palui.triggers", "palui.text",
                                                                                "palui.discovery"))],
                         ids=lambda p: module_name(p))
def test_below_the_service_nothing_imports_the_service_or_a_front_end(path):
    bad = [(line, m) for line, m in imports(path) if within(m, SERVICE_SIDE)]
    assert not bad, f"{module_name(path)} imports the service or a front end: {bad}"


@pytest.mark.parametrize("path", [p for p in MODULES if within(module_name(p), ("palui.policy",))],
                         ids=lambda p: module_name(p))
def test_the_policy_is_pure(path):
    """No I/O, no clock (spec §3): only the shared words and a few pure standard modules."""
    for line, m in imports(path):
        if within(m, ("palui",)):
            assert within(m, ("palui.types", "palui.errors", "palui.policy", "palui.text")), (line, m)
        else:
            allowed = POLICY_STDLIB | POLICY_LIBRARIES.get(module_name(path), set())
            assert m.split(".")[0] in allowed, f"{module_name(path)}:{line} imports {m}"


@pytest.mark.parametrize("path", [p for p in MODULES if within(module_name(p), ("palui.text",))],
                         ids=lambda p: module_name(p))
def test_the_shared_text_helpers_are_pure(path):
    for line, m in imports(path):
        if within(m, ("palui",)):
            assert within(m, ("palui.types", "palui.results", "palui.errors", "palui.text")), (line, m)
        else:
            # datetime for palui.text.when, which is handed the clock's "now" (it never reads the clock);
            # ipaddress for palui.text.loopback, which parses an address (it resolves no name); hmac for
            # palui.text.secret_compare (a comparison in constant time, no key).
            assert m.split(".")[0] in POLICY_STDLIB | {"json", "difflib", "hashlib", "urllib", "bisect",
                                                       "datetime", "ipaddress", "hmac"}, (line, m)


def test_a_violation_is_caught():
    """The checker itself: a web module importing the store under TYPE_CHECKING, using ``svc.db``, a part's
    collaborator or held part, or a private attribute of the service, fails; its own private attributes and the
    public parts do not."""
    probe = PKG / "web" / "_contract_probe.py"  # imports resolve against the real tree
    try:
        probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from palui.store import db\n")
        assert front_end_violations(probe) == [(3, "palui.store.db")]
        probe.write_text("def f(svc):\n    return svc.db.all('x')\n")
        assert front_end_violations(probe) == [(2, ".db")]
        probe.write_text("def f(svc):\n    return svc.turns.status_part.pause_state()\n")
        assert front_end_violations(probe) == [(2, ".status_part")]
        probe.write_text("def f(self, request):\n    self.svc._hub.get('x')\n    svc_of(request).tools._tools_on()\n"
                         "    return self._own_thing, svc.approvals.answer('a-1', True, 'web')\n")
        assert sorted(front_end_violations(probe)) == [(2, "._hub"), (3, "._tools_on")]
        probe.write_text("def f(svc):\n    return svc.turns.hub.get('x')\n")
        assert front_end_violations(probe) == [(2, ".hub")]
        probe.write_text("import importlib\nimportlib.import_module('palui.runner.turn_runner')\n")
        assert front_end_violations(probe) == [(2, "palui.runner.turn_runner")]
    finally:
        probe.unlink()


def test_every_type_ignore_names_its_code_and_a_reason():
    """mypy runs with ``warn_unused_ignores``; an ignore must say which error and why (a bare ignore hides
    which check it silences)."""
    pattern = re.compile(r"#\s*type:\s*ignore(\[[a-z-]+(,\s*[a-z-]+)*\])?(.*)$")
    bad = []
    for path in MODULES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = pattern.search(line)
            if m and (not m.group(1) or not re.match(r"\s*#\s*\S.{5,}", m.group(3))):
                bad.append(f"{module_name(path)}:{n}: {line.strip()}")
    assert not bad, bad


# -- circles and the service's direction -------------------------------------------------------------

def import_graph() -> dict[str, set[str]]:
    """Every module of ``palui`` → the ``palui`` modules it imports (lazy, ``TYPE_CHECKING`` and
    ``import_module`` imports count: :func:`imports`)."""
    graph = {module_name(p): {m for _, m in imports(p) if within(m, ("palui",))} for p in MODULES}
    return {me: {m for m in edges if m in graph and m != me} for me, edges in graph.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    """No module reaches itself through imports, lazy and ``TYPE_CHECKING`` ones included."""
    found = circles(import_graph())
    assert not found, found


@pytest.mark.parametrize("path", [p for p in MODULES if within(module_name(p), ("palui.service",))],
                         ids=lambda p: module_name(p))
def test_the_service_never_imports_a_front_end(path):
    bad = [(line, m) for line, m in imports(path) if within(m, FRONT_ENDS)]
    assert not bad, f"{module_name(path)} imports a front end: {bad}"


# -- composition, not inheritance ----------------------------------------------------------------------

# Bases that add no behaviour of another class: the typing markers, and ABC itself.
FREE_BASES = {"object", "Protocol", "Generic", "ABC"}
#: An enum of ``str`` values (``class Origin(str, Enum)``): ``str`` is the data type Python's enum mixes into its
#: members, not a second class of behaviour; kept over ``StrEnum`` (pyproject.toml, ruff's UP042 note).
VALUE_ENUM = ["str", "Enum"]


def base_name(node: ast.expr) -> str:
    """``Generic[T]`` → ``Generic``, ``abc.ABC`` → ``ABC``, ``Part`` → ``Part``."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ast.unparse(node)


def classes(prefixes: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """(``module.Class``, the names of its bases) of every class in the modules under ``prefixes``."""
    out = []
    for path in MODULES:
        if within(module_name(path), prefixes):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            out += [(f"{module_name(path)}.{n.name}", [base_name(b) for b in n.bases])
                    for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    return out


def typed_dicts() -> set[str]:
    """The names of the ``TypedDict`` shapes of ``palui.results`` (decision record 0150), directly or through
    other shapes: a shape composed of several (``ToolCallEvent(ToolCallFields, EventStamp)``) adds fields, not
    behaviour, and is allowed more than one base."""
    found = dict((name.rpartition(".")[2], bases) for name, bases in classes(("palui.results",)))
    shapes = {"TypedDict"}
    for path in MODULES:  # and the functional ones: ``ClassFields = TypedDict("ClassFields", {"class": str, …})``
        if within(module_name(path), ("palui.results",)):
            shapes |= {t.id for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Assign)
                       and isinstance(n.value, ast.Call) and base_name(n.value.func) == "TypedDict"
                       for t in n.targets if isinstance(t, ast.Name)}
    while True:
        more = {name for name, bases in found.items() if name not in shapes and bases and set(bases) <= shapes}
        if not more:
            return shapes - {"TypedDict"}  # the shapes themselves
        shapes |= more


def test_the_base_check_sees_a_mixin():
    probe = ast.parse("class A(Generic[T], abc.ABC, Part): pass").body[0]
    assert isinstance(probe, ast.ClassDef) and [base_name(b) for b in probe.bases] == ["Generic", "ABC", "Part"]
    found = dict(classes(("palui",)))
    assert found["palui.service.brake.JobsPaused"] == ["PaluiError"]
    assert found["palui.service.notifier.Notices"] == ["Protocol"]
    assert extra_bases("x.Mixed", ["Asking", "Questions"], set()) == ["Asking", "Questions"]  # what it refuses
    shapes = typed_dicts()
    assert {"ToolCallEvent", "ToolCallFields", "EventStamp", "Status", "TurnResult"} <= shapes
    assert extra_bases("palui.results.events.ToolCallEvent", found["palui.results.events.ToolCallEvent"], shapes) == []
    assert extra_bases("palui.types.Origin", found["palui.types.Origin"], shapes) == []


def extra_bases(name: str, bases: list[str], shapes: set[str]) -> list[str]:
    """The bases of class ``name`` beyond one, once the typing markers, a value enum's ``str`` and a result
    shape's other shapes are set aside."""
    if bases == VALUE_ENUM or (name.startswith("palui.results.") and set(bases) <= shapes):
        return []
    others = [b for b in bases if b not in FREE_BASES]
    return others if len(others) > 1 else []


SHAPES = typed_dicts()


@pytest.mark.parametrize("name,bases", [pytest.param(name, bases, id=name) for name, bases in classes(("palui",))])
def test_a_class_has_at_most_one_base_besides_the_typing_markers(name, bases):
    """No mixins anywhere in ``src``: classes are composed of collaborators given at construction (the
    service's parts, the runner's collaborators, the chat session's asking and questions, an MCP connector's
    sign-in state). Allowed: the typing markers (``Protocol``, ``Generic``, ``ABC``), an enum of ``str`` values,
    and the field composition of the result shapes in ``palui.results`` (TypedDicts, decision record 0150)."""
    assert extra_bases(name, bases, SHAPES) == [], f"{name} inherits from {bases}"


def test_no_part_of_the_service_inherits_from_another():
    """A part reaches another only through a reference given to its ``__init__`` (the decision record
    ``docs/decisions/0147-the-service-holds-its-parts.md``). A ``Protocol`` may extend another: it is a
    type, not a part."""
    found = classes(("palui.service",))
    own = {name.rpartition(".")[2] for name, _ in found}
    bad = [(name, [b for b in bases if b in own]) for name, bases in found
           if "Protocol" not in bases and any(b in own for b in bases)]
    assert not bad, bad


# -- one concept, one module: no two module names in one package that differ only by inflection -------------------
#: Suffixes that inflect a word without changing its concept (elicit / elicitation / elicitations / eliciting,
#: approval / approvals, decide / deciding / decider), stripped from each word of a module's name.
INFLECTIONS = ("ations", "ation", "itions", "ition", "ings", "ing", "ions", "ion", "ies", "es", "s", "ed", "er", "y")


def concept(name: str) -> tuple[str, ...]:
    """A module name's words with their inflections stripped (each stem keeps at least three letters)."""

    def stem(word: str) -> str:
        for suffix in INFLECTIONS:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                return word[: -len(suffix)]
        return word

    return tuple(stem(w) for w in name.split("_"))


def near_synonyms(names: list[str]) -> list[list[str]]:
    """Groups of ``names`` that share one :func:`concept`."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for n in names:
        groups.setdefault(concept(n), []).append(n)
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


def test_the_near_synonym_check_sees_inflections():
    assert near_synonyms(["elicit", "elicitation", "elicitations", "eliciting", "approvals", "approval",
                          "call_decider", "call_deciding", "rule_of_two"]) == [
        ["approval", "approvals"], ["call_decider", "call_deciding"],
        ["elicit", "elicitation", "elicitations", "eliciting"]]
    assert near_synonyms(["pending", "pending_calls", "turn", "turn_runner"]) == []


@pytest.mark.parametrize("package", sorted({p.parent for p in (SRC / "palui").rglob("__init__.py")
                                            if "__pycache__" not in p.parts}), ids=lambda p: p.name)
def test_no_near_synonym_modules_in_one_package(package: Path):
    names = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    names += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    where = package.relative_to(SRC)
    assert near_synonyms(names) == [], f"{where}: one concept, one module (name it after what it holds)"
