"""A package's public face, loaded on first use.

Each domain package (store, search, sync, agents, importers, app) names what
other packages may use by importing it in its `__init__` under
`if TYPE_CHECKING:` — what readers, type checkers and tests/architecture/test_faces.py see.
At run time nothing is imported until a name is first used: `lazy_face` reads
those import lines once and loads each name from its module on demand. A hook
that needs two functions of the store must not pay for the whole store, the
search engine and the sync engine at start (docs/architecture.md).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path


def offered_names(init_file: str | Path) -> dict[str, tuple[str, str]]:
    """{name: (module, attribute)} of what a package's `__init__` imports under `if TYPE_CHECKING:`."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    offered: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    offered[alias.asname or alias.name] = (statement.module, alias.name)
    return offered


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def lazy_face(package: str) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a package whose face loads on first use."""
    found: dict[str, tuple[str, str]] = {}

    def offered() -> dict[str, tuple[str, str]]:
        if not found:
            found.update(offered_names(str(sys.modules[package].__file__)))
        return found

    def __getattr__(name: str) -> object:
        where = offered().get(name)
        if where is None:  # a submodule: `from package import module` then imports it
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = where
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)  # the next use is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(offered()))

    return __getattr__, __dir__
