"""`anamnesis mcp --http` started for a test: the real CLI in a subprocess, with the address and token
it printed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from conftest import cli_env
from procs import read_printed

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    token: str


@contextmanager
def served(home: Path, *args: str) -> Iterator[Served]:
    """Start `python -m anamnesis mcp --http --port 0` and yield the address and token it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", "mcp", "--http", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=cli_env(home, PYTHONUNBUFFERED="1"),
    )
    found = read_printed(proc, {"url": r"^Anamnesis MCP server: (http://\S+)", "token": r"^token: (\S+)"})
    try:
        if not {"url", "token"} <= found.keys():
            proc.kill()
            raise AssertionError(f"anamnesis mcp --http printed no address; stderr:\n{proc.communicate()[1]}")
        yield Served(proc, found["url"], found["token"])
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=15)
