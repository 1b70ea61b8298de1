"""Small things every CLI module shares: the store, JSON output, consoles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from anamnesis.base.paths import Store


def get_store(require: bool = True) -> Store:
    """The store at ANAMNESIS_HOME; with `require`, a clear error if it is not initialised. A store
    of anamnesis-memory 0.1.3 there is refused either way, before anything reads or writes in it."""
    from anamnesis.base.paths import open_store  # lazy: --help imports this module but opens no store

    store = open_store().refuse_old()
    return store.require() if require else store


def print_json(data: Any) -> None:
    """Machine-readable output: one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def console(stderr: bool = False) -> Console:
    """A rich console (imported lazily: rich costs start-up time). Emoji codes are left as typed:
    a title, a path or ssh's words can hold `:fire:` or `host:abc:`, which must print as they are."""
    from rich.console import Console  # lazy: rich stays off --help and off piped search output

    return Console(stderr=stderr, highlight=False, soft_wrap=True, emoji=False)


def interactive() -> bool:
    """Whether a person is there to answer a question: stdin and stdout are both a terminal."""
    return sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty()


def ask(question: str, default: bool) -> bool | None:
    """A yes/no question on the terminal; Enter takes `default`.

    None when stdin ends before an answer (closed, Ctrl-D): the caller then
    does what it does with no terminal, and says which flag decides it, where
    click's confirm would only abort, with whatever was done so far unsaid.
    """
    choices = "[Y/n]" if default else "[y/N]"
    while True:
        sys.stdout.write(f"{question} {choices}: ")
        sys.stdout.flush()
        try:
            line = sys.stdin.readline() if sys.stdin is not None else ""
        except (OSError, ValueError):  # stdin closed under us
            line = ""
        if not line:  # end of input: no answer will come
            sys.stdout.write("\n")
            return None
        answer = line.strip().lower()
        if not answer:
            return default
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        sys.stdout.write("Please answer y or n.\n")


def no_answer(what: str, flags: str) -> str:
    """The report line for a question stdin closed on: what was done instead, and the flag to decide it."""
    return f"{what}: no answer (stdin was closed); pass {flags} to decide without a question"


def read_stdin_if_piped() -> str | None:
    """stdin's text when it is a pipe or file, None when it is a terminal."""
    if sys.stdin is None or sys.stdin.isatty():
        return None
    return sys.stdin.read()


@contextmanager
def counting(what: str, quiet: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr for long work that counts (`what`: "indexing notes"); yields the
    `progress(done, total)` callback the core takes. `quiet` (say, with --json) shows nothing."""
    # lazy: rich stays off --help and off piped search output
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    err = console(stderr=True)
    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet or not err.is_terminal,  # into a pipe or a log, a bar is only a stray blank line
        transient=True,
    )
    with shown(bar):
        task = bar.add_task(what, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@contextmanager
def shown(bar: Progress) -> Iterator[Progress]:
    """`bar` on screen for the block; its refresh thread leaves Ctrl-C to this one (see
    `signals_to_this_thread`), which `with Progress(...)` does not."""
    with signals_to_this_thread():
        bar.start()
    try:
        yield bar
    finally:
        bar.stop()


STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


@contextmanager
def signals_to_this_thread() -> Iterator[None]:
    """Threads started inside this block never receive Ctrl-C, SIGTERM or SIGHUP: they go to the
    thread that opened it (the main thread), where Python raises them.

    The kernel hands a process's signal to any thread that does not block it. Taken by a helper
    thread (rich's refresh thread), it does not interrupt what the main thread waits in (reading a
    slow mount, a FIFO, a hung pipe), and the command ignores Ctrl-C until that wait ends, which
    may be never. New threads inherit the signal mask of the thread that starts them."""
    import signal  # lazy: only the commands that start threads

    if not hasattr(signal, "pthread_sigmask"):  # not POSIX: nothing to steer
        yield
        return
    wanted = {getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def run_editor(path: Path, unchanged: str = "nothing was saved") -> None:
    """Open `path` in $VISUAL / $EDITOR (vi if neither is set) and wait for it; `unchanged` says
    what a failed editor means for the command (nothing saved, nothing committed)."""
    import shlex  # lazy: --help loads every command module; shlex only for $EDITOR

    from anamnesis.base.errors import AnamnesisError, UsageError  # lazy: --help loads every command module

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or ""
    if not editor:
        if sys.stdin is None or not sys.stdin.isatty():  # vi with no terminal waits forever
            raise UsageError("no $EDITOR set and no terminal to run vi in; set $EDITOR (or use --body / stdin)")
        editor = "vi"
    try:
        command = shlex.split(editor)
    except ValueError as exc:
        raise UsageError(f"cannot read $EDITOR {editor!r}: {exc}") from None
    try:
        code = subprocess.call([*command, str(path)])
    except FileNotFoundError:
        raise AnamnesisError(f"editor {editor!r} not found; set $EDITOR") from None
    if code != 0:
        raise AnamnesisError(f"editor {editor!r} exited with status {code}; {unchanged}")
