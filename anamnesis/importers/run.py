"""`anamnesis import`: bring memory kept elsewhere into the store, idempotently.

One module per source reads it into a `Plan` (see `plan.py`); `run_import`
applies it as one commit. `mirror_all` is what `sync` runs first: it imports
again from the sources a person asked to keep mirrored (Claude Code's
auto-memory), so what Claude Code remembers on its own follows them to
every machine. `mirror_changed` is the cheap check `watch` makes.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from anamnesis.base.errors import AnamnesisError, ExitCode, UsageError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.paths import Store
from anamnesis.base.settings import load_settings, save_settings, writer_machine_id
from anamnesis.importers.plan import ImportReport, Plan, Progress, apply, digest
from anamnesis.store import check_project_key

SOURCES = ("anamnesis-memory", "claude-md", "claude-auto-memory", "markdown")
MIRRORABLE = ("claude-auto-memory",)
MIRROR_STATE = "import-mirror.json"
TRIED = "#failed"  # state key suffix: the fingerprint a failed mirror last saw



class ImportInterrupted(AnamnesisError):
    """Ctrl-C (SIGINT, or SIGTERM, SIGHUP) stopped an import: it writes its notes in one commit or not at all."""

    exit_code: int = ExitCode.INTERRUPTED  # as a shell reports a command stopped by SIGINT (SIGTERM: 143)


def make_plan(
    store: Store, source: str, path: Path | None, *, project: str | None = None, tags: list[str] | None = None
) -> Plan:
    """What importing `source` from `path` would make (nothing is written)."""
    if project is not None:
        project = check_project_key(project)
    plan = _read(store, source, path, project=project, tags=tags)
    plan.options = project is not None or bool(tags)  # notes lacking them are updated, sources unchanged
    return plan


def _read(
    store: Store, source: str, path: Path | None, *, project: str | None, tags: list[str] | None
) -> Plan:
    # lazy: sync loads this package on every run; a source's reader loads only when it imports
    from anamnesis.importers import anamnesis_memory, claude_auto_memory, claude_md, markdown

    if source == "anamnesis-memory":
        if path is None:
            raise UsageError("give the folder of the anamnesis-memory 0.1.3 store (see docs/import.md)")
        _not_this_store(store, path, source)
        return anamnesis_memory.plan(path, project=project, tags=tags)
    if source == "claude-md":
        return claude_md.plan(path, project=project, tags=tags)
    if source == "claude-auto-memory":
        return claude_auto_memory.plan(path, machine=writer_machine_id(store), project=project, tags=tags)
    if source == "markdown":
        if path is not None:
            _not_this_store(store, path, source)
        return markdown.plan(path, project=project, tags=tags)
    raise UsageError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")


def _not_this_store(store: Store, path: Path, source: str) -> None:
    """Importing the store into itself would only make copies: refused, saying so."""
    here = path.resolve()
    for own in (store.home.resolve(), store.memory.resolve()):
        if here == own or own in here.parents:
            if source == "anamnesis-memory":
                raise UsageError(
                    f"{path} is this store ({store.home}), not an anamnesis-memory 0.1.3 store; give the"
                    " folder the 0.1.3 store was moved to (see docs/import.md)"
                )
            raise UsageError(
                f"{path} is in this store ({store.home}): its notes are already here; nothing to import"
            )


def run_import(
    store: Store,
    source: str,
    path: Path | None,
    *,
    project: str | None = None,
    tags: list[str] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import `source` from `path`: plan it, then write what is new or changed as one commit."""
    store.require()
    plan = make_plan(store, source, path, project=project, tags=tags)
    return apply(store, plan, dry_run=dry_run, progress=progress)


# -- mirroring ----------------------------------------------------------------------------


def mirrors(store: Store) -> dict[str, list[str]]:
    """The sources kept mirrored on this machine: {source: [folders]} from settings.json."""
    value = load_settings(store).get("mirror") or {}
    out: dict[str, list[str]] = {}
    for source in MIRRORABLE:
        folders = value.get(source) if isinstance(value, dict) else None
        if isinstance(folders, list):
            out[source] = [str(f) for f in folders if isinstance(f, str) and f]
    return out


