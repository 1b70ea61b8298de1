"""`anamnesis tidy`: propose merges, supersessions and archives, with evidence; apply what is accepted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from anamnesis.base.text import plural
from anamnesis.cli._common import get_store, print_json

if TYPE_CHECKING:
    from anamnesis.app import Applied


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Notes")(tidy)


def tidy(
    json_out: bool = typer.Option(
        False, "--json", help="Print the plan as JSON and change nothing (for --apply)."
    ),
    print_only: bool = typer.Option(
        False, "--print", help="Show the proposals and their evidence; change nothing."
    ),
    apply: str | None = typer.Option(
        None, "--apply", metavar="PLAN", help="Apply a plan file (`-`: stdin), as --json wrote it."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply every proposal without asking."),
    project: str | None = typer.Option(None, "--project", "-p", help="Only this project key."),
    here: bool = typer.Option(False, "--here", help="Only the project of the current folder."),
    stale_after: str = typer.Option(
        "30d", "--stale-after", help="Session notes older than this may be archived."
    ),
    words_only: bool = typer.Option(
        False, "--words", help="Compare words only, even with semantic search on."
    ),
    archived: bool = typer.Option(False, "--archived", help="List the archived notes and exit."),
    restore: str | None = typer.Option(
        None, "--restore", metavar="NOTE", help="Move an archived note back (path or id)."
    ),
    all_: bool = typer.Option(
        False, "--all", help="Also the proposals you declined before (each is asked again once a note of it changes)."
    ),
    model: bool = typer.Option(
        False,
        "--model",
        help="Merges also get a text your own model writes from both notes (set up with `anamnesis summary "
        "enable`; redacted both ways); every line of both notes stays below it.",
    ),
) -> None:
    """Find near-duplicate notes, notes a later one replaces, and old sessions that live on in a fact.

    Proposes for each a merge, a supersession or an archive, shows the
    evidence (the lines both share or only one has, the dates, the score)
    and, in a terminal, asks before applying each one. Uses meaning when
    semantic search is on, words otherwise. Never deletes text: a merge
    adds the other note's differing lines to the newer note, which then
    supersedes it; a supersession keeps the old note (below its replacement
    in search); an archive moves a note to memory/.archive/, out of search,
    and `--restore` brings it back. A proposal you answer no is not asked
    again (here, or by an agent's `tidy` tool) until one of its notes
    changes; `--all` shows it anyway. Every change is one commit that syncs
    like any other; a plan applied twice changes nothing the second time.

    Examples:
      anamnesis tidy                        ask about each proposal
      anamnesis tidy --print                show what it would do
      anamnesis tidy --json > plan.json     a plan to read, edit and apply
      anamnesis tidy --apply plan.json
      anamnesis tidy --apply plan.json --model   merges written by your own model too
      anamnesis tidy --restore 7k2m9q4x1c   bring an archived note back
    """
    from anamnesis.app import (  # lazy: --help loads every command module
        apply_plan,
        decline,
        describe_proposal,
        list_archived,
        model_unready,
        plan_tidy,
        read_plan,
        restore_archived,
    )
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.cli.notes import _project_option  # lazy: --help loads every command module
    from anamnesis.store import check_writable  # lazy: --help loads every command module

    store = get_store()
    why = model_unready(store) if model else None
    if why is not None:
        raise UsageError(f"--model: {why}")
    # --json is how, not what: it goes with --archived and --apply (and is the plan's format otherwise)
    plain_json = json_out and not archived and apply is None
    if sum(map(bool, (plain_json, print_only, apply is not None, archived, restore is not None))) > 1:
        raise UsageError(
            "give one of --json, --print, --apply, --archived, --restore (--json also goes with --archived, --apply)"
        )
    if archived:
        listed = list_archived(store)
        print_json(listed) if json_out else print("\n".join(listed) or "no archived notes")
        return
    if restore is not None:
        print(f"restored {restore_archived(store, restore)}")
        return
    if apply is not None:
        if apply == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(apply).read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot read the plan {apply}: {exc.strerror or exc}") from None
        check_writable(store)  # a repo left mid-rebase or off main: refused (exit 12), not "1 skipped"
        results = apply_plan(store, read_plan(text), model=model)
        if json_out:
            print_json({"applied": [result.to_dict() for result in results]})
        else:
            _report(results)
        return
    key = _project_option(project, here)
    if yes:
        check_writable(store)  # refused before the plan is shown, as every writer is
    plan = plan_tidy(
        store, project=key, stale_after=stale_after, meaning=False if words_only else None, declined=all_
    )
    if json_out:
        print_json(plan.to_dict())
        return
    print(f"{plural(len(plan.proposals), 'proposal')} over {plural(plan.notes, 'note')} (comparing {plan.mode})")
    if plan.declined:
        print(f"({plural(plan.declined, 'proposal')} you declined before not shown: `anamnesis tidy --all` shows them)")
    interactive = not print_only and not yes and sys.stdin is not None and sys.stdin.isatty()
    accepted = []
    for n, proposal in enumerate(plan.proposals, 1):
        print()
        print(f"[{n}/{len(plan.proposals)}] " + "\n".join(describe_proposal(proposal)))
        if interactive:
            answer = typer.prompt("   apply? [y]es / [n]o / [q]uit", default="n").strip().lower()
            if answer.startswith("q"):
                break
            if answer.startswith("y"):
                accepted.append(proposal)
            else:  # not asked again until one of its notes changes
                decline(store, [proposal])
    if yes:
        accepted = list(plan.proposals)
    if print_only or not (interactive or yes):
        if not print_only and plan.proposals:
            print("\n(no terminal to ask in: nothing was changed; use --yes, or --json and --apply)")
        return
    _report(apply_plan(store, accepted, model=model))


def _report(results: list[Applied]) -> None:
    counts: dict[str, int] = {}
    for result in results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
        if result.outcome != "already":
            print(f"{result.outcome}: {result.detail}")
    summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "nothing to do"
    print(f"tidy: {summary}")
