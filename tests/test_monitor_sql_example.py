"""The user-written monitor of ``examples/sql_columns.py``: columns from SQLite's own
catalogue after ``table.`` or ``alias.``, in generation with a random tiny model (whose
free choice would be any token)."""

from __future__ import annotations

import re
import sqlite3
import sys
from pathlib import Path

import pytest
from support.tiny_models import tiny_llama
from support.tokenizers import load_tokenizer

import corral

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from sql_columns import columns_of, sql_columns

COLUMNS = {
    "orders": ["id", "customer_id", "total", "placed_at"],
    "customers": ["id", "name", "email"],
}


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:", check_same_thread=False)
    con.executescript(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT);"
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL,"
        " placed_at TEXT);"
    )
    return con


def test_the_catalogue_answers_for_tables_and_aliases(db: sqlite3.Connection) -> None:
    assert columns_of(db, "SELECT orders.") == COLUMNS["orders"]
    assert (
        columns_of(db, "SELECT c.name FROM customers c JOIN orders AS o ON o.")
        == (COLUMNS["orders"])
    )
    assert columns_of(db, "SELECT c.name FROM customers c WHERE c.") == COLUMNS["customers"]
    assert columns_of(db, "SELECT x.") is None  # no such table or alias: unconstrained
    assert columns_of(db, "SELECT orders") is None  # no dot


def test_generation_writes_only_the_tables_columns(db: sqlite3.Connection) -> None:
    """A random model after ``o.`` (``o`` an alias of ``orders``) and after
    ``customers.``: the identifier it writes is a column of that table, then the
    identifier ends."""
    tok = load_tokenizer("gpt2")
    model = tiny_llama(tok, seed=7)
    monitor = sql_columns(db)
    for prompt, table in (
        ("SELECT o.total FROM orders o WHERE o.", "orders"),
        ("SELECT customers.", "customers"),
    ):
        for seed in range(3):
            out = corral.generate(
                model, prompt, tokenizer=tok, monitors=[monitor], temperature=1.0,
                seed=seed, max_new_tokens=6,
            )  # fmt: skip
            m = re.match(r"[A-Za-z0-9_]+", out)
            assert m is not None and m.group(0) in COLUMNS[table], (prompt, out)
