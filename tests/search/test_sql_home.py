"""SQL against the index lives in two modules: `anamnesis.search.catalog` (reading) and `anamnesis.search.index` (writing).

Everything else — the web and CLI adapters, doctor, the store, the rankers, semantic search —
asks a named `Catalog`/`Index` method, so the schema can change in one place and a query has
one name to be found by. This scan keeps it so, as tests/architecture/test_imports.py does for lazy imports:
a call to `.execute`/`.executemany`/`.executescript`, a string that reads as an SQL
statement, or a reach for the raw `.conn` anywhere else in the package or the hooks fails the suite.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "anamnesis", ROOT / "hooks"]
ALLOWED = {ROOT / "anamnesis" / "search" / "catalog.py", ROOT / "anamnesis" / "search" / "index.py"}
EXECUTE = {"execute", "executemany", "executescript"}
# statements as they start, uppercase as this code base writes its SQL; prose says "select" in lowercase
STATEMENT = re.compile(
    r"\b(SELECT\b.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX|VIRTUAL)"
    r"|DROP\s+(TABLE|INDEX)|ALTER\s+TABLE|PRAGMA\s+\w+|BEGIN\s+IMMEDIATE)\b",
    re.DOTALL,
)


def sql_found(source: str) -> list[tuple[int, str]]:
    """(line, what) for every SQL call and SQL text in one module's source."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if id(node) in parts:  # read with the f-string it belongs to
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTE:
            found.append((node.lineno, f".{node.func.attr}(…)"))
        elif isinstance(node, ast.Attribute) and node.attr == "conn":  # the raw connection, past the methods
            found.append((node.lineno, ".conn"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and STATEMENT.search(node.value):
            found.append((node.lineno, node.value.strip()[:60]))
        elif isinstance(node, ast.JoinedStr):  # an f-string: its literal parts read together
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if STATEMENT.search(text):
                found.append((node.lineno, text.strip()[:60]))
    return found


def test_sql_lives_in_the_catalog_and_the_index_only() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for base in SOURCES
        for path in sorted(base.rglob("*.py"))
        if path not in ALLOWED
        for line, what in sql_found(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "SQL outside anamnesis/search/catalog.py and anamnesis/search/index.py; give it a Catalog/Index method:\n" + (
        "\n".join(offenders)
    )


def test_the_allowed_modules_do_hold_the_sql() -> None:
    """The scan is not blind: it finds the queries where they are meant to be."""
    for path in ALLOWED:
        assert len(sql_found(path.read_text(encoding="utf-8"))) > 10, path


def test_the_scan_catches_each_shape_of_query() -> None:
    planted = {
        'rows = index.conn.execute("SELECT path FROM notes")': 3,  # the connection, the call and the text
        "busy = index.conn.in_transaction": 1,
        'conn.executemany(sql, rows)': 1,
        'def f(where):\n    return f"SELECT n.rowid FROM notes n WHERE 1=1{where}"': 1,
        'SQL = "INSERT OR REPLACE INTO vectors(note) VALUES (?)"': 1,
        'q = ("SELECT id, title"\n     " FROM notes")': 1,  # implicit concatenation is one constant
    }
    for source, count in planted.items():
        assert len(sql_found(source)) == count, source
    harmless = 'print("select the notes from the list"); msg = "Update the index"; sock.connect(path)'
    assert sql_found(harmless) == []
