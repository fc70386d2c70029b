"""The documents stay true: the README documents every configuration key with its default and the
test command .ci/run runs; every citation of the behaviour reference ``docs/spec.md`` names one of
its headings; no file cites a tracker number; the decision records are numbered, indexed and linked;
links between the documents resolve; ``docs/architecture.md`` names every module of ``src/palui`` and
its layers hold for every import; the migrations' docstring lists the unused numbers as they are.

**What counts as a citation of the spec.** The word ``spec`` (any case: ``spec``, ``SPEC``; also
``spec.md``) directly followed by ``§`` and a number starts one: ``spec §4`` (a section, which must
be a ``## 4.`` heading) or ``spec §4.2`` (a subsection, a ``### 4.2`` heading). The ``§`` items
chained to it by ``,``, ``/``, ``and``, ``or`` or ``&`` belong to it (``SPEC §6, §8``, ``SPEC §1 and
§8``), and so do ranges with ``-`` or ``–`` (``SPEC §3-§5``: every section from 3 to 5). Anything
else ends the chain: ``SPEC §4, RFC 6749 §2`` cites only §4, ``SPEC §3 webhook column, §4`` only §3.
A ``§`` without that prefix is not ours: other specifications' sections (``RFC 8252 §7.3``, an MCP
SEP), a tracker's (``issue N §M``, which no file may hold any more). A citation of the MCP
specification says so with the word before it, ``MCP spec §…``, which is not ours either. A dot after a
number ends a sentence unless a digit follows (``SPEC §8.`` cites §8). Inside ``docs/spec.md`` every
``§`` is its own, so there a bare ``§4.5`` must resolve too.

**What counts as a tracker number.** ``issue N`` or ``issues N`` in any case, with or without ``#``,
the number possibly on the next line (``Issue N's``, ``issues N–M``, ``issue N §M``), and ``issue-N``
(the name of a tracker's file). It names a ticket of a tracker a reader of the repository cannot see,
so each says what it meant instead: a ``spec §N`` section, a decision record, or the reason in words.
Ours are told from other projects' by where the number stands: a number inside a URL
(``https://github.com/OWNER/REPO/issues/N``) is a link that says whose tracker it is, not a citation,
so URLs are blanked before the search; every other one is read as ours. Another project's issue is
therefore cited by its URL. Words without a number (``create_issue``, ``3 issues``) are not citations.

Files read: ``src/``, ``tests/``, ``docs/``, ``bench/``, ``scripts/`` and ``README.md`` (and
``.ci/run`` for tracker numbers), every text file but build output (``*.egg-info``, ``__pycache__``,
``node_modules``) and binary files (a fixture database keeps the migration names it recorded).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from palui.config import documented_keys
from palui.config_schema import range_text

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SPEC = ROOT / "docs" / "spec.md"
DECISIONS = ROOT / "docs" / "decisions"
SCANNED = ("src", "tests", "docs", "bench", "scripts", "README.md")
SKIPPED_DIRS = {"__pycache__", "node_modules", ".venv"}
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".woff", ".woff2", ".pyc", ".db", ".sqlite"}

# -- the README ---------------------------------------------------------------------------------


def _default_text(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return "[]" if isinstance(value, list) else "{}"
    return str(value)


@pytest.mark.parametrize("key,default", sorted(documented_keys().items()))
def test_every_config_key_is_in_the_readme_with_its_default_and_range(key, default):
    """The README's table is checked against the settings model: the default, and the range in the words
    the model gives (``range_text``: ``1 to 1,000 model steps``), or — for a key without one."""
    rows = [line for line in README.splitlines() if line.startswith(f"| `{key}` |")]
    assert rows, f"README.md does not document the configuration key {key}"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1].split(" ")[0] == _default_text(default), f"README.md shows a wrong default for {key}"
    try:
        words = range_text(key)
    except KeyError:  # a key without a range
        words = "—"
    assert cells[2] == words or cells[2].startswith(words + ", "), f"README.md shows a wrong range for {key}: {words}"


def test_readme_test_command_is_the_ci_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash .ci/run" in README
    assert ".venv/bin/python -m pytest -q" in README
    assert "\n.venv/bin/python -m pytest -q" in ci
    assert "set -euo pipefail" in ci


# -- citations of docs/spec.md ------------------------------------------------------------------

_PREFIX = re.compile(r"(?<![A-Za-z0-9_])(MCP\s+)?spec(?:\.md)?\s*(?=§\d)", re.IGNORECASE)
_ITEM = re.compile(r"§(\d+)(?:\.(\d+))?")
_RANGE_END = re.compile(r"\s*[-–]\s*§?(\d+)(?:\.(\d+))?")
_JOIN = re.compile(r"\s*(?:,|/|&|\band\b|\bor\b)\s*(?=§\d)", re.IGNORECASE)

Target = tuple[int, int | None]  # (section, subsection or None)


def cited(text: str) -> Iterator[tuple[int, str, list[Target], str | None]]:
    """Every citation of the spec in ``text`` (see the module docstring): ``(line, the citation as
    written, the headings it names, a problem or None)``. A range names every section in it; a
    backward range, or one mixing sections and subsections, is a problem."""
    for m in _PREFIX.finditer(text):
        if m.group(1):
            continue  # the MCP specification's section, not ours
        pos, targets, problem = m.end(), [], None
        while True:
            item = _ITEM.match(text, pos)
            assert item is not None  # the prefix's lookahead saw § and a digit here
            first: Target = (int(item.group(1)), int(item.group(2)) if item.group(2) else None)
            pos = item.end()
            end = _RANGE_END.match(text, pos)
            if end:
                last: Target = (int(end.group(1)), int(end.group(2)) if end.group(2) else None)
                pos = end.end()
                if (first[1] is None) != (last[1] is None) or last < first:
                    problem = f"a range from §{_show(first)} to §{_show(last)}"
                    targets += [first, last]
                elif first[1] is None:
                    targets += [(n, None) for n in range(first[0], last[0] + 1)]
                else:
                    targets += [first, last]
            else:
                targets.append(first)
            join = _JOIN.match(text, pos)
            if not join:
                break
            pos = join.end()
        yield text.count("\n", 0, m.start()) + 1, text[m.start():pos], targets, problem


def _show(t: Target) -> str:
    return f"{t[0]}" if t[1] is None else f"{t[0]}.{t[1]}"


def headings(spec_text: str) -> set[Target]:
    """The headings a citation may name: ``## N. Title`` gives (N, None), ``### N.M Title`` (N, M)."""
    found: set[Target] = set()
    for line in spec_text.splitlines():
        if m := re.match(r"## (\d+)\. \S", line):
            found.add((int(m.group(1)), None))
        elif m := re.match(r"### (\d+)\.(\d+) \S", line):
            found.add((int(m.group(1)), int(m.group(2))))
    return found


