"""What happened, what was decided and what is still open, day by day, across machines.

Read from the notes themselves, so every machine that synced sees the same
timeline: session notes (what capture wrote at the end of each session:
its ask, its outcome, its `## Decisions` and `## Open items`), and every
other note created or updated in the span (a new fact, a how-to changed, a
note replacing another). The machine of each entry is the note's `machine`
field. "Still open" is the open items of the latest session of each project
in the span: what was left when work last stopped there.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from anamnesis.agents.capture import DECISIONS, OPEN_ITEMS
from anamnesis.base.notes import parse_note
from anamnesis.base.text import plural
from anamnesis.search import open_index, parse_when
from anamnesis.store import safe_path

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

MAX_ENTRIES = 2000  # notes read for one timeline, newest first
MAX_ITEMS = 8  # decisions / open items kept per session
MAX_OUTCOME = 300
_BULLET = re.compile(r"^\s*[-*+]\s+(.*\S)\s*$")


@dataclass
class Entry:
    """One thing that happened: a session, or a note written or changed."""

    kind: str  # "session" or "note"
    when: str  # ISO time
    machine: str
    project: str | None
    title: str
    path: str
    change: str = ""  # notes: "added" or "updated"
    type: str = ""
    outcome: str = ""
    decisions: list[str] = field(default_factory=list)
    open_items: list[str] = field(default_factory=list)
    supersedes: list[str] = field(default_factory=list)  # titles (or ids) of the notes it replaces

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return asdict(self)


@dataclass
class Timeline:
    """Entries by day (newest day first, each day in time order) and what is still open."""

    since: str
    project: str | None
    days: list[tuple[str, list[Entry]]]
    still_open: list[dict[str, str]]
    machines: list[str]
    undated: list[str] = field(default_factory=list)  # notes whose date is none or ahead of now: left out

    def to_dict(self) -> dict[str, Any]:
        """The JSON the CLI's --json, the MCP tool and the dashboard share."""
        return {
            "since": self.since,
            "project": self.project,
            "machines": list(self.machines),
            "days": [{"date": day, "entries": [e.to_dict() for e in entries]} for day, entries in self.days],
            "still_open": [dict(item) for item in self.still_open],
            "left_out": list(self.undated),
        }


def _dated(when: str, latest: str) -> bool:
    """Whether a note's date is a date (hand edits write anything: `garbage`, `2026-02-30`) and not
    ahead of now (a machine whose clock ran ahead): only such notes belong on a day of the timeline."""
    try:
        dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return False
    return when[:10] <= latest


def _section(body: str, heading: str) -> list[str]:
    """The bullet lines under `heading` (up to the next `## ` heading)."""
    lines = body.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    except StopIteration:
        return []
    found: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        match = _BULLET.match(line)
        if match:
            found.append(match.group(1))
    return found[:MAX_ITEMS]


def _paragraph(body: str, heading: str) -> str:
    lines = body.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    except StopIteration:
        return ""
    text: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        text.append(line.strip())
    joined = " ".join(t for t in text if t)
    return joined if len(joined) <= MAX_OUTCOME else joined[: MAX_OUTCOME - 1].rstrip() + "…"


