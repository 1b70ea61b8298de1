"""`anamnesis mcp --http` started for a test: the real CLI in a subprocess, with the address and token
it printed."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from conftest import cli_env

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
    found: dict[str, str] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if match := re.match(r"Anamnesis MCP server: (http://\S+)", line):
                found["url"] = match.group(1)
            if match := re.match(r"token: (\S+)", line):
                found["token"] = match.group(1)
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    try:
        if "token" not in found:
            proc.kill()
            raise AssertionError(f"anamnesis mcp --http printed no address; stderr:\n{proc.communicate()[1]}")
        yield Served(proc, found["url"], found["token"])
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=15)
