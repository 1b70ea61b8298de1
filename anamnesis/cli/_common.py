"""Small things every CLI module shares: the store, JSON output, consoles."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from anamnesis.paths import Store


def get_store(require: bool = True) -> Store:
    """The store at ANAMNESIS_HOME; with `require`, a clear error if it is not initialised."""
    from anamnesis.paths import open_store

    store = open_store()
    return store.require() if require else store


def print_json(data: Any) -> None:
    """Machine-readable output: one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def console(stderr: bool = False) -> Console:
    """A rich console (imported lazily: rich costs start-up time)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def read_stdin_if_piped() -> str | None:
    """stdin's text when it is a pipe or file, None when it is a terminal."""
    if sys.stdin is None or sys.stdin.isatty():
        return None
    return sys.stdin.read()


@contextmanager
def counting(what: str, quiet: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr for long work that counts (`what`: "indexing notes"); yields the
    `progress(done, total)` callback the core takes. `quiet` (say, with --json) shows nothing."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console(stderr=True),
        disable=quiet,
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)
