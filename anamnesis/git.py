"""The one way Anamnesis runs git: the real binary, never a prompt, clear errors.

GitPython wraps the same binary; calling it directly keeps the start-up of
hooks and `sync` fast and the error text exactly git's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from anamnesis.errors import GitError

SSH_COMMAND = "ssh -o BatchMode=yes -o ConnectTimeout=5 -o ServerAliveInterval=5 -o ServerAliveCountMax=2"


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment where git never waits for a human and speaks English."""
    env = dict(os.environ)
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "GIT_EDITOR": "true",
            "GIT_MERGE_AUTOEDIT": "no",
        }
    )
    env.setdefault("GIT_SSH_COMMAND", SSH_COMMAND)
    if extra:
        env.update(extra)
    return env


def _run(
    repo: Path,
    args: tuple[str, ...],
    input: str | bytes | None,
    text: bool,
    check: bool,
    timeout: float | None,
    env: dict[str, str] | None,
) -> subprocess.CompletedProcess[Any]:
    cmd = ["git", "-C", str(repo), "-c", "core.quotepath=off", *args]
    try:
        proc = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            text=text,
            # file names that are not valid UTF-8 survive the round trip instead of crashing
            encoding="utf-8" if text else None,
            errors="surrogateescape" if text else None,
            timeout=timeout,
            env=git_env(env),
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0] if args else ''} timed out after {timeout}s") from exc
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args[:2])} failed: {_reason(proc.stderr or proc.stdout, proc.returncode)}")
    return proc


def _reason(output: str | bytes, code: int) -> str:
    """git's own words for a failure: its fatal/error line if it printed one, else its last line."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[-1] if lines else f"exit status {code}"


def run_git(
    repo: Path,
    *args: str,
    check: bool = True,
    input: str | None = None,
    timeout: float | None = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `git -C repo args...`; raise GitError (with git's stderr) if `check` and it fails."""
    return _run(repo, args, input, True, check, timeout, env)


def git_out(repo: Path, *args: str, timeout: float | None = 120) -> str:
    """stdout of a git command that must succeed, stripped."""
    return run_git(repo, *args, timeout=timeout).stdout.strip()


def run_git_bytes(
    repo: Path,
    *args: str,
    input: bytes | None = None,
    check: bool = True,
    timeout: float | None = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`run_git` for raw bytes in and out: blobs of any encoding, NUL-separated listings."""
    return _run(repo, args, input, False, check, timeout, env)