def dangling(text: str, known: set[Target]) -> list[str]:
    """The citations in ``text`` that name no heading in ``known``, as ``line N: citation (why)``."""
    out = []
    for line, written, targets, problem in cited(text):
        missing = [f"§{_show(t)}" for t in targets if t not in known]
        if problem or missing:
            out.append(f"line {line}: {written!r} ({problem or 'no heading ' + ', '.join(missing)})")
    return out


def _scanned_files(root: Path = ROOT, names: tuple[str, ...] = SCANNED) -> Iterator[Path]:
    """Every text file under ``names`` (folders or files relative to ``root``), build output left out."""
    for name in names:
        top = root / name
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for p in paths:
            rel = p.relative_to(root).parts
            if (p.is_file() and p.suffix.lower() not in BINARY and not any(part in SKIPPED_DIRS for part in rel)
                    and not any(part.endswith(".egg-info") for part in rel)):
                yield p


def _text(p: Path) -> str | None:
    data = p.read_bytes()
    return None if b"\0" in data else data.decode("utf-8", errors="replace")


# The headings of a made-up spec, for the checker's own tests.
MADE_UP = {(n, None) for n in (1, 3, 4, 5, 6, 8)} | {(4, 2)}


@pytest.mark.parametrize("text,names", [
    ("SPEC §6", [(6, None)]),
    ("see spec §4.2 for it", [(4, 2)]),
    ("(SPEC §6, §8; issue " "10 §3)", [(6, None), (8, None)]),
    ("SPEC §1 and §8", [(1, None), (8, None)]),
    ("SPEC §5/§7", [(5, None), (7, None)]),
    ("SPEC §3-§5, §8", [(3, None), (4, None), (5, None), (8, None)]),
    ("spec §3–5", [(3, None), (4, None), (5, None)]),
    ("SPEC §4, issue " "10 §2", [(4, None)]),
    ("SPEC §6 / issue " "10 §5", [(6, None)]),
    ("as SPEC §8. Then", [(8, None)]),
    ("docs/spec.md §4.2", [(4, 2)]),
    ("SPEC\n§7", [(7, None)]),
])
def test_the_checker_reads_citations_and_their_lists(text, names):
    assert [t for c in cited(text) for t in c[2]] == names