def build_timeline(store: Store, *, since: str = "7d", project: str | None = None) -> Timeline:
    """The timeline of the notes written or changed since `since` (a span like 7d, or a date)."""
    start = parse_when(since)
    with open_index(store) as index:
        index.refresh()
        rows = index.changed_since(start, project, MAX_ENTRIES)
        titles = index.titles_by_id()
    entries: list[Entry] = []
    undated: list[str] = []
    tomorrow = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).strftime("%Y-%m-%d")
    for hit in rows:
        path, title, kind, key, created, updated = hit.path, hit.title, hit.type, hit.project, hit.created, hit.updated
        if not _dated(updated or created or "", tomorrow) or (created and not _dated(created, tomorrow)):
            undated.append(path)  # doctor names the field to fix
            continue
        machine, supersedes = hit.machine, hit.supersedes
        if kind == "episodic":
            try:
                note = parse_note(safe_path(store, path).read_text(encoding="utf-8", errors="replace"), path)
            except (OSError, ValueError):
                continue
            entries.append(
                Entry(
                    "session",
                    created or updated or "",
                    machine or "",
                    key,
                    title or "",
                    path,
                    type=kind,
                    outcome=_paragraph(note.body, "## Outcome"),
                    decisions=_section(note.body, DECISIONS),
                    open_items=_section(note.body, OPEN_ITEMS),
                )
            )
            continue
        added = bool(created) and created >= start
        replaced = [titles.get(i) or i for i in supersedes if i]
        # a note names only its latest writer: an added note edited since is not credited to it
        edited_since = added and bool(updated) and updated != created
        entries.append(
            Entry(
                "note",
                (created if added else updated) or "",
                "" if edited_since else machine or "",  # who added it is not known: "?"
                key,
                title or "",
                path,
                change="added" if added else "updated",
                type=kind or "",
                supersedes=replaced,
            )
        )
        if edited_since and updated > (created or ""):  # changed again since: by its latest writer
            entries.append(
                Entry("note", updated, machine or "", key, title or "", path, change="updated", type=kind or "")
            )
    by_day: dict[str, list[Entry]] = {}
    for entry in entries:
        by_day.setdefault(entry.when[:10] or "undated", []).append(entry)
    days = [
        (day, sorted(by_day[day], key=lambda e: (e.when, e.path))) for day in sorted(by_day, reverse=True)
    ]
    latest: dict[str | None, Entry] = {}
    for entry in entries:
        if entry.kind == "session" and (
            entry.project not in latest or entry.when > latest[entry.project].when
        ):
            latest[entry.project] = entry
    still_open = [
        {"project": entry.project or "global", "item": item, "since": entry.when[:10], "path": entry.path}
        for entry in sorted(latest.values(), key=lambda e: e.when, reverse=True)
        for item in entry.open_items
    ]
    machines = sorted({e.machine for e in entries if e.machine})
    return Timeline(start, project, days, still_open, machines, sorted(undated))


def _weekday(day: str) -> str:
    try:
        return dt.date.fromisoformat(day).strftime("%a")
    except ValueError:
        return ""


def _line(entry: Entry) -> str:
    where = f"{entry.machine or '?'} · {entry.project or 'global'}"
    if entry.kind == "session":
        return f"{entry.when[11:16] or '--:--'} {where} · session: {entry.title}"
    replaced = f" (replaces {', '.join(entry.supersedes)})" if entry.supersedes else ""
    return f"{entry.when[11:16] or '--:--'} {where} · {entry.change} {entry.type}: {entry.title}{replaced}"


def _details(entry: Entry) -> list[str]:
    """What a session did, decided and left open, one line each."""
    did = [f"did: {entry.outcome}"] if entry.outcome else []
    return did + [f"decided: {i}" for i in entry.decisions] + [f"open: {i}" for i in entry.open_items]


def render_text(timeline: Timeline) -> str:
    """The timeline as plain text for a terminal."""
    scope = timeline.project or "all projects"
    out = [f"Timeline since {timeline.since[:16].replace('T', ' ')}, {scope}"]
    if not timeline.days:
        out.append("  nothing happened in this span")
    for day, entries in timeline.days:
        out += ["", f"{day} {_weekday(day)}"]
        for entry in entries:
            out.append(f"  {_line(entry)}")
            out += [f"        {line}" for line in _details(entry)]
    if timeline.still_open:
        out += ["", "Still open"]
        out += [f"  - {i['project']}: {i['item']} (since {i['since']})" for i in timeline.still_open]
    if timeline.undated:
        out += ["", f"Left out: {_left_out(timeline)}"]
    return "\n".join(out) + "\n"


def _left_out(timeline: Timeline) -> str:
    return (
        f"{plural(len(timeline.undated), 'note')} whose date is no date or ahead of now"
        f" ({', '.join(timeline.undated[:3])}{', …' if len(timeline.undated) > 3 else ''}); `anamnesis doctor` says which field"
    )


def render_markdown(timeline: Timeline) -> str:
    """The timeline as markdown, for a stand-up note or an agent's context."""
    scope = f"`{timeline.project}`" if timeline.project else "all projects"
    out = [f"# Timeline since {timeline.since[:10]} ({scope})"]
    if not timeline.days:
        out += ["", "Nothing happened in this span."]
    for day, entries in timeline.days:
        out += ["", f"## {day} {_weekday(day)}", ""]
        for entry in entries:
            out.append(f"- {_line(entry)}")
            out += [f"  - {line}" for line in _details(entry)]
    if timeline.still_open:
        out += ["", "## Still open", ""]
        out += [f"- [ ] {i['item']} (`{i['project']}`, since {i['since']})" for i in timeline.still_open]
    if timeline.undated:
        out += ["", f"Left out: {_left_out(timeline)}"]
    return "\n".join(out) + "\n"
