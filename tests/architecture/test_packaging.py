"""A plain (non-editable) `pip install .` in a fresh venv works: templates and hooks ship."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_wheel_ships_templates_and_hooks_and_installs(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    wheel = next(dist.glob("anamnesis_memory-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "anamnesis/templates/note-procedural.md" in names
    assert "anamnesis/hooks/__init__.py" in names
    assert not any(name.startswith(("tests/", "bench/")) for name in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True, text=True, timeout=600
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    home = tmp_path / "home"
    env = {"ANAMNESIS_HOME": str(home), "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    cli = str(venv / "bin" / "anamnesis")
    run = lambda *a: subprocess.run([cli, *a], capture_output=True, text=True, env=env, cwd=tmp_path)  # noqa: E731
    assert run("init", "--local-only").returncode == 0
    made = run("new", "Packaged", "--global", "--body", "installed from a wheel")
    assert made.returncode == 0, made.stderr
    assert "Packaged" in run("search", "wheel").stdout
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from anamnesis.base.resources import template_path; print(template_path('note-semantic.md'))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert str(venv) in where
