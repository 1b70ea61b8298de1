"""`anamnesis semantic`: turn local semantic search on or off, and see how far embedding got."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from anamnesis.base.text import plural
from anamnesis.cli._common import console, counting, get_store, print_json, shown

if TYPE_CHECKING:
    pass

semantic_app = typer.Typer(
    help=(
        "Optional local semantic search: find notes by meaning, not only by their words.\n\n"
        "Runs fully offline on this machine's CPU once the model is here (about 90 MB); "
        "nothing leaves the machine. Needs the extra: `./scripts/install --semantic` in your clone.\n\n"
        "Examples:\n\n"
        "  anamnesis semantic enable              fetch the model, embed every note\n\n"
        "  anamnesis semantic status              on? which model? how many notes embedded\n\n"
        "  anamnesis semantic disable             keyword search only (vectors are kept)"
    ),
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(semantic_app, name="semantic", rich_help_panel="Search")


def embed_with_progress(quiet: bool = False, wait: bool = True) -> int:
    """Embed every note without a current vector, with a progress bar; returns how many."""
    from anamnesis.search import update_vectors  # lazy: --help loads every command module

    store = get_store()
    with counting("embedding notes", quiet) as progress:
        return update_vectors(store, progress=progress, wait=wait)


@semantic_app.command()
def enable(
    model_dir: Path | None = typer.Option(
        None,
        "--model-dir",
        help="A folder already holding the model (config.json, tokenizer.json, model.safetensors). "
        "Without it, the model is downloaded once from the public model hub.",
    ),
    background: bool = typer.Option(False, "--background", help="Embed the notes in the background and return at once."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Turn on semantic search for this machine and embed every note.

    Vectors stay on this machine (next to the search index) and are never
    synced. Embedding thousands of notes takes minutes; it is resumable, and
    search works meanwhile (notes not embedded yet are ranked by keywords).

    Examples:
      anamnesis semantic enable                       download the model once, then embed
      anamnesis semantic enable --model-dir ~/models/all-MiniLM-L6-v2
      anamnesis semantic enable --background          return at once; embedding goes on
    """
    # lazy: rich stays off --help, which loads every command module
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    from anamnesis.search import (
        enable_semantic,  # lazy: --help loads every command module
        start_background_update,  # lazy: --help loads every command module
    )

    store = get_store()
    if model_dir is not None:
        folder = enable_semantic(store, model_dir)
    else:
        bar = Progress(
            "[progress.description]{task.description}",
            DownloadColumn(),
            TransferSpeedColumn(),
            console=console(stderr=True),
            disable=json_out,
            transient=True,
        )
        with shown(bar):  # so that Ctrl-C stops the download (see `shown`)
            task = bar.add_task("downloading the model", total=None)
            folder = enable_semantic(
                store, None, progress=lambda done, total: bar.update(task, completed=done, total=total or None)
            )
    embedded = 0
    if background:
        start_background_update(store)
    else:
        embedded = embed_with_progress(quiet=json_out)
    if json_out:
        print_json({"enabled": True, "model_dir": str(folder), "embedded": embedded, "background": background})
        return
    out = console()
    out.print(f"[green]✔[/green] semantic search on (model in {folder})")
    if background:
        out.print("  embedding notes in the background; `anamnesis semantic status` shows how far it got")
    else:
        out.print(f"  embedded {plural(embedded, 'note')}")
    from anamnesis.search import server_answering  # lazy: --help loads every command module

    if not server_answering(store):
        out.print(
            "  tip: the first prompt of a session and the first of a run of searches load the model;"
            " `anamnesis watch` (`anamnesis schedule install --watch`) keeps it loaded for all of them"
        )


@semantic_app.command()
def disable(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Turn semantic search off here (keyword search only). Vectors are kept for a later enable.

    Examples:
      anamnesis semantic disable
      anamnesis semantic disable --json
    """
    from anamnesis.search import disable_semantic  # lazy: --help loads every command module

    disable_semantic(get_store())
    if json_out:
        print_json({"enabled": False})
    else:
        console().print("[green]✔[/green] semantic search off: keyword search only")


@semantic_app.command()
def status(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Is semantic search on, which model, and how many notes have vectors.

    Examples:
      anamnesis semantic status
      anamnesis semantic status --json | jq .pending
    """
    from anamnesis.search import semantic_status  # lazy: --help loads every command module

    info = semantic_status(get_store())
    if json_out:
        print_json(info)
        return
    out = console()
    if not info["active"]:
        out.print(f"semantic search: {info['reason']}")
        return
    running = " (embedding now)" if info.get("embedding_now") else ""
    out.print(f"semantic search: on, model {info['fingerprint']} in {info['model_dir']}")
    out.print(f"  {info['embedded']} of {plural(info['notes'], 'note')} embedded, {info['pending']} waiting{running}")
    if info.get("query_server"):
        out.print("  queries answered by a running server (watch or `semantic serve`): hooks load no model")
    else:
        out.print("  no query server: each hook and search loads the model (`anamnesis watch` keeps it loaded)")


@semantic_app.command()
def update(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar (for background runs)."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Embed the notes that have no current vector (what runs in the background after changes).

    Examples:
      anamnesis semantic update
    """
    embedded = embed_with_progress(quiet=quiet or json_out, wait=not quiet)
    if json_out:
        print_json({"embedded": embedded})
    elif not quiet:
        console().print(f"embedded {plural(embedded, 'note')}")


@semantic_app.command()
def serve(
    idle: float = typer.Option(
        0, "--idle", help="Exit after this many seconds without a question (0: run until stopped)."
    ),
) -> None:
    """Keep the model loaded and answer the hooks' and searches' semantic queries.

    Without it, every hook and search with semantic search on loads the model itself
    (a few hundred milliseconds). `anamnesis watch` does this too; run this only when
    watch does not run. Answers on a unix socket in the store's state folder (this user
    only); stops on Ctrl-C or SIGTERM.

    Examples:
      anamnesis semantic serve
      anamnesis semantic serve --idle 3600     exit after an hour without questions
    """
    import signal  # lazy: --help loads every command module
    import threading  # lazy: --help loads every command module

    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.search import SemanticError, socket_path, unavailable_reason  # lazy: as above
    from anamnesis.search import serve as serve_queries  # lazy: --help loads every command module

    if idle < 0:
        raise UsageError("--idle must be 0 or more seconds")
    store = get_store()
    reason = unavailable_reason(store)
    if reason is not None:
        raise SemanticError(f"semantic search is {reason}")
    stop = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, request_stop)
    console().print(f"answering semantic queries on {socket_path(store)} (Ctrl-C stops)")
    if not serve_queries(store, stop, idle=idle or None):
        raise SemanticError(
            f"cannot answer on {socket_path(store)}: another process (watch?) already does, or the path is too long"
        )
