"""Faults of this machine made real for a test: a read-only mount, a full disk, files root cannot write.

Mounts are made in a mount namespace of their own (`unshare --mount`), so
they exist only for the commands run inside it and vanish with it, whatever
happens to the test: nothing is left mounted on the host. As root that is
plain `unshare`; as anyone else, a user namespace maps them to root first.
Root passes every permission check, so a test of "permission denied" runs
its command with the capabilities that let root do so dropped (`setpriv`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Runs inside the namespace: the setup commands (which must succeed), then each command, as JSON out.
_DRIVER = """
import json, subprocess, sys
spec = json.loads(sys.argv[1])
for cmd in spec["setup"]:
    subprocess.run(cmd, check=True, capture_output=True)
out = []
for cmd in spec["commands"]:
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=spec["timeout"])
    out.append({"args": cmd, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr})
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Ran:
    """One command run inside the namespace."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def in_mount_namespace(
    setup: Sequence[Sequence[str]],
    commands: Sequence[Sequence[str]],
    env: dict[str, str],
    timeout: float = 120,
) -> list[Ran]:
    """Run `setup` (mount commands), then `commands`, in a mount namespace of their own; what each did."""
    if shutil.which("unshare") is None:
        raise RuntimeError("unshare (util-linux) is needed for mount tests")
    prefix = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    spec = json.dumps({"setup": [list(c) for c in setup], "commands": [list(c) for c in commands], "timeout": timeout})
    proc = subprocess.run(
        [*prefix, sys.executable, "-c", _DRIVER, spec],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout * (len(commands) + 1),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the mount namespace failed: {proc.stderr[-2000:]}")
    return [Ran(**row) for row in json.loads(proc.stdout)]


def read_only_bind(folder: Path) -> list[list[str]]:
    """Setup commands that make `folder` read-only (a bind mount of itself, remounted read-only)."""
    return [["mount", "--bind", str(folder), str(folder)], ["mount", "-o", "remount,ro,bind", str(folder)]]


def small_disk(folder: Path, size: str, keep: Path) -> list[list[str]]:
    """Setup commands that put `folder` on a tmpfs of `size` with its current files copied over
    (through `keep`, a copy made first)."""
    return [
        ["cp", "-a", f"{folder}/.", str(keep)],
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        ["cp", "-a", f"{keep}/.", str(folder)],
    ]


def without_root_powers(command: Sequence[str]) -> list[str]:
    """`command` run so that permissions apply to it: as root, without the capabilities that let
    root write where it may not (as anyone else they apply anyway)."""
    if os.geteuid() != 0:
        return list(command)
    caps = "-dac_override,-dac_read_search,-fowner"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", *command]