@pytest.mark.parametrize("text", [
    "RFC 8252 §7.3", "issue " "15 §7", "MCP spec §99", "the mcp spec §5.2", "inspect §3",
    "the spec's primitive schemas", "a spec §N placeholder",
])
def test_the_checker_leaves_other_sections_alone(text):
    assert list(cited(text)) == []


@pytest.mark.parametrize("text", [
    "SPEC " + "§99", "spec " + "§4.9", "SPEC " + "§6, §7", "SPEC " + "§3-§9", "SPEC " + "§5-§3",
    "SPEC " + "§4.2-§5",
])
def test_the_checker_finds_a_dangling_citation(text):
    assert dangling(text, MADE_UP), f"{text!r} names a heading the made-up spec lacks"


def test_the_checker_accepts_citations_that_resolve():
    assert dangling("SPEC " + "§3-§5, §8 and spec §4.2", MADE_UP) == []


def test_every_citation_of_the_spec_names_a_heading():
    known = headings(SPEC.read_text(encoding="utf-8"))
    problems, count = [], 0
    for p in _scanned_files():
        text = _text(p)
        if text is None:
            continue
        count += len(list(cited(text)))
        problems += [f"{p.relative_to(ROOT)}: {d}" for d in dangling(text, known)]
    assert count > 300, f"only {count} citations found: the checker no longer reads them"
    assert problems == [], "citations of docs/spec.md that name no heading:\n" + "\n".join(problems)


def test_the_spec_s_own_section_signs_resolve():
    text = SPEC.read_text(encoding="utf-8")
    known = headings(text)
    bare = [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in _ITEM.finditer(text)
            if (int(m.group(1)), int(m.group(2)) if m.group(2) else None) not in known]
    assert bare == [], f"docs/spec.md cites its own sections that do not exist: {bare}"


# Sections 1-11 keep the numbers and titles the code has cited since the first round.
TITLES = {1: "Words", 2: "Tool classes and fail closed", 3: "The decision matrix", 4: "The taint rule",
          5: "Approvals", 6: "Budgets and caps", 7: "Connectors", 8: "Triggers", 9: "Models",
          10: "Storage, audit, configuration", 11: "Machine-readable output"}


def test_the_spec_keeps_its_numbered_sections():
    lines = SPEC.read_text(encoding="utf-8").splitlines()
    sections = [(int(m.group(1)), m.group(2)) for line in lines if (m := re.fullmatch(r"## (\d+)\. (.+)", line))]
    assert [n for n, _ in sections] == list(range(1, len(sections) + 1)), "sections are numbered 1, 2, 3… in order"
    assert {n: t for n, t in sections if n in TITLES} == TITLES
    current = 0
    for line in lines:
        if m := re.fullmatch(r"## (\d+)\. .+", line):
            current, sub = int(m.group(1)), 0
        elif m := re.fullmatch(r"### (\d+)\.(\d+) .+", line):
            assert int(m.group(1)) == current and int(m.group(2)) == sub + 1, f"{line!r} out of place"
            sub += 1
        assert not re.match(r"#{2,3} \d", line) or re.fullmatch(r"## \d+\. .+|### \d+\.\d+ .+", line), line


