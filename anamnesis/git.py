"""The one way Anamnesis runs git: the real binary, never a prompt, clear errors.

GitPython wraps the same binary; calling it directly keeps the start-up of
hooks and `sync` fast and the error text exactly git's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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


def run_git(
    repo: Path,
    *args: str,
    check: bool = True,
    input: str | None = None,
    timeout: float | None = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `git -C repo args...`; raise GitError (with git's stderr) if `check` and it fails."""
    cmd = ["git", "-C", str(repo), "-c", "core.quotepath=off", *args]
    try:
        proc = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=git_env(env),
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0] if args else ''} timed out after {timeout}s") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(f"git {' '.join(args[:2])} failed: {detail[-1] if detail else proc.returncode}")
    return proc


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
    cmd = ["git", "-C", str(repo), "-c", "core.quotepath=off", *args]
    try:
        proc = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            timeout=timeout,
            env=git_env(env),
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0] if args else ''} timed out after {timeout}s") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {' '.join(args[:2])} failed: {detail[-1] if detail else proc.returncode}")
    return proc
