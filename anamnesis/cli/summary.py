"""`anamnesis summary`: the opt-in model-written summary of session notes (see summarize_model)."""

from __future__ import annotations

from pathlib import Path

import typer

from anamnesis.cli._common import console, get_store, print_json

summary_app = typer.Typer(
    help=(
        "Opt-in: a model-written summary added to each session note, off by default.\n\n"
        "The deterministic session note is always written; with this on, a detached process "
        "then asks your own Claude Code (`claude -p`) or the Anthropic API for a short summary "
        "(done, decided, open) of the redacted session digest and adds it to the note. "
        "It uses your model quota or API credit.\n\n"
        "Examples:\n\n"
        "  anamnesis summary enable               with your Claude Code's small model\n\n"
        "  anamnesis summary status               on? which model? can it run now?\n\n"
        "  anamnesis summary disable"
    ),
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(summary_app, name="summary", rich_help_panel="Claude Code")


@summary_app.command()
def enable(
    provider: str = typer.Option(
        "claude",
        "--provider",
        help="claude (your Claude Code, headless) or api (the Anthropic Messages API).",
    ),
    model: str | None = typer.Option(
        None, "--model", help="Model name or alias (claude: haiku; api: claude-haiku-4-5)."
    ),
    claude_bin: str | None = typer.Option(
        None, "--claude-bin", help="The Claude Code binary (default: claude on PATH)."
    ),
    key_env: str | None = typer.Option(
        None,
        "--key-env",
        help="api: the NAME of the environment variable holding the key (default ANTHROPIC_API_KEY).",
    ),
    key_file: str | None = typer.Option(
        None,
        "--key-file",
        help="api: a file holding the key (outside ~/.anamnesis/memory); used instead of --key-env.",
    ),
    base_url: str | None = typer.Option(
        None, "--base-url", help="api: the API's base URL (default $ANTHROPIC_BASE_URL, else the public API)."
    ),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds the model may take (default 120)."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Turn on the model-written summary for this machine (settings.json; never synced).

    Examples:
      anamnesis summary enable                                   your Claude Code, its small model
      anamnesis summary enable --provider claude --model sonnet
      anamnesis summary enable --provider api --key-env MY_ANTHROPIC_KEY
    """
    from anamnesis.agents import enable_summaries, summary_status  # lazy: --help loads every command module

    store = get_store()
    enable_summaries(
        store,
        provider,
        model=model,
        claude_bin=claude_bin,
        key_env=key_env,
        key_file=key_file,
        base_url=base_url,
        timeout=timeout,
    )
    info = summary_status(store)
    if json_out:
        print_json(info)
        return
    console().print(f"[green]✔[/green] model summary on ({info['provider']}, model {info['model']})")
    if info["problem"]:
        console(stderr=True).print(f"[yellow]warning:[/yellow] it cannot run yet: {info['problem']}")


@summary_app.command()
def disable(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Turn off the model-written summary here (summaries already in notes stay).

    Examples:
      anamnesis summary disable
    """
    from anamnesis.agents import disable_summaries  # lazy: --help loads every command module

    store = get_store()
    disable_summaries(store)
    if json_out:
        print_json({"enabled": False})
    else:
        console().print("model summary off")


@summary_app.command()
def status(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Show whether the model summary is on, its provider and model, and whether it can run now.

    Examples:
      anamnesis summary status
      anamnesis summary status --json
    """
    from anamnesis.agents import summary_status  # lazy: --help loads every command module

    info = summary_status(get_store())
    if json_out:
        print_json(info)
        return
    out = console()
    out.print(f"model summary: {'on' if info['enabled'] else 'off (the default)'}")
    for key in ("provider", "model", "claude_bin", "base_url", "key_from", "timeout"):
        if key in info:
            out.print(f"  {key.replace('_', ' ')}: {info[key]}")
    out.print(f"  ready: {'yes' if not info['problem'] else 'no — ' + info['problem']}")


@summary_app.command()
def run(
    ref: str = typer.Argument(..., help="The session note (path, id or id prefix)."),
    transcript: Path | None = typer.Option(
        None,
        "--transcript",
        help="The session's transcript (.jsonl); without it the note's own text is summarised.",
    ),
    force: bool = typer.Option(
        False, "--force", help="Ask again even if this content was summarised already."
    ),
    hook: bool = typer.Option(
        False,
        "--hook",
        hidden=True,
        help="Run as the capture hook's detached job: report to hooks.log, exit 0.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Ask the model for a summary of one session note now and add it to the note.

    Examples:
      anamnesis summary run 7k2m                 the session note with this id
      anamnesis summary run 7k2m --force         again, though its input did not change
    """
    from anamnesis.agents import config_of, run_summary  # lazy: --help loads every command module
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module

    store = get_store()
    if not hook:
        result = run_summary(store, ref, transcript=transcript, force=force)
        if json_out:
            print_json({"action": result.action, "path": result.path, "detail": result.detail})
        else:
            console().print(f"{result.action} {store.memory / result.path} ({result.detail})")
        return
    from anamnesis.hooks.run import _log as hooks_log  # lazy: --help loads every command module

    try:
        if not config_of(store).enabled:
            hooks_log(store, f"summary: {ref}: skipped, the model summary was turned off")
            return
        result = run_summary(store, ref, transcript=transcript, force=force)
        hooks_log(store, f"summary: {result.action} {result.path} ({result.detail})")
    except AnamnesisError as exc:
        hooks_log(store, f"summary: FAILED for {ref}: {exc} (the session note is as it was)")
    except Exception as exc:  # a detached job: its failure must reach the log, not a terminal no one sees
        hooks_log(
            store, f"summary: FAILED for {ref}: {type(exc).__name__}: {exc} (the session note is as it was)"
        )
