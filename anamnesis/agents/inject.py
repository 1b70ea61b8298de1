"""SessionStart context: what the agent should know before the first prompt.

In order: the user's preferences (global rules), the notes that matter for
this project, the latest session notes of this project (the latest one
leading with its decisions and open items), and a warning when
notes carry unresolved sync conflicts. Project notes are ranked by relevance
to the project (its name, the files recent sessions touched, the branch) and
by recency together; that relevance is keyword ranking even with semantic
search on (the "query" is a bag of names, not a sentence whose meaning an
embedding would catch), so SessionStart never loads the model. Everything fits a character budget (default 6,000,
never above 9,500: Claude Code cuts hook output at 10,000) by trimming note
bodies fairly, so a long note cannot push out all the others.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from anamnesis.agents.transcript import MEMORY_CLOSE, MEMORY_OPEN
from anamnesis.base.errors import AnamnesisError
from anamnesis.base.settings import load_settings
from anamnesis.base.text import plural, trim
from anamnesis.search import Hit, Index, KeywordRanker, open_index, recency, search
from anamnesis.store import ConflictedNote, current_branch, describe_conflict, load_note, project_key

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

DEFAULT_BUDGET = 6000
MAX_BUDGET = 9500
MIN_BUDGET = 800
MAX_PREFERENCES = 20
MAX_PROJECT_NOTES = 10
MAX_SESSIONS = 3
MIN_BODY = 160  # every note shown gets at least this much of its body (or all of it)
RELEVANCE_WEIGHT = 0.65
SEARCH_POOL = 60  # best matches (all projects) considered for relevance


@dataclass
class Item:
    """One note to show: its heading line and its body, trimmed to fit."""

    path: str
    head: str
    body: str
    shown: int = 0  # characters of body that fit

    def render(self) -> str:
        body = trim(self.body, self.shown)
        return f"{self.head}\n{body}\n" if body else f"{self.head}\n"


def budget_of(settings: dict[str, Any]) -> int:
    """The configured budget, clamped to what Claude Code accepts without cutting."""
    try:
        value = int(settings.get("inject_budget") or DEFAULT_BUDGET)
    except (TypeError, ValueError):
        value = DEFAULT_BUDGET
    return max(MIN_BUDGET, min(MAX_BUDGET, value))


def _words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]{2,}", text)]


def relevance_terms(project: str, branch: str | None, files: list[str]) -> list[str]:
    """Search words for 'what this project and its current work are about'."""
    generic = {
        "main",
        "master",
        "head",
        "develop",
        "dev",
        "src",
        "lib",
        "test",
        "tests",
        "index",
        "init",
        "com",
    }
    terms: list[str] = []
    parts = project.split("/")
    terms += _words(parts[-1]) + _words(parts[-1].replace("-", " "))
    if branch and branch != "HEAD":
        terms += _words(branch.replace("/", " ").replace("-", " ").replace("_", " "))
    for file in files[:30]:
        stem = PurePosixPath(file).stem
        terms += _words(stem.replace("_", " ").replace("-", " "))
    return [t for t in dict.fromkeys(terms) if t not in generic][:40]


def allocate(items: list[Item], room: int) -> list[Item]:
    """Fit items into `room` characters: keep as many as their headings and a first
    slice of body allow (in rank order), then share what is left fairly among bodies."""
    kept: list[Item] = []
    used = 0
    for item in items:
        floor = len(item.head) + 2 + min(len(item.body.strip()), MIN_BODY)
        if used + floor > room:
            continue
        kept.append(item)
        item.shown = min(len(item.body.strip()), MIN_BODY)
        used += floor
    spare = room - used
    hungry = [i for i in kept if len(i.body.strip()) > i.shown]
    while spare > 0 and hungry:
        share = max(1, spare // len(hungry))
        for item in list(hungry):
            want = len(item.body.strip()) - item.shown
            give = min(want, share, spare)
            item.shown += give
            spare -= give
            if item.shown >= len(item.body.strip()):
                hungry.remove(item)
            if spare <= 0:
                break
    return kept


def _age(updated: str) -> str:
    return updated[:10] if updated else "undated"


def _load_bodies(store: Store, hits: list[Hit]) -> dict[str, tuple[str, dict[str, Any]]]:
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for hit in hits:
        try:
            note = load_note(store, hit.path)
        except (AnamnesisError, OSError):
            continue
        out[hit.path] = (note.body, note.extra)
    return out


def _project_candidates(index: Index, project: str, terms: list[str]) -> list[tuple[float, Hit]]:
    """Project notes (and strongly matching global ones) scored by relevance and recency.

    Superseded notes are left out: their replacement says what holds now.
    """
    pool: dict[str, Hit] = {}
    for kind in ("semantic", "procedural"):
        for hit in index.list_notes(project=project, type=kind, limit=200):
            pool[hit.path] = hit
    relevance: dict[str, float] = {}
    if terms:
        # keyword ranking: project, branch and file names are words to find, not a meaning to embed
        ranker = KeywordRanker()
        for hit in search(
            index, " ".join(terms), near_project=project, limit=SEARCH_POOL, snippets=False, ranker=ranker
        ):
            if hit.type not in ("semantic", "procedural"):
                continue
            if hit.project == project:
                pool.setdefault(hit.path, hit)
                relevance[hit.path] = hit.score
            elif hit.project is None:
                pool.setdefault(hit.path, hit)
                relevance[hit.path] = hit.score * 0.5  # global notes must match clearly to come in
    top = max(relevance.values(), default=0.0)
    now = dt.datetime.now(dt.UTC)
    scored: list[tuple[float, Hit]] = []
    for path, hit in pool.items():
        if hit.superseded_by:
            continue
        rel = relevance.get(path, 0.0) / top if top > 0 else 0.0
        if hit.project != project and rel < 0.5:
            continue
        score = RELEVANCE_WEIGHT * rel + (1 - RELEVANCE_WEIGHT) * recency(hit.updated, now)
        scored.append((score, hit))
    scored.sort(key=lambda pair: (-pair[0], pair[1].path))
    return scored


def build_context(store: Store, cwd: str | Path, *, budget: int | None = None) -> tuple[str, list[str]]:
    """The SessionStart text for a session in `cwd`, and the note paths it shows.

    Returns ("", []) when there is nothing worth saying.
    """
    settings = load_settings(store)
    limit = budget_of({"inject_budget": budget} if budget is not None else settings)
    project = project_key(cwd)
    branch = current_branch(cwd)
    with open_index(store) as index:
        preferences = [
            hit for hit in index.list_notes(type="preference", limit=MAX_PREFERENCES) if not hit.superseded_by
        ]
        sessions = index.list_notes(project=project, type="episodic", limit=MAX_SESSIONS)
        session_bodies = _load_bodies(store, sessions)
        recent_files: list[str] = []
        for _body, extra in session_bodies.values():
            files = extra.get("files")
            if isinstance(files, list):
                recent_files += [str(f) for f in files]
        terms = relevance_terms(project, branch, recent_files)
        project_hits = [hit for _score, hit in _project_candidates(index, project, terms)[:MAX_PROJECT_NOTES]]
        conflicts = index.conflicted()
    bodies = _load_bodies(store, preferences + project_hits)
    bodies.update(session_bodies)
    sections: list[tuple[str, list[Item]]] = [
        ("## Your preferences (follow these)", _items(preferences, bodies, False)),
        (f"## Notes for this project ({project})", _items(project_hits, bodies, True)),
        ("## Recent sessions in this project", _items(sessions, bodies, True, lead=_DIGEST_SECTIONS)),
    ]
    if not any(items for _t, items in sections) and not conflicts:
        return "", []
    where = f"project `{project}`" + (f", branch `{branch}`" if branch and branch != "HEAD" else "")
    header = (
        f"{MEMORY_OPEN}\n# Memory from Anamnesis ({where})\n"
        f"Notes from the user's own memory store ({store.memory}). Read a whole note with the "
        "`anamnesis` MCP tool `read` (by path); search with `search`; save what is worth "
        "remembering with `write`.\n"
    )
    footer = f"{MEMORY_CLOSE}\n"
    warning = conflict_warning(store, conflicts, project)
    headings = sum(len(title) + 2 for title, items in sections if items)
    room = limit - len(header) - len(footer) - len(warning) - headings
    flat = [item for _title, items in sections for item in items]
    kept = {id(item) for item in allocate(flat, max(0, room))}
    parts = [header]
    shown: list[str] = []
    for title, items in sections:
        chosen = [item for item in items if id(item) in kept]
        if not chosen:
            continue
        parts.append(f"\n{title}\n")
        for item in chosen:
            parts.append(item.render())
            shown.append(item.path)
    parts.append(warning)
    parts.append(footer)
    text = "".join(parts)
    if len(text) > limit:  # headings of sections that ended up empty were counted; never overflow
        text = text[: limit - len(footer) - 2] + "…\n" + footer
    return text, shown


_DIGEST_SECTIONS = ("## Decisions", "## Open items")
MAX_CONFLICTS_NAMED = 3


def conflict_warning(store: Store, conflicts: list[Hit], project: str) -> str:
    """The paragraph that tells the agent which notes of this project (or global ones, which apply
    everywhere) are in conflict, with their title, id and versions, and how the user resolves
    them; notes of other projects are only counted. '' when there are none."""
    if not conflicts:
        return ""
    here = [h for h in conflicts if h.project in (project, None)]
    parts: list[str] = []
    if here:
        named = []
        for hit in here[:MAX_CONFLICTS_NAMED]:
            found = _conflict_of(store, hit.path)
            what = f", {found.kept}: {', '.join(found.machines)}" if found and found.machines else ""
            named.append(f"“{trim(hit.title, 80)}” (id `{hit.id}`, `{hit.path}`{what})")
        more = f" and {len(here) - len(named)} more" if len(here) > len(named) else ""
        one = len(here) == 1
        parts.append(
            f"⚠ {plural(len(here), 'note')} of this project {'is' if one else 'are'} in a sync "
            f"conflict: {'; '.join(named)}{more}. "
            f"{'It holds' if one else 'Each holds'} every machine's version of the lines they changed, between "
            "`<<<<<<<` and `>>>>>>>` lines, so none of them is settled: tell the user, who resolves it with "
            "`anamnesis resolve ID --keep MACHINE` (or `--both`, or by editing the file; `anamnesis conflicts` "
            "lists them)."
        )
    others = len(conflicts) - len(here)
    if others:
        parts.append(
            f"{'⚠ ' if not here else ''}{plural(others, 'note')} of other projects "
            f"{'is' if others == 1 else 'are'} in a sync conflict too (`anamnesis conflicts`)."
        )
    return "\n" + " ".join(parts) + "\n"


def _conflict_of(store: Store, relpath: str) -> ConflictedNote | None:
    try:
        return describe_conflict(relpath, (store.memory / relpath).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def lead_with(body: str, headings: tuple[str, ...]) -> str:
    """`body` with its `## ` sections named in `headings` moved to the front (in that order),
    so that what a trimmed body still shows is them."""
    parts = re.split(r"(?m)^(?=## )", body)
    picked = [next((p for p in parts if p.split("\n", 1)[0].strip() == h), "") for h in headings]
    picked = [p for p in picked if p]
    if not picked:
        return body
    rest = [p for p in parts if p not in picked]
    return "\n\n".join(p.strip() for p in picked + rest if p.strip())


def _items(
    hits: list[Hit],
    bodies: dict[str, tuple[str, dict[str, Any]]],
    with_date: bool,
    *,
    lead: tuple[str, ...] = (),
) -> list[Item]:
    """Items for `hits` in order; the first one shown (the latest session note, for sessions)
    leads with its `lead` sections."""
    items: list[Item] = []
    for hit in hits:
        if hit.path not in bodies:
            continue
        body = re.sub(r"\n{3,}", "\n\n", bodies[hit.path][0]).strip()
        if lead and not items:
            body = lead_with(body, lead)
        flag = " ⚠ conflicted" if hit.conflicted else ""
        date = f", {_age(hit.updated)}" if with_date else ""
        head = f"### {hit.title} ({hit.type}{date}{flag}) — `{hit.path}`"
        items.append(Item(path=hit.path, head=head, body=body))
    return items