def test_planned_rules_are_marked_as_such():
    """A rule not built yet says so where it stands, in the one form the builders search for."""
    text = SPEC.read_text(encoding="utf-8")
    assert "(planned: not yet built)" in text
    assert len(re.findall(r"\(planned[^)]*\)", text, re.IGNORECASE)) == text.count("(planned: not yet built)")


# -- decision records ---------------------------------------------------------------------------

RECORD = re.compile(r"(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md")


def _records() -> list[Path]:
    """The numbered records; ``README.md`` is the index and ``draft-*.md`` wait for a number."""
    return sorted(p for p in DECISIONS.glob("*.md") if p.name != "README.md" and not p.name.startswith("draft-"))


def test_decision_records_are_numbered_from_0001_without_gaps():
    names = [p.name for p in _records()]
    bad = [n for n in names if not RECORD.fullmatch(n)]
    assert bad == [], f"record names are NNNN-short-title.md (or draft-*.md before they land): {bad}"
    assert [int(n[:4]) for n in names] == list(range(1, len(names) + 1))
    assert len(names) > 100


@pytest.mark.parametrize("path", _records(), ids=lambda p: p.name[:4])
def test_a_decision_record_has_its_parts(path):
    text = path.read_text(encoding="utf-8")
    assert text.startswith(f"# {path.name[:4]}. "), "the title line is '# NNNN. Title'"
    parts = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert parts[:3] == ["Context", "Decision", "Consequences"] and set(parts) <= {
        "Context", "Decision", "Consequences", "Measured"}, parts
    assert re.search(r"^Area: .*spec §\d", text, re.MULTILINE), "a record names the part of the spec it belongs to"


def test_the_index_lists_every_record_with_its_title():
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[(\d{4})\]\(([^)]+)\) \| (.+?) \| (.+?) \|$", index, re.MULTILINE)
    assert [r[1] for r in rows] == [p.name for p in _records()]
    for number, name, title, line in rows:
        assert (DECISIONS / name).read_text(encoding="utf-8").splitlines()[0] == f"# {number}. {title}"
        assert line.strip(), f"record {number} has no one-line summary in the index"


def test_records_speak_of_what_was_decided_not_of_tracker_numbers():
    """A tracker number means nothing to a reader of the repository: records say what it was about."""
    found = [f"{p.name}: {m.group(0)!r}" for p in [*_records(), DECISIONS / "README.md"]
             for m in re.finditer(r"\bissues?\s+#?\d+", p.read_text(encoding="utf-8"), re.IGNORECASE)]
    assert found == []


def test_readme_links_the_spec_and_the_decision_records():
    assert "(docs/spec.md)" in README
    assert "(docs/decisions/README.md)" in README
    assert not (ROOT / "docs" / "decisions.md").exists()


def test_nothing_names_the_old_decisions_file():
    naming = []
    for p in _scanned_files():
        rel = p.relative_to(ROOT).as_posix()
        text = _text(p)
        if text is not None and rel != "tests/test_docs.py":
            naming += [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
                       for m in re.finditer(r"decisions\.md", text)]
    assert naming == [], "docs/decisions.md is now docs/decisions/ (one record per decision)"


# -- links between the documents ----------------------------------------------------------------

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"#{1,6} (.+)", line)):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "bench" / "README.md"]


def test_slugs_are_github_s():
    assert slug("Questions from servers (elicitation)") == "questions-from-servers-elicitation"
    assert slug("The `script:` model") == "the-script-model"
    assert slug("Remote servers that sign in (OAuth 2.1)") == "remote-servers-that-sign-in-oauth-21"


