"""Suggestions from the governance numbers (spec §5.8). Pure: numbers and tool facts in, suggestions out.

Each suggestion is one command the person can run; Palui never runs it. Two rules hold for every
suggestion (tests check them over random inputs):

- it never loosens anything on its own (it is only text);
- it never proposes to loosen a ``destructive`` or ``unknown`` class: no ``set-class`` to a looser class,
  no switching on, and no dropping of a flag for a tool whose effective class is destructive (which
  includes unknown).

The suggestions, each from a threshold over the report's window:

- ``trust``: an MCP connector (not built-in, not trusted yet) whose results tainted at least
  :data:`TAINTED_MIN` conversations — "if it returns no text written by others: palui connectors trust ID";
- ``reclass``: a ``write`` tool asked at least :data:`ASKED_MIN` times and approved every time —
  "if it changes nothing: palui tools set-class NAME read";
- ``unflag``: a tool asked at least :data:`ASKED_MIN` times by the Rule of Two only because the person
  flagged it as reaching outside, approved every time — "palui tools reaches-outside NAME --off";
- ``disable``: a tool asked at least :data:`DENIED_MIN` times and denied every time — "palui tools disable NAME"
  (a tightening);
- ``classify``: an unknown tool asked at least :data:`DENIED_MIN` times — "palui tools suggest CONNECTOR"
  (it proposes classes; nothing changes until accepted);
- ``enable``: a switched-off ``read`` or ``write`` tool the model called at least :data:`REFUSED_MIN` times
  (refused as not offered) — "palui tools enable NAME";
- ``standing``: a call the person approved at least :data:`REPEATED_MIN` times with the same arguments in one
  context, of a ``read`` or ``write`` tool (never destructive or unknown: decision 0130), no standing approval made
  from it yet — "palui rules add a-…" (from the latest of them, every argument pinned: a suggestion never widens
  an argument, so it never answers a call the person did not see; spec §5.9).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TAINTED_MIN = 3
ASKED_MIN = 5
DENIED_MIN = 3
REFUSED_MIN = 3
REPEATED_MIN = 3


@dataclass(frozen=True)
class ToolFacts:
    """What the advice needs to know of a tool: its effective ``tool_class`` and ``class_source``
    (``unknown`` for none), switch, connector, and whether the person flagged it as reaching outside."""

    tool_class: str
    class_source: str
    enabled: bool
    connector: str
    outside_flag: bool = False


@dataclass(frozen=True)
class ConnectorFacts:
    """``kind`` (``builtin`` | ``mcp``) and whether it is a trusted source already."""

    kind: str
    trusted: bool


def _days(n: int) -> str:
    return "today" if n == 1 else f"in the last {n} days"


def advise(numbers: Mapping[str, Any], tools: Mapping[str, ToolFacts],
           connectors: Mapping[str, ConnectorFacts]) -> list[dict[str, str]]:
    """The suggestions for ``numbers`` (:func:`palui.store.report.numbers`): ``[{"kind","text","command"}]``,
    strongest evidence first within each kind."""
    out: list[dict[str, str]] = []
    when = _days(int(numbers["days"]))
    for row in numbers["tainted_conversations"]:
        c = connectors.get(row["connector"])
        if c is None or c.kind != "mcp" or c.trusted or row["conversations"] < TAINTED_MIN:
            continue
        out.append({"kind": "trust", "command": f"palui connectors trust {row['connector']}",
                    "text": f"results of {row['connector']} tainted {row['conversations']} conversations {when}; "
                            "if it returns no text written by others:"})
    for row in numbers["asks"]["top_tools"]:
        t = tools.get(row["tool"])
        if t is None:
            continue
        all_approved = row["approved"] == row["asks"]
        if row["asks"] >= ASKED_MIN and all_approved and t.tool_class == "write":
            out.append({"kind": "reclass", "command": f"palui tools set-class {row['tool']} read",
                        "text": f"{row['tool']} asked {row['asks']} times {when} and you approved every one; "
                                "if it changes nothing:"})
        elif (row["asks"] >= ASKED_MIN and all_approved and t.outside_flag and t.tool_class != "destructive"
              and row["by_cause"].get("outside") == row["asks"]):
            out.append({"kind": "unflag", "command": f"palui tools reaches-outside {row['tool']} --off",
                        "text": f"{row['tool']} asked {row['asks']} times {when} because you flagged it as "
                                "reaching outside, and you approved every one; if it cannot carry data out:"})
        if row["asks"] >= DENIED_MIN and row["denied"] == row["asks"] and t.enabled:
            out.append({"kind": "disable", "command": f"palui tools disable {row['tool']}",
                        "text": f"{row['tool']} asked {row['asks']} times {when} and you denied every one; "
                                "to stop offering it:"})
        if row["asks"] >= DENIED_MIN and t.class_source == "unknown":
            out.append({"kind": "classify", "command": f"palui tools suggest {t.connector}",
                        "text": f"{row['tool']} has no class (treated as destructive) and asked {row['asks']} "
                                f"times {when}; to see a suggested class for each unknown tool of {t.connector}:"})
    for row in numbers["not_offered"]["by_tool"]:
        t = tools.get(row["tool"])
        if (t is None or t.enabled or t.tool_class not in ("read", "write") or t.class_source == "unknown"
                or row["refused"] < REFUSED_MIN):
            continue
        out.append({"kind": "enable", "command": f"palui tools enable {row['tool']}",
                    "text": f"the model called {row['tool']} {row['refused']} times {when}, but it is switched off; "
                            f"if you want it offered ({t.tool_class}):"})
    for g in numbers.get("repeated") or []:
        t = tools.get(g["tool"])
        if (t is None or g["made"] or g["approvals"] < REPEATED_MIN or t.tool_class not in ("read", "write")
                or t.class_source == "unknown" or g["class"] not in ("read", "write")):
            continue
        out.append({"kind": "standing", "command": f"palui rules add {g['latest']}",
                    "text": f"you approved {g['tool']} {g['approvals']} times {when} with the same arguments in "
                            f"{g['context']}; to answer exactly that call in advance there (every argument "
                            "pinned):"})
    unique: dict[str, dict[str, str]] = {}
    for s in out:
        unique.setdefault(s["command"], s)  # one suggestion per command: the first, with the most evidence
    return list(unique.values())
