"""`anamnesis web`: the browser dashboard on this machine."""

from __future__ import annotations

import sys

import typer

from anamnesis.cli._common import get_store


def register(app: typer.Typer) -> None:
    app.command(name="web", rich_help_panel="Dashboard")(web)


def web(
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on. Keep the default (loopback) unless you know why."
    ),
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port to listen on (0-65535); 0 picks a free one."),
    no_open: bool = typer.Option(False, "--no-open", help="Do not open a browser; just print the address."),
) -> None:
    """Serve the dashboard: browse, search, edit, history, fleet, conflicts, memory map.

    Prints an address with a one-time token (every start makes a new one) and
    opens it in your browser. Stop it with Ctrl+C.

    Examples:
      anamnesis web
      anamnesis web --port 8765 --no-open
    """
    # lazy: keeps uvicorn and the web app off --help, which loads every command module
    from anamnesis.web import exposure_warning, serve

    store = get_store()
    warning = exposure_warning(host)
    if warning:
        typer.secho(warning, fg=typer.colors.RED, bold=True, err=True)

    def ready(url: str) -> None:
        print(f"Anamnesis dashboard: {url}", flush=True)
        print("Press Ctrl+C to stop.", file=sys.stderr, flush=True)
        if not no_open:
            import webbrowser  # lazy: only when a browser is to be opened

            try:
                webbrowser.open(url)
            except Exception:  # no browser here: the printed address is enough
                pass

    try:
        serve(store, host=host, port=port, on_ready=ready)
    except OSError as exc:
        from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module

        raise AnamnesisError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    except KeyboardInterrupt:
        pass
