"""Marks on approval arguments from untrusted content (spec §4): what they catch, and what they cost.

1. Signal, on the benchmark-shaped asks of ``tests/support/mark_cases.py`` (the ones the tests use:
   AgentDojo's banking, Slack, travel and workspace suites; injected asks whose arguments carry values
   from tool results, benign asks whose arguments are the person's own words), for the old rule and the
   new one side by side: hijacked values marked, marks per injected ask, marks that quote a whole value
   when only a word of it matched, and false marks per benign ask.
2. Cost: ``untrusted_args`` over one untrusted page of 0.25 to 2 MB (1 MB is what Palui keeps of one
   tool result) and a value of 2,000 characters, either copied from the page (an injected body) or not
   in it (a benign one), old and new alternating call by call; then values of 200,000 and 1,000,000
   characters made of a 1 MB page's lines in reverse order (a document written from it).

The old rule is ``src/palui/policy/taint.py`` at ``--old`` (default: the commit before the span marks),
read with ``git show``. Usage: ``.venv/bin/python bench/marks.py [--old REV] [--runs N]``. No thresholds.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
import types
from typing import Any

from common import QUICK_HELP, ROOT, quick, report

sys.path.insert(0, str(ROOT / "tests"))

from palui.policy.taint import untrusted_args  # noqa: E402
from palui.text.escape import normalize_for_marks  # noqa: E402
from support.mark_cases import BENIGN, INJECTED  # noqa: E402

OLD_REV = "3bc4fd2"  # main before the span marks


def old_rule(rev: str) -> Any:
    """``untrusted_args`` as it was at ``rev``."""
    src = subprocess.run(["git", "show", f"{rev}:src/palui/policy/taint.py"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    mod = types.ModuleType("old_taint")
    exec(compile(src, f"{rev}:taint.py", "exec"), mod.__dict__)  # noqa: S102 - our own file at an older commit
    return mod.untrusted_args


def overclaims(m: dict[str, Any]) -> bool:
    """A mark whose prompt says the whole value came from untrusted content when only part of it matched."""
    quoted = m.get("spans") or [m["value"]]
    return quoted == [m["value"]] and m["match"] != normalize_for_marks(m["value"])


def signal(rule: Any) -> dict[str, float]:
    hijacked = caught = marks = over = 0
    for ask in INJECTED:
        got = rule(ask.args, ask.untrusted, schema=ask.schema, own_texts=ask.own)
        paths = {m["path"] for m in got}
        hijacked += len(ask.hijacked)
        caught += sum(p in paths for p in ask.hijacked)
        marks += len(got)
        over += sum(overclaims(m) for m in got)
    false = sum(len(rule(a.args, a.untrusted, schema=a.schema, own_texts=a.own)) for a in BENIGN)
    return {"hijacked": hijacked, "caught": caught, "marks per injected ask": marks / len(INJECTED),
            "whole value quoted, a word matched": over, "false marks per benign ask": false / len(BENIGN)}


def page(size: int, seed: int = 7) -> str:
    """``size`` characters of page-like text: half common words, half made-up ones, lines and fields."""
    rnd = random.Random(seed)
    common = "the of and to in is that it for on with as was at by be this from or an are we you".split()
    syll = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "der", "ban", "tel", "mor", "quin", "zar", "pel"]
    out: list[str] = []
    n = 0
    while n < size:
        words = [rnd.choice(common) if rnd.random() < 0.5 else "".join(rnd.choices(syll, k=rnd.randint(1, 4)))
                 for _ in range(rnd.randint(3, 14))]
        line = (f"{words[0]}: " if rnd.random() < 0.3 else "") + " ".join(words) + rnd.choice([".", ",", "", "!"])
        out.append(line)
        n += len(line) + 1
    return "\n".join(out)[:size]


def cost(rules: dict[str, Any], runs: int) -> None:
    for mb in (0.25, 0.5, 1.0, 2.0):
        text = page(int(mb * 1_000_000))
        start = len(text) // 2
        injected = text[start:start + 2000]
        benign = page(2000, seed=99)
        for label, value in (("value copied from the page", injected), ("value not in the page", benign)):
            rows: dict[str, list[float]] = {name: [] for name in rules}
            for _ in range(runs):
                for name, rule in rules.items():
                    t = time.perf_counter()
                    rule({"body": value}, [("web__fetch_page at step 1", text)], own_texts=["read the page"])
                    rows[name].append((time.perf_counter() - t) * 1000)
            report(f"untrusted_args, {mb:g} MB page, 2,000-character {label}", "ms", rows, "old")
    text = page(1_000_000)
    for size in (200_000, 1_000_000):  # a long document written from the page's lines, reordered
        value = "\n".join(reversed(text[:size].split("\n")))
        rows = {name: [] for name in rules}
        for _ in range(max(1, runs // 3)):
            for name, rule in rules.items():
                t = time.perf_counter()
                rule({"content": value}, [("web__fetch_page at step 1", text)], own_texts=["read the page"])
                rows[name].append((time.perf_counter() - t) * 1000)
        report(f"untrusted_args, 1 MB page, a {size:,}-character value of its lines reordered", "ms", rows, "old")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", default=OLD_REV, help="git revision of the old rule")
    ap.add_argument("--runs", type=int, default=quick(7, 1))
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    a = ap.parse_args()
    rules = {"new": untrusted_args, "old": old_rule(a.old)}
    print(f"Signal over {len(INJECTED)} injected and {len(BENIGN)} benign asks (tests/support/mark_cases.py)")
    results = {name: signal(rule) for name, rule in rules.items()}
    print(f"  {'':<38}{'old':>10}{'new':>10}")
    caught = [f"{results[n]['caught']}/{results[n]['hijacked']}" for n in ("old", "new")]
    print(f"  {'hijacked values marked':<38}" + "".join(f"{c:>10}" for c in caught))
    for key in ("marks per injected ask", "whole value quoted, a word matched", "false marks per benign ask"):
        print(f"  {key:<38}" + "".join(f"{results[n][key]:>10.2f}" for n in ("old", "new")))
    for ask in INJECTED:
        old = {m["path"] for m in rules["old"](ask.args, ask.untrusted, schema=ask.schema, own_texts=ask.own)}
        missed = [p for p in ask.hijacked if p not in old]
        if missed:
            print(f"    old rule misses {', '.join(missed)} in: {ask.name}")
    cost(rules, a.runs)


if __name__ == "__main__":
    main()