def set_mirror(store: Store, source: str, folder: Path, on: bool) -> bool:
    """Turn mirroring of `source` from `folder` on or off in settings.json; True if that changed it."""
    if source not in MIRRORABLE:
        raise UsageError(f"only {', '.join(MIRRORABLE)} can be mirrored, not {source}")
    settings = load_settings(store)
    table = settings.get("mirror")
    if not isinstance(table, dict):
        table = {}
    folders = [f for f in table.get(source, []) if isinstance(f, str)]
    target = str(folder.absolute())
    if (target in folders) == on:
        return False
    folders = [*folders, target] if on else [f for f in folders if f != target]
    settings["mirror"] = {**table, source: folders}
    save_settings(store, settings)
    return True


def _fingerprint(store: Store, source: str, folder: str) -> str:
    """A hash of everything a mirrored source holds now (cheap: its folders are small)."""
    # lazy: only when a mirror is set; sync and watch call this on every run
    from anamnesis.importers import claude_auto_memory

    where = Path(folder)
    target = where if claude_auto_memory.is_memory_dir(where) else claude_auto_memory.memory_dir(where)
    parts = [str(target)]
    if target.is_dir():
        for file in sorted(target.rglob("*.md")):
            try:
                if not file.is_file():  # a FIFO would block every sync: it is no note anyway
                    continue
                parts.append(f"{file.relative_to(target)}\0{digest(file.read_bytes())}")
            except OSError:
                parts.append(f"{file}\0unreadable")
    return digest("\n".join(parts))


def gone_mirrors(store: Store) -> list[tuple[str, str]]:
    """(source, folder) of each mirror whose folder is gone: a project moved or deleted leaves
    its mirror looking at nothing, and nothing fails, so only this tells a person."""
    try:
        table = mirrors(store)
    except AnamnesisError:
        return []  # a broken settings.json is reported on its own
    return [(source, folder) for source, folders in table.items() for folder in folders if not Path(folder).is_dir()]


def _state(store: Store) -> dict[str, Any]:
    try:
        data = json.loads((store.state_dir / MIRROR_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def mirror_changed(store: Store) -> bool:
    """Whether a mirrored source changed since it was last imported (what `watch` checks); never raises."""
    try:
        table = mirrors(store)
    except Exception:
        return False
    state = _state(store)
    for source, folders in table.items():
        for folder in folders:
            name = f"{source}:{folder}"
            try:
                now = _fingerprint(store, source, folder)
            except OSError:
                continue
            if now not in (
                state.get(name),
                state.get(name + TRIED),
            ):  # a failed one is not retried every beat
                return True
    return False


def mirror_all(store: Store) -> list[ImportReport]:
    """Import again every mirrored source that changed since the last time; what `sync` runs first.

    Never raises: a source that fails (its folder is gone, the disk is full)
    is logged and the others go on, so the caller's sync never fails because
    of it. A malformed file in a source is skipped as in any import.
    """
    log = logging.getLogger("anamnesis.importers")
    try:
        table = mirrors(store)
    except AnamnesisError as exc:  # a broken settings.json: sync says so itself, in one line
        log.debug("mirroring skipped: %s", exc)
        return []
    except Exception as exc:
        log.warning("mirroring skipped: %s", exc)
        return []
    state = _state(store)
    reports: list[ImportReport] = []
    tried = False
    for source, folders in table.items():
        for folder in folders:
            name = f"{source}:{folder}"
            fingerprint = ""
            try:
                fingerprint = _fingerprint(store, source, folder)
                if state.get(name) == fingerprint:
                    continue
                report = run_import(store, source, Path(folder))
            except Exception as exc:
                log.warning("mirroring %s from %s failed: %s", source, folder, exc)
                if fingerprint:
                    state[name + TRIED] = fingerprint
                    tried = True
                continue
            reports.append(report)
            state[name] = fingerprint
    if reports or tried:
        try:
            store.state_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(
                store.state_dir / MIRROR_STATE, json.dumps(state, indent=2, sort_keys=True) + "\n"
            )
        except OSError as exc:  # the next sync plans again and finds nothing new: no harm
            log.warning("cannot record the mirror state: %s", exc)
    return reports
