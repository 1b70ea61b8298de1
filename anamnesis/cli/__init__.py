"""The `anamnesis` command: a thin typer adapter over the core.

Each area registers its commands from its own module; command bodies import
the core lazily so `anamnesis --help` and quick commands start fast.
"""

from __future__ import annotations

import errno
import sys

import typer

from anamnesis import version_text
from anamnesis.cli import notes, semantic, setup

app = typer.Typer(
    name="anamnesis",
    help=(
        "Memory for coding agents that follows you across your machines.\n\n"
        "Notes are markdown files in ~/.anamnesis/memory (a git repo), synced between "
        "your machines with git and searched locally with SQLite FTS5. "
        "Start with `anamnesis init`, then `anamnesis new` and `anamnesis search`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        print(version_text())
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Say which program this is, and exit."
    ),
) -> None:
    """Memory for coding agents that follows you across your machines."""


def _register_all() -> None:
    setup.register(app)
    notes.register(app)
    semantic.register(app)
    for name in ("sync", "claude", "summary", "watch", "web", "importer", "projects", "timeline", "tidy"):
        __import__(f"anamnesis.cli.{name}", fromlist=["register"]).register(app)


_register_all()


def main() -> None:
    """Run the CLI; user-facing errors become one line on stderr and an exit code."""
    if sys.argv[1:] in (["--help"], ["-h"]):  # drawn without rich: see anamnesis.cli._help
        # lazy: only --help draws this hand-made screen; other commands skip it
        from anamnesis.cli._help import render

        sys.stdout.write(render(app))
        sys.exit(0)
    # lazy: after the --help exit, so --help does not load anamnesis.base.errors
    from anamnesis.base.errors import AnamnesisError

    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        print("anamnesis: aborted", file=sys.stderr)
        sys.exit(1)
    except AnamnesisError as exc:
        print(f"anamnesis: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file system refusal (home is a file, disk full, no permission)
        where = f": {exc.filename}" if exc.filename else ""
        print(f"anamnesis: error: {exc.strerror or exc}{where}", file=sys.stderr)
        sys.exit(8 if exc.errno in (errno.ENOSPC, errno.EDQUOT) else 1)  # 8: as DiskFull
    except Exception as exc:
        exit_code = getattr(exc, "exit_code", None)
        if hasattr(exc, "format_message") and isinstance(exit_code, int):
            # a usage error from the parser (typer keeps click's exception classes private)
            if type(exc).__name__ != "NoArgsIsHelpError":  # that one has printed the help already
                ctx = getattr(exc, "ctx", None)
                hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
                print(f"anamnesis: error: {exc.format_message()}{hint}", file=sys.stderr)
            sys.exit(exit_code)
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is None or not isinstance(exc, sqlite3.Error):
            raise
        # SQL run outside the index's own methods: told apart by SQLite's result code, as the index does
        # lazy: only an SQLite error needs it; keeps anamnesis.search.catalog off --help and --version
        from anamnesis.search import index_error

        mapped = index_error(exc)
        if isinstance(mapped, AnamnesisError):
            print(f"anamnesis: error: {mapped}", file=sys.stderr)
            sys.exit(mapped.exit_code)
        full = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in (10, 13)  # SQLITE_IOERR, SQLITE_FULL
        hint = "is the disk full? free some space and try again" if full else "run `anamnesis reindex`"
        print(f"anamnesis: error: the search index failed: {exc} ({hint})", file=sys.stderr)
        sys.exit(8 if full else 1)
    except KeyboardInterrupt:
        print("anamnesis: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)  # typer.Exit(n) comes back as n
