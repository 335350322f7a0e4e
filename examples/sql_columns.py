"""A user-written monitor: after ``table.`` (or ``alias.``) in SQL, only that table's
columns, read from the database's own catalogue.

The callback asks SQLite which columns a table has (``pragma_table_info``), so the
model cannot write a column the table lacks, whatever the schema is today. An alias
declared earlier in the text (``FROM orders o`` or ``FROM orders AS o``, ``JOIN ...``)
stands for its table. A name that is neither a table nor an alias gets no constraint
(``None``): ``COUNT(*).`` or a schema name is left alone.

Run it (free text, or under a SQL grammar as well)::

    python examples/sql_columns.py path/to/model "SELECT o.total FROM orders o WHERE o."

With vLLM, register it by name where the server starts (see ``docs/monitors.md``):
``CORRAL_MONITORS=sql_columns=sql_columns:monitor`` with this file on the path, and the
database the engine can read.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from typing import Any

import corral

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_OWNER = re.compile(rf"({_NAME})\.$")
_ALIAS = re.compile(rf"\b(?:FROM|JOIN)\s+({_NAME})(?:\s+AS)?\s+({_NAME})", re.IGNORECASE)
_KEYWORDS = {"where", "join", "on", "group", "order", "left", "right", "inner", "outer",
             "full", "cross", "limit", "union", "having", "natural", "using"}  # fmt: skip


def columns_of(connection: sqlite3.Connection, text: str) -> list[str] | None:
    """The columns of the table (or alias) ``text`` ends with, followed by a dot, in the
    order the table declares them; ``None`` if ``text`` does not end with a table's name
    or alias."""
    owner = _OWNER.search(text)
    if owner is None:
        return None
    name = owner.group(1)
    aliases = {a.lower(): t for t, a in _ALIAS.findall(text) if a.lower() not in _KEYWORDS}
    table = aliases.get(name.lower(), name)
    rows = connection.execute("SELECT name FROM pragma_table_info(?)", (table,)).fetchall()
    return [r[0] for r in rows] or None


def sql_columns(connection: sqlite3.Connection) -> corral.Monitor:
    """The monitor: it fires after a name and a dot (not after a digit or another dot)."""

    def allowed(ctx: corral.MonitorContext) -> list[str] | None:
        return columns_of(connection, ctx.prompt + ctx.text)

    return corral.Monitor(trigger=rf"(?<![\w.]){_NAME}\.", allowed=allowed, name="sql_columns")


def monitor() -> corral.Monitor:
    """The monitor over the database named by ``SQL_COLUMNS_DB`` (for a server that
    registers monitors by name: ``CORRAL_MONITORS=sql_columns=sql_columns:monitor``)."""
    import os

    return sql_columns(sqlite3.connect(os.environ["SQL_COLUMNS_DB"], check_same_thread=False))


def _demo(model: str, prompt: str) -> Any:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.executescript(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT);"
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL,"
        " placed_at TEXT);"
    )
    return corral.generate(model, prompt, monitors=[sql_columns(db)], max_new_tokens=24)


if __name__ == "__main__":
    print(_demo(sys.argv[1], sys.argv[2]))
