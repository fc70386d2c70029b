"""Service part: what the Rule of Two looks at that the person sets (spec §4.5).

- a tool flagged "reaches outside" (``palui tools reaches-outside NAME…``): besides ``web__fetch_page``
  and MCP tools with ``openWorldHint: true``, the tools whose calls can carry data out;
- a connector marked private (``palui connectors private ID``): its results count as the person's
  private data, like memories and tasks.
"""

from __future__ import annotations

from palui.service.tools import ToolsPart
from palui.store.db import Database
from palui.store.tools import ToolRow


class RuleOfTwoPart:
    """The person's flags for the Rule of Two.

    Args:
        db: the database (tools, connectors).
        tools_part: finds the tools and connectors named.
    """

    def __init__(self, db: Database, tools_part: ToolsPart) -> None:
        self.db = db
        self.tools_part = tools_part

    def set_reaches_outside(self, names: list[str], on: bool = True) -> list[ToolRow]:
        """Flag tools as reaching outside (or drop the flag). All names are checked first. Raises NotFound."""
        rows = [self.tools_part.get(n) for n in names]
        with self.db.write() as c:
            for r in rows:
                c.execute("UPDATE tools SET reaches_outside = ? WHERE connector_id = ? AND raw_name = ?",
                          (int(on), r.connector, r.tool))
        return [self.tools_part.get(r.name) for r in rows]

    def set_private(self, connector: str, on: bool = True) -> None:
        """Mark a connector's results private (or not). Raises NotFound."""
        self.tools_part.require_connector(connector)
        with self.db.write() as c:
            c.execute("UPDATE connectors SET private = ? WHERE id = ?", (int(on), connector))
