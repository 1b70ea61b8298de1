"""Importing a store of the published anamnesis-memory 0.1.3 package.

Its notes are `memory/<type>/<ULID>.md` under its home (default ~/.anamnesis,
the same folder this project uses: move it aside first, see docs/import.md),
with front matter `id, type, title, project, machine_id, scope, user_id,
workspace_id, prov_source, confidence, [prov_model, prov_session,
supersedes], created_at, updated_at, tags`. Notes it kept on one machine
only (`scope: machine-local`) live in `local/`, outside its synced tree.

Each note keeps its ULID as its id here, so every reference to it (a
`supersedes` link, an id a person noted down) still finds it. Fields with no
equivalent here are kept as extra front-matter fields under their own names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from anamnesis.base.errors import AnamnesisError, UsageError
from anamnesis.base.notes import is_note_id, load_yaml, split_front_matter
from anamnesis.importers.plan import Item, Plan, Skip, digest, iso_z, read_text, shown
from anamnesis.store import check_project_key

NAME = "anamnesis-memory"
TYPES = ("procedural", "semantic", "episodic")
KEPT = ("scope", "user_id", "workspace_id", "prov_source", "prov_model", "prov_session", "confidence")
NO_PROJECT = "global"


def find_memory(root: Path) -> Path:
    """The folder of 0.1.3 notes: `root/memory`, or `root` itself when it holds the type folders."""
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder; give the home folder of the anamnesis-memory 0.1.3 store")
    for candidate in (root / "memory", root):
        if any((candidate / kind).is_dir() for kind in TYPES):
            return candidate
    if (root / "memory").is_dir():
        return root / "memory"  # a store with no notes yet
    raise UsageError(f"{root} holds no anamnesis-memory 0.1.3 store (expected memory/<type>/<id>.md in it)")


def plan(root: Path, *, project: str | None = None, tags: list[str] | None = None) -> Plan:
    """The notes of the 0.1.3 store at `root`; `project` files its notes that had none ("global")."""
    memory = find_memory(root)
    result = Plan(NAME, shown(root))
    for path in sorted(p for p in memory.rglob("*.md") if ".git" not in p.relative_to(memory).parts):
        origin = shown(path)
        text = read_text(path, result, origin)
        if text is None:
            continue
        meta, body, problem = _parse(text)
        if problem:
            result.skipped.append(Skip(origin, problem))
            continue
        note_id, kind, title = str(meta["id"]).strip(), str(meta["type"]).strip(), str(meta["title"])
        if kind not in TYPES:
            result.skipped.append(Skip(origin, f"unknown type {kind!r} (0.1.3 knows {', '.join(TYPES)})"))
            continue
        key_project = _project(meta.get("project"))
        extra: dict[str, Any] = {k: meta[k] for k in KEPT if meta.get(k) not in (None, "")}
        if key_project is not None:
            try:
                key_project = check_project_key(key_project)
            except AnamnesisError:
                extra["project_0_1_3"] = key_project  # kept, but not a key this store can file under
                key_project = None
        raw_tags = meta.get("tags") or []
        note_tags = [str(t) for t in raw_tags] if isinstance(raw_tags, list) else [str(raw_tags)]
        supersedes = meta.get("supersedes") or []
        result.add(
            Item(
                key=f"{NAME}:{note_id}",
                digest=digest(text),
                type=kind,
                title=title,
                body=body,
                origin=origin,
                project=key_project or project,
                tags=[*note_tags, *(tags or [])],
                created=iso_z(meta.get("created_at")),
                updated=iso_z(meta.get("updated_at")) or iso_z(meta.get("created_at")),
                machine=str(meta.get("machine_id") or ""),
                note_id=note_id,
                supersedes=[str(s) for s in supersedes]
                if isinstance(supersedes, list)
                else [str(supersedes)],
                extra=extra,
                keep_empty=True,  # 0.1.3 kept a note that is all title: so does the import
            )
        )
    local = memory.parent / "local"
    if memory.name == "memory" and local.is_dir():
        for path in sorted(local.rglob("*.md")):
            result.skipped.append(
                Skip(
                    shown(path),
                    "machine-local note (0.1.3 never synced it); not imported, it stays where it is",
                )
            )
    return result


def _project(value: Any) -> str | None:
    text = str(value).strip() if value is not None else ""
    return None if not text or text == NO_PROJECT else text


def _parse(text: str) -> tuple[dict[str, Any], str, str]:
    """(front matter, body, problem): a file 0.1.3 could not read either is a problem, not an error."""
    front, body = split_front_matter(text)
    if front is None:
        if text.startswith(("---\n", "---\r\n")):
            return {}, "", "front matter is not closed by a '---' line"
        return {}, "", "no front matter (0.1.3 notes start with a '---' block)"
    try:
        meta = load_yaml(front)  # a date that is none stays text; a value holding itself is invalid
    except yaml.YAMLError as exc:
        return {}, "", f"front matter is not valid YAML: {str(exc).splitlines()[0]}"
    if not isinstance(meta, dict):
        return {}, "", "front matter is not a mapping of fields"
    missing = [name for name in ("id", "type", "title") if not str(meta.get(name) or "").strip()]
    if missing:
        return {}, "", f"front matter lacks {', '.join(missing)}"
    if not is_note_id(str(meta["id"]).strip()):
        return {}, "", f"id {meta['id']!r} is not a note id"
    return meta, body.strip("\n") + "\n", ""
