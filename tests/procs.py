"""Ending the processes a test started: politely first, by force if they do not listen."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, grace: float = 5) -> None:
    """Send `sig`, wait up to `grace` seconds, then SIGKILL; returns once the process is gone."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