@pytest.mark.parametrize("doc", _documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_between_the_documents_resolves(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for m in _LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: and the like: not ours to check offline
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert broken == []


# -- the migrations' docstring ------------------------------------------------------------------


def _spans(numbers: list[int]) -> str:
    spans, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            spans.append({0: str(n), 1: f"{start}, {n}"}.get(n - start, f"{start}–{n}"))
            start = None
    return ", ".join(spans)


def test_the_migrations_docstring_lists_the_unused_numbers():
    from palui.store import migrations

    used = [m[0] for m in migrations.MIGRATIONS]
    unused = sorted(set(range(1, max(used) + 1)) - set(used))
    m = re.search(r"Unused numbers: ([0-9, –]+)\.", " ".join((migrations.__doc__ or "").split()))
    assert m, "the docstring of palui.store.migrations lists the unused numbers"
    assert m.group(1) == _spans(unused)
    assert len(used) == len(set(used)), "each number is taken once"


# -- no tracker numbers -------------------------------------------------------------------------

TRACKER_SCANNED = (*SCANNED, ".ci/run")
_TRACKER = re.compile(r"\bissues?\s+#?\d+|\bissue-#?\d+", re.IGNORECASE)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>()\[\]\"'`]+", re.IGNORECASE)


def tracker_citations(text: str) -> list[tuple[int, str]]:
    """Every tracker number ``text`` cites, as ``(line, the words as written)``; see the module docstring.
    URLs are blanked first (same length, so line numbers hold): a number in a link is not a citation."""
    blank = _URL.sub(lambda m: " " * len(m.group(0)), text)
    return [(blank.count("\n", 0, m.start()) + 1, m.group(0)) for m in _TRACKER.finditer(blank)]


def tracker_findings(root: Path) -> list[str]:
    """``path:line: 'words'`` for every tracker number in the files under ``root`` the check reads."""
    out = []
    for p in _scanned_files(root, TRACKER_SCANNED):
        text = _text(p)
        if text is not None:
            out += [f"{p.relative_to(root).as_posix()}:{line}: {words!r}" for line, words in tracker_citations(text)]
    return out


W = "issue"  # the word, kept apart from a number here so that this file cites none


@pytest.mark.parametrize("text", [
    f"import difflib  # {W} 11: start cost", f"({W} 10 §3)", f"{W.title()} 14's refresh margin",
    f"{W}s 9–15", f"{W.upper()} 12", f"see {W} #13", f"the {W}\n    20 says so", f"/work/prompts/{W}-20.md",
])
def test_the_tracker_check_finds_a_made_up_citation(text):
    assert tracker_citations(text), f"{text!r} cites a tracker number"


@pytest.mark.parametrize("text", [
    "https://github.com/modelcontextprotocol/python-sdk/issues/1234", f"<https://example.org/{W}-12>",
    f"(https://example.org/search?q={W}+7)", "create_issue 5 times", "tissue 5", f"3 {W}s found", f"the {W}'s bar",
])
def test_the_tracker_check_leaves_links_and_words_alone(text):
    assert tracker_citations(text) == []


def test_the_tracker_check_reads_every_file_it_should(tmp_path):
    (tmp_path / "src" / "palui").mkdir(parents=True)
    (tmp_path / "src" / "palui" / "made_up.py").write_text(f"import os  # {W} 11: start cost\n", encoding="utf-8")
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text(f"set -euo pipefail\n# what {W}-20 asked\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("[a known bug](https://github.com/o/r/issues/3)\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "home.db").write_bytes(f"\0{W} 13".encode())  # binary: a stored migration name
    assert tracker_findings(tmp_path) == [f"src/palui/made_up.py:1: '{W} 11'", f".ci/run:2: '{W}-20'"]


def test_no_file_cites_a_tracker_number():
    """A tracker number means nothing to a reader of the repository: the code, tests, benches, scripts,
    documents, the README and the CI script say what it meant (a ``spec §N`` section, a decision record
    under ``docs/decisions/``, or the reason in words)."""
    read = {p.relative_to(ROOT).as_posix() for p in _scanned_files(ROOT, TRACKER_SCANNED)}
    assert {".ci/run", "README.md", "src/palui/service/api.py", "tests/test_docs.py"} <= read
    found = tracker_findings(ROOT)
    assert found == [], "tracker numbers (say what they meant instead):\n" + "\n".join(found)


# -- the architecture page ------------------------------------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def section(text: str, title: str) -> str:
    """The lines of ``text`` under the heading ``## title``, up to the next ``## `` heading."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert m, f"no section '## {title}'"
    return m.group(1)


def documented_modules(text: str) -> list[str]:
    """The modules the page's "Every module" section names, as paths under ``src/``: each heading
    ``### `palui/FOLDER/` `` opens a folder, and each table row under it names one of its modules in its
    first cell (``| `name.py` | what it owns |``)."""
    out, folder = [], None
    for line in section(text, "Every module").splitlines():
        if m := re.match(r"### `(palui/(?:\w+/)*)`", line):
            folder = m.group(1)
        elif folder and (m := re.match(r"\| `(\w+\.py)` \|", line)):
            out.append(folder + m.group(1))
    return out


def test_the_module_reader_reads_folders_and_rows():
    page = ("## Every module\n\n### `palui/` (top)\n\n| module | owns |\n|---|---|\n| `a.py` | x |\n\n"
            "### `palui/b/c/`\n\n| `d.py` | y |\n\n## Next\n\n| `e.py` | z |\n")
    assert documented_modules(page) == ["palui/a.py", "palui/b/c/d.py"]


def test_the_architecture_page_names_every_module_once():
    src = ROOT / "src"
    actual = {p.relative_to(src).as_posix() for p in (src / "palui").rglob("*.py") if "__pycache__" not in p.parts}
    named = documented_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(actual) > 150
    assert sorted(actual - set(named)) == [], "modules docs/architecture.md does not name (add a row)"
    assert sorted(set(named) - actual) == [], "rows of docs/architecture.md for modules that do not exist"
    assert len(named) == len(set(named)), "a module named twice"


def layers(text: str) -> dict[str, int]:
    """The layer table under "Who may import whom": each module or package it names → its layer (1 is the top)."""
    out = {}
    for line in section(text, "Who may import whom").splitlines():
        if m := re.match(r"\| (\d+) \| (.+?) \|", line):
            out.update({name: int(m.group(1)) for name in re.findall(r"`(palui(?:\.\w+)*)`", m.group(2))})
    return out


def layer_of(module: str, table: dict[str, int]) -> int | None:
    """The layer of the longest name in ``table`` that is ``module`` or a package above it (the bare
    ``palui`` names the package's own ``__init__`` only), or None."""
    names = [n for n in table if module == n or (n != "palui" and module.startswith(n + "."))]
    return table[max(names, key=len)] if names else None


def against_the_layers(graph: dict[str, set[str]], table: dict[str, int]) -> list[str]:
    """Every module of ``graph`` without a layer, and every import from a layer up to a higher one."""
    out = [f"{m} has no layer" for m in sorted(graph) if layer_of(m, table) is None]
    for a in sorted(graph):
        for b in sorted(graph[a]):
            la, lb = layer_of(a, table), layer_of(b, table)
            if la is not None and lb is not None and lb < la:
                out.append(f"{a} (layer {la}) imports {b} (layer {lb})")
    return out


def test_the_layer_check_finds_an_import_upwards_and_a_module_without_a_layer():
    table = {"palui.runner": 4, "palui.store": 6, "palui": 10}
    graph = {"palui.store.db": {"palui.runner.state"}, "palui.runner.state": {"palui.store.db", "palui"},
             "palui": set(), "palui.made_up": set()}
    assert against_the_layers(graph, table) == [
        "palui.made_up has no layer", "palui.store.db (layer 6) imports palui.runner.state (layer 4)"]


def test_every_import_goes_down_the_layers_of_the_architecture_page():
    from test_architecture import import_graph

    table = layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(set(table.values())) >= 8, f"the layer table was not read: {table}"
    graph = import_graph()
    assert sum(len(e) for e in graph.values()) > 500, "the import graph was not read"
    assert against_the_layers(graph, table) == []
