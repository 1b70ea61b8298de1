"""Running `anamnesis` for a test (in this process, or as a real one) and ending the processes a test started."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
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


ROOT = Path(__file__).resolve().parent.parent


def read_printed(proc: subprocess.Popen[str], patterns: Mapping[str, str], timeout: float = 30) -> dict[str, str]:
    """What a server process prints as it starts: for each name of `patterns`, the first group of
    the first stdout line its regex finds, read in a thread until each is found or `timeout` passes
    (the output goes on unread after that; a name not found is missing from the result)."""
    import re
    import threading

    found: dict[str, str] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            for name, pattern in patterns.items():
                if name not in found and (match := re.search(pattern, line)):
                    found[name] = match.group(1)
            if len(found) == len(patterns):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=timeout)
    return dict(found)


def clone_working_tree(dest: Path) -> None:
    """A fresh git clone of this checkout at `dest`, with the working tree's uncommitted changes and new
    files copied in: the scripts are tested as a new user runs them, on the code being tested."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-m", "-o", "--exclude-standard"], capture_output=True, text=True
    ).stdout.split()
    for path in changed:
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / path).is_file():
            target.write_bytes((ROOT / path).read_bytes())
            target.chmod((ROOT / path).stat().st_mode)


def run_in_terminal(
    cmd: list[str], env: dict[str, str], answers: list[tuple[str, str]], timeout: float, expect: int = 0
) -> str:
    """Run `cmd` on a pseudo-terminal (so it asks its questions), answering each prompt once it shows
    (an answer of "\x04" is Ctrl-D: the input ends); checks it exits with `expect`, returns what it showed."""
    master, slave = os.openpty()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    output = b""
    pending = list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
                if pending and pending[0][0] in output.decode("utf-8", "replace"):
                    os.write(master, pending.pop(0)[1].encode())
            elif proc.poll() is not None:
                break
        else:
            raise AssertionError(f"{cmd} did not finish in {timeout}s; it said: {output.decode(errors='replace')}")
        assert proc.wait(timeout=30) == expect, output.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    assert not pending, f"never asked {pending}; said: {output.decode(errors='replace')}"
    return output.decode("utf-8", "replace").replace("\r\n", "\n")


def run_anamnesis(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    input: str = "",
    cwd: Path | None = None,
    timeout: float = 60,
    real_process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the `anamnesis` command with exactly the environment `env`, in this process or in a new one.

    In-process (the default) calls the same `anamnesis.cli.main` a real
    process runs, so parsing, error lines and exit codes come from the same
    code; it only skips the interpreter start-up, which costs far more than
    most commands. `real_process=True` starts `python -m anamnesis` instead,
    for what only a process shows: start-up, `__main__`, locks held by
    another process, signals, exit codes as a shell sees them. `timeout`
    bounds a real process; in-process, the test's own timeout does.
    """
    if real_process:
        return subprocess.run(
            [sys.executable, "-m", "anamnesis", *args],
            input=input,
            capture_output=True,
            text=True,
            cwd=cwd or ROOT,
            env=dict(env),
            timeout=timeout,
        )
    from anamnesis import cli

    return _run_in_process(cli.main, "anamnesis.__main__", list(args), env, input=input, cwd=cwd or ROOT)


def run_hook_process(
    event: str,
    payload: str,
    env: Mapping[str, str],
    *,
    cwd: Path | None = None,
    timeout: float = 60,
    real_process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run one Claude Code hook event with `payload` on stdin, in this process or as a real one.

    `real_process=True` runs `python -P -m anamnesis.hooks EVENT` exactly as
    `anamnesis init` registers it; in-process calls the same `main` that
    command runs, for tests about what a hook writes rather than how it starts.
    """
    if real_process:
        return subprocess.run(
            [sys.executable, "-P", "-m", "anamnesis.hooks", event],
            input=payload,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=dict(env),
            timeout=timeout,
        )
    from anamnesis.hooks.run import main

    def hook() -> None:
        sys.exit(main([event]))

    return _run_in_process(hook, "anamnesis.hooks.__main__", [event], env, input=payload, cwd=cwd or Path.cwd())


def _run_in_process(
    entry: Callable[[], object],
    main_module: str,
    args: list[str],
    env: Mapping[str, str],
    *,
    input: str,
    cwd: Path,
) -> subprocess.CompletedProcess[str]:
    """Call `entry` as `python -m MAIN_MODULE ARGS` would run it: stdin, stdout, stderr, argv, cwd,
    the environment and `__main__` (the parser names the program after it) swapped in for the call
    and put back afterwards; SystemExit and uncaught errors become the exit code."""
    import importlib.util
    import types

    from typer.testing import CliRunner

    spec = importlib.util.find_spec(main_module)
    assert spec is not None and spec.origin is not None, main_module
    stand_in = types.ModuleType("__main__")
    stand_in.__spec__ = spec
    stand_in.__file__ = spec.origin
    stand_in.__package__ = spec.parent
    argv = [spec.origin, *args]

    changes: dict[str, str | None] = {key: None for key in os.environ if key not in env}
    changes.update({key: value for key, value in env.items() if os.environ.get(key) != value})
    saved_argv, saved_cwd, saved_main = sys.argv, os.getcwd(), sys.modules["__main__"]
    code: int = 0
    with CliRunner().isolation(input=input, env=changes) as (out, err, _both):
        sys.argv = list(argv)
        sys.modules["__main__"] = stand_in
        os.chdir(cwd)
        try:
            entry()
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except Exception:  # what an uncaught exception does to a real process: a traceback, exit 1
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            sys.argv = saved_argv
            sys.modules["__main__"] = saved_main
            os.chdir(saved_cwd)
            sys.stdout.flush()
            sys.stderr.flush()
        stdout = out.getvalue().decode("utf-8", errors="replace")
        stderr = err.getvalue().decode("utf-8", errors="replace")
    return subprocess.CompletedProcess(argv, code, stdout, stderr)


def _exit_code(code: object) -> int:
    """The process exit status `sys.exit(code)` would give."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1
