"""Claude Code commands: mcp, hook, inject, capture (init and uninstall are in cli/setup.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from anamnesis.cli._common import console, get_store, print_json


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Claude Code")(mcp)
    app.command(rich_help_panel="Claude Code")(hook)
    app.command(rich_help_panel="Claude Code")(inject)
    app.command(rich_help_panel="Claude Code")(capture)


def mcp(
    http: bool = typer.Option(False, "--http", help="Serve over streamable HTTP on loopback instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --http: a loopback address (127.0.0.1, ::1)."),
    port: int = typer.Option(8765, "--port", help="With --http: the port (1-65535); 0 picks a free one."),
    new_token: bool = typer.Option(False, "--new-token", help="With --http: replace the kept token."),
) -> None:
    """Run the MCP server: on stdin/stdout (Claude Code starts this itself after `anamnesis init`),
    or with --http at http://127.0.0.1:8765/mcp for clients that connect to a URL.

    With --http it prints the URL and the token a client must send, as
    `Authorization: Bearer TOKEN` or with `?token=TOKEN` added to the URL. The
    token is kept in the store's state folder (state/mcp-http.token, readable
    by you only) and is the same every run, so a client is set up once;
    --new-token replaces it. Only loopback addresses are served. Stop it with
    Ctrl+C.

    Examples:
      anamnesis mcp --http
      claude mcp add --transport http anamnesis http://127.0.0.1:8765/mcp \\
        --header "Authorization: Bearer TOKEN"
    """
    if not http:
        from anamnesis.mcp import serve  # lazy: --help loads every command module; the SDK is for mcp only

        serve(get_store(require=False))
        return
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module
    from anamnesis.mcp import serve_http  # lazy: as above

    def ready(url: str, token: str) -> None:
        print(f"Anamnesis MCP server: {url}", flush=True)
        print(f"token: {token}  (send `Authorization: Bearer {token}`, or use {url}?token={token})", flush=True)
        print("Press Ctrl+C to stop.", file=sys.stderr, flush=True)

    try:
        serve_http(get_store(), host=host, port=port, renew_token=new_token, on_ready=ready)
    except OSError as exc:
        raise AnamnesisError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    except KeyboardInterrupt:
        pass


def hook(
    event: str = typer.Argument(..., help="session-start, user-prompt-submit, pre-compact or session-end."),
) -> None:
    """Run a Claude Code hook by hand (reads the event JSON on stdin; what Claude Code runs is
    `python -P -m anamnesis.hooks EVENT`, which starts faster).

    Examples:
      echo '{"cwd": "'$PWD'", "session_id": "t1"}' | anamnesis hook session-start
      echo '{"cwd": "'$PWD'", "prompt": "how do we deploy?"}' | anamnesis hook user-prompt-submit
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.hooks.run import EVENTS, event_argument, main  # lazy: as above

    if event_argument(event) not in EVENTS:  # what Claude Code runs only logs it: a hook never fails a session
        raise UsageError(f"unknown hook event {event!r}: use one of {', '.join(EVENTS)}")
    raise typer.Exit(main([event]))


def inject(
    cwd: Path = typer.Option(Path("."), "--cwd", help="The project folder to build the context for."),
    budget: int | None = typer.Option(
        None, "--budget", help="Characters (default: settings, 6000; max 9500)."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print JSON: the text, its length and the notes it shows."
    ),
) -> None:
    """Print what the SessionStart hook would inject for a session in this folder.

    Examples:
      anamnesis inject                           for a session started here
      anamnesis inject --cwd ~/src/api --json    the notes it picks and the text's length
      anamnesis inject --budget 3000
    """
    from anamnesis.agents import build_context  # lazy: --help loads every command module

    store = get_store()
    text, shown = build_context(store, cwd.resolve(), budget=budget)
    if json_out:
        print_json({"chars": len(text), "notes": shown, "additionalContext": text})
    elif text:
        print(text, end="")
    else:
        console(stderr=True).print("nothing to inject for this project")


def capture(
    transcript: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="A session transcript (.jsonl) of Claude Code or Gemini CLI."
    ),
    agent: str = typer.Option(
        "claude-code", "--agent", help="Whose transcript it is: claude-code or gemini-cli."
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Write (or update) the session note of a transcript, as the SessionEnd hook does.

    Examples:
      anamnesis capture ~/.claude/projects/-home-me-src-api/3f1c….jsonl
      anamnesis capture session.json --agent gemini-cli --json
    """
    from anamnesis.agents import NO_SESSION, TRANSCRIPT_AGENTS  # lazy: --help loads every command module
    from anamnesis.agents import capture_session as run_capture  # lazy: --help loads every command module
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module

    if agent not in TRANSCRIPT_AGENTS:
        raise UsageError(f"unknown agent {agent!r}: use one of {', '.join(TRANSCRIPT_AGENTS)}")
    store = get_store()
    result = run_capture(store, transcript, event="manual", agent=agent)
    if json_out:
        print_json({"action": result.action, "path": result.path, "reason": result.reason})
    elif result.path:
        console().print(f"[green]✔[/green] {result.action} {store.memory / result.path}")
    elif result.reason == NO_SESSION:
        raise UsageError(f"nothing written: {transcript} is not a {agent} transcript (no session id in it)")
    else:
        console().print(f"nothing written: {result.reason}")
