"""One public face per package: other packages use only what its `__init__` offers.

A domain package (and an adapter package) offers names by importing them in
its `__init__` under `if TYPE_CHECKING:`; `base.face.lazy_face` loads them on
first use. These tests read every import in anamnesis/ and hooks/ (top level,
inside functions and under TYPE_CHECKING alike) and fail on one that reaches
a private module of another package, and check that every offered name
exists. The base is the exception: each of its small modules is public.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

from anamnesis.base.face import lazy_face, offered_names

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "anamnesis"
OPEN_PACKAGES = {"base"}  # every module public


def _faced_packages(package_dir: Path = PACKAGE) -> dict[str, dict[str, tuple[str, str]]]:
    """{package name: what it offers} of every subpackage but the base.

    A lazy face offers its TYPE_CHECKING imports; a package whose `__init__`
    holds code (the CLI's app) offers the names its `__init__` binds.
    """
    faced = {}
    for init in sorted(package_dir.glob("*/__init__.py")):
        name = init.parent.name
        if name in OPEN_PACKAGES:
            continue
        lazy = lazy_face_names(init)
        if lazy is not None:
            faced[name] = lazy
        else:
            tree = ast.parse(init.read_text(encoding="utf-8"))
            faced[name] = {bound: (f"anamnesis.{name}", bound) for bound in _bound_names(tree)}
    return faced


def lazy_face_names(init: Path) -> dict[str, tuple[str, str]] | None:
    """What a package's `__init__` offers through `lazy_face`, or None when it is no lazy face."""
    if not init.is_file() or "lazy_face(__name__)" not in init.read_text(encoding="utf-8"):
        return None
    return offered_names(init)


def _bound_names(tree: ast.Module) -> set[str]:
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return bound


def _sources(root: Path = ROOT) -> list[tuple[Path, str | None]]:
    """Every source file of the package and of the hooks, with the package it belongs to."""
    found: list[tuple[Path, str | None]] = []
    for path in sorted((root / "anamnesis").rglob("*.py")):
        parts = path.relative_to(root / "anamnesis").parts
        found.append((path, parts[0] if len(parts) > 1 else None))
    found += [(path, "hooks") for path in sorted((root / "hooks").glob("*.py"))]
    return found


def face_violations(root: Path = ROOT, package_dir: Path | None = None) -> list[str]:
    """Imports that reach into another package past its face: `file:line: what`."""
    faced = _faced_packages(package_dir or root / "anamnesis")
    found = []
    for path, owner in _sources(root):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[tuple[str, str | None]] = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            for module, name in targets:
                parts = module.split(".")
                if parts[0] != "anamnesis" or len(parts) < 2 or parts[1] not in faced or parts[1] == owner:
                    continue
                offered = faced[parts[1]]
                where = f"{path.relative_to(root)}:{node.lineno}"
                if len(parts) > 2:
                    found.append(f"{where}: imports {module}, a private module of anamnesis.{parts[1]}")
                elif name is not None and name not in offered:
                    found.append(f"{where}: imports {name} from anamnesis.{parts[1]}, which does not offer it")
    return found


def test_no_package_reaches_past_another_ones_face() -> None:
    violations = face_violations()
    assert not violations, "\n".join(violations)


def test_the_domains_and_adapters_each_have_a_face() -> None:
    assert set(_faced_packages()) == {"store", "search", "sync", "agents", "importers", "app", "mcp", "cli", "web"}


@pytest.mark.parametrize("package", sorted(name for name, face in _faced_packages().items() if name != "cli"))
def test_every_offered_name_exists(package: str) -> None:
    module = importlib.import_module(f"anamnesis.{package}")
    submodules = {path.stem for path in (PACKAGE / package).glob("*.py")}
    for name, (source, attribute) in offered_names(Path(str(module.__file__))).items():
        # a submodule, once imported, is an attribute of its package and would hide the offered name
        assert name not in submodules, f"anamnesis.{package} offers {name}, the name of one of its modules"
        assert source.startswith(f"anamnesis.{package}."), f"{package} offers {name} from another package ({source})"
        assert getattr(module, name) is getattr(importlib.import_module(source), attribute)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018 - the attribute access is the test


def _toy(tmp_path: Path, files: dict[str, str]) -> Path:
    for relpath, text in files.items():
        path = tmp_path / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "hooks").mkdir(exist_ok=True)
    return tmp_path


FACE = (
    "from typing import TYPE_CHECKING\nfrom anamnesis.base.face import lazy_face\n"
    "if TYPE_CHECKING:\n    from anamnesis.shop.till import pay as pay\n"
    "__getattr__, __dir__ = lazy_face(__name__)\n"
)


def test_a_planted_reach_past_a_face_is_caught(tmp_path: Path) -> None:
    root = _toy(
        tmp_path,
        {
            "anamnesis/__init__.py": "",
            "anamnesis/shop/__init__.py": FACE,
            "anamnesis/shop/till.py": "def pay(): ...\ndef _refund(): ...\n",
            "anamnesis/shop/stock.py": "from anamnesis.shop.till import _refund\n",  # its own package: allowed
            "anamnesis/cafe/__init__.py": "",
            "anamnesis/cafe/menu.py": (
                "from anamnesis.shop import pay\n"  # through the face: allowed
                "def later():\n    from anamnesis.shop.till import _refund\n"
                "    from anamnesis.shop import stock\n"
            ),
        },
    )
    assert face_violations(root) == [
        "anamnesis/cafe/menu.py:3: imports anamnesis.shop.till, a private module of anamnesis.shop",
        "anamnesis/cafe/menu.py:4: imports stock from anamnesis.shop, which does not offer it",
    ]


def test_a_face_loads_nothing_until_a_name_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "lazytoy"
    package.mkdir()
    (package / "__init__.py").write_text(FACE.replace("anamnesis.shop.till", "lazytoy.till"), encoding="utf-8")
    (package / "till.py").write_text("def pay():\n    return 'paid'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = importlib.import_module("lazytoy")
    try:
        assert "lazytoy.till" not in sys.modules
        assert "pay" in dir(toy)
        assert toy.pay() == "paid"
        assert "lazytoy.till" in sys.modules
        getattr_, _ = lazy_face("lazytoy")
        with pytest.raises(AttributeError):
            getattr_("till_private")
    finally:
        for name in [name for name in sys.modules if name.startswith("lazytoy")]:
            del sys.modules[name]
