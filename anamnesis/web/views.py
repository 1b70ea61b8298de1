"""Read-only pages: overview, browse, search, a note, the fleet, the memory map, and their data.

Note types are named as the files and the CLI name them (semantic,
procedural, episodic, preference), with the CLI's plain words beside them
where a type is picked or filtered.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse

from anamnesis.base import refs
from anamnesis.base.notes import GLOBAL_TYPES, NOTE_TYPES
from anamnesis.base.text import plural
from anamnesis.search import Hit
from anamnesis.search import search as run_search
from anamnesis.store import (
    KEEP_PREFIX,
    Block,
    LinkGraph,
    MachineActivity,
    Stray,
    Unresolved,
    label_names,
    load_note,
    machine_activity,
    parse_blocks,
    recent_commits,
    working_text,
)
from anamnesis.web import bridge
from anamnesis.web.context import text_sha, web_of
from anamnesis.web.graph import build_graph, neighbourhood
from anamnesis.web.html import (
    Markup,
    csrf_field,
    escape,
    html,
    join,
    note_url,
    resolve_form,
    tag_chips,
    url,
    when,
)
from anamnesis.web.markdown import render_markdown

if TYPE_CHECKING:
    from anamnesis.base.notes import Note
    from anamnesis.search import Index

# One name per type on every surface: the value in the files and `anamnesis new -t`; the gloss is
# the CLI's help text for it.
TYPE_LABELS = {t: t for t in NOTE_TYPES}
TYPE_GLOSS = {
    "semantic": "facts, decisions",
    "procedural": "how-tos",
    "episodic": "what happened",
    "preference": "global rules",
}
PAGE_SIZE = 100  # notes per browse page


def strip_machine(message: str, machine: str) -> str:
    """A commit message without the `<machine>:` prefix the page already shows."""
    head, sep, rest = message.partition(":")
    return rest.strip() if sep and head.strip() == machine else message


def short_message(message: str, machine: str) -> str:
    """A commit message for a narrow column: no machine prefix, note paths cut to their file name."""
    return re.sub(r"\S+/([^/\s]+\.md)\b", r"\1", strip_machine(message, machine))


def type_label(kind: str) -> str:
    """A type with its plain words: "semantic (facts, decisions)"."""
    gloss = TYPE_GLOSS.get(kind)
    return f"{kind} ({gloss})" if gloss else kind


def type_chip(kind: str) -> Markup:
    return html(
        '<a class="chip type type-{k}" href="{u}" title="{g}">{label}</a>',
        k=kind,
        u=url("/browse", type=kind),
        g=type_label(kind),
        label=TYPE_LABELS.get(kind, kind),
    )


def project_chip(project: str | None) -> Markup:
    if not project:
        return Markup('<span class="chip project global">global</span>')
    return html('<a class="chip project" href="{u}">{p}</a>', u=url("/browse", project=project), p=project)


def conflict_badge(conflicted: bool) -> Markup:
    return Markup('<span class="badge warn">conflict</span>') if conflicted else Markup("")


Replacements = dict[str, tuple[str, str]]  # note id -> (path, title)


def notes_by_id(index: Index, ids: Iterable[str]) -> Replacements:
    """(path, title) of the notes with these ids (one per id, the most recently updated)."""
    return index.notes_by_id(list(dict.fromkeys(i for i in ids if i)))


def replacements_of(index: Index, hits: Iterable[Hit]) -> Replacements:
    """The notes that replace any of `hits`, by id, for `superseded_badge`."""
    return notes_by_id(index, (i for hit in hits for i in hit.superseded_by))


def note_links(ids: Iterable[str], known: Replacements) -> Markup:
    """Links to the notes with these ids (an id with no known note is shown as is)."""
    return join(
        (
            html('<a href="{u}">{t}</a>', u=note_url(known[i][0]), t=known[i][1])
            if i in known
            else html("<code>{i}</code>", i=i)
            for i in ids
        ),
        ", ",
    )


def superseded_badge(hit: Hit, replacements: Replacements | None = None) -> Markup:
    """'superseded by …', linking the notes that replace this one."""
    if not hit.superseded_by:
        return Markup("")
    return html(
        '<span class="badge superseded" title="replaced by {ids}">superseded by {links}</span>',
        ids=", ".join(hit.superseded_by),
        links=note_links(hit.superseded_by, replacements or {}),
    )


def snippet_html(hit: Hit) -> Markup:
    parts = [html("<mark>{t}</mark>", t=t) if is_match else escape(t) for t, is_match in hit.snippet_parts()]
    return join(parts)


def note_list(
    hits: Iterable[Hit],
    *,
    snippets: bool = False,
    empty: str = "No notes here yet.",
    replacements: Replacements | None = None,
) -> Markup:
    """Notes as a list of cards: title, chips, updated, and the search snippet if any."""
    items = []
    for hit in hits:
        snippet = html('<p class="snippet">{s}</p>', s=snippet_html(hit)) if snippets and hit.snippet else ""
        items.append(
            html(
                """<li class="note-item">
  <div class="note-item-head"><a class="note-title" href="{href}">{title}</a>{badge}</div>
  {snippet}
  <div class="note-meta">{type}{project}{tags}<span class="spacer"></span>{updated}</div>
</li>""",
                href=note_url(hit.path),
                title=hit.title or hit.path,
                badge=join([conflict_badge(hit.conflicted), superseded_badge(hit, replacements)]),
                snippet=snippet,
                type=type_chip(hit.type),
                project=project_chip(hit.project),
                tags=tag_chips(hit.tags[:6]),
                updated=when(hit.updated),
            )
        )
    if not items:
        return html('<p class="empty">{m}</p>', m=empty)
    return html('<ul class="note-list">{items}</ul>', items=items)


def bars(rows: list[tuple[str, int, str]], total: int) -> Markup:
    """A small horizontal bar chart: (label, count, link) rows."""
    out = []
    top = max((c for _, c, _ in rows), default=1) or 1
    for label, count, href in rows:
        width = max(1, round(100 * count / top))
        out.append(
            html(
                """<li><a href="{href}"><span class="bar-label">{label}</span>
<svg class="bar" viewBox="0 0 100 6" preserveAspectRatio="none" aria-hidden="true">
<rect class="bar-bg" width="100" height="6" rx="3"/><rect class="bar-fg" width="{w}" height="6" rx="3"/></svg>
<span class="bar-count">{count}</span></a></li>""",
                href=href,
                label=label,
                w=width,
                count=count,
            )
        )
    return html('<ul class="bars">{rows}</ul>', rows=out)


def sync_card(store: Any) -> Markup:
    """This machine's last syncs (from its sync log), its peers with their last success, and the
    machines that push here with the work of theirs that waits to be integrated."""
    summary = bridge.last_sync(store)
    pushers = bridge.pushers(store)
    rows = []
    if summary is None:
        rows.append(Markup('<tr><td colspan="2" class="muted">This machine has not synced yet.</td></tr>'))
    else:
        for entry, label, always in (
            (summary["last_sync"], "Last sync", True),
            (summary["last_ok"], "Last success", True),
            (summary["last_error"], "Last problem", False),
        ):
            if entry or always:
                rows.append(
                    html("<tr><th>{l}</th><td>{v}</td></tr>", l=label, v=bridge.describe_entry(entry))
                )
    peer_rows = [
        html(
            "<tr><td><code>{n}</code></td><td class='muted url'>{u}</td><td>{k}</td><td>{ok}</td><td class='msg'>{err}</td></tr>",
            n=p.get("name", ""),
            u=_homely(p.get("url", "")),
            k=p.get("kind") or "—",
            ok=when(str(p.get("last_ok") or "")),
            err=p.get("last_error") or "",
        )
        for p in bridge.peers(store)
    ]
    peers_html = (
        html(
            '<div class="table-scroll"><table class="table"><thead><tr><th>Peer</th><th>URL</th><th>Kind</th>'
            "<th>Last success</th><th>Last error</th></tr></thead><tbody>{r}</tbody></table></div>",
            r=peer_rows,
        )
        if peer_rows
        else Markup(
            '<p class="muted">No peers configured: this machine syncs only with the machines that push here.</p>'
        )
        if pushers
        else Markup('<p class="muted">No peers configured (<code>anamnesis peers add NAME URL</code>).</p>')
    )
    return html(
        '<table class="kv">{rows}</table><h3 class="sub">Peers</h3>{peers}{pushers}',
        rows=rows,
        peers=peers_html,
        pushers=_pushers_table(pushers),
    )


def _pushers_table(pushers: list[dict[str, Any]]) -> Markup | str:
    """The machines that push here (this machine is their peer) and what of theirs waits."""
    if not pushers:
        return ""
    rows = [
        html(
            "<tr><td><code>{m}</code></td><td>{at}</td><td>{w}</td></tr>",
            m=p["machine"],
            at=when(str(p.get("last_commit") or "")),
            w=html('<span class="badge warn">{n} waiting</span>', n=plural(p["waiting"], "commit"))
            if p["waiting"]
            else Markup('<span class="muted">all integrated</span>'),
        )
        for p in pushers
    ]
    return html(
        '<h3 class="sub">Machines that push here</h3><p class="muted">They have this machine as their peer; '
        "what they push is integrated by this machine's next sync (its timer, <code>anamnesis watch</code>, or "
        "<code>anamnesis sync</code>) and passed on from there.</p>"
        '<div class="table-scroll"><table class="table" id="pushers"><thead><tr><th>Machine</th><th>Newest commit</th>'
        "<th>Work</th></tr></thead><tbody>{r}</tbody></table></div>",
        r=rows,
    )


def overview(request: Request) -> HTMLResponse:
    """Counts, recent activity, sync state and open conflicts at a glance."""
    web = web_of(request)
    with web.index() as index:
        counts = index.counts()
        recent = index.recent(limit=8)
        conflicted = index.conflicted()
        tags = index.tags()[:24]
        replacements = replacements_of(index, recent + conflicted[:5])
    commits = recent_commits(web.store, limit=8)
    by_project = sorted(counts["by_project"].items(), key=lambda kv: -kv[1])[:12]
    project_rows = [
        (
            name,
            n,
            url(
                "/browse",
                project="" if name == "(global)" else name,
                scope="global" if name == "(global)" else "",
            ),
        )
        for name, n in by_project
    ]
    type_rows = [(t, n, url("/browse", type=t)) for t, n in counts["by_type"].items()]
    stats = html(
        """<div class="stats">
<a class="stat" href="/browse"><span class="stat-n">{notes}</span><span class="stat-l">notes</span></a>
<a class="stat" href="/browse"><span class="stat-n">{projects}</span><span class="stat-l">projects</span></a>
<a class="stat" href="/fleet"><span class="stat-n">{machines}</span><span class="stat-l">machines</span></a>
<a class="stat {ccls}" href="/conflicts"><span class="stat-n">{conflicts}</span><span class="stat-l">conflicts</span></a>
</div>""",
        notes=counts["notes"],
        projects=len([p for p in counts["by_project"] if p != "(global)"]),
        machines=len({c.machine for c in recent_commits(web.store, limit=2000)}),
        conflicts=counts["conflicted"],
        ccls="warn" if counts["conflicted"] else "",
    )
    activity = [
        html(
            '<li><span class="machine-dot"></span><code class="who">{m}</code> <span class="what">{msg}</span>'
            '<span class="spacer"></span>{d}</li>',
            m=c.machine,
            msg=short_message(c.message, c.machine),
            d=when(c.date),
        )
        for c in commits
    ]
    conflict_html = (
        note_list(conflicted[:5], replacements=replacements)
        if conflicted
        else Markup('<p class="muted ok">No conflicts. Every note is clean.</p>')
    )
    body = html(
        """<header class="page-head"><h1>Overview</h1>
<p class="lede">The memory on <code>{machine}</code> — {notes} in <code>{home}</code></p></header>
{stats}
<div class="grid two">
  <section class="card"><h2>By project</h2>{projects}</section>
  <section class="card"><h2>By type</h2>{types}<h3 class="sub">Tags</h3><div class="chips">{tags}</div></section>
  <section class="card"><h2>Recently updated</h2>{recent}</section>
  <section class="card"><h2>Recent activity</h2><ul class="activity">{activity}</ul></section>
  <section class="card"><h2>Sync</h2>{sync}</section>
  <section class="card"><h2>Conflicts</h2>{conflicts}</section>
</div>""",
        machine=web.machine,
        notes=plural(counts["notes"], "note"),
        home=_homely(web.store.memory),
        stats=stats,
        projects=bars(project_rows, counts["notes"])
        if project_rows
        else Markup('<p class="muted">No notes yet.</p>'),
        types=bars(type_rows, counts["notes"]) if type_rows else Markup('<p class="muted">No notes yet.</p>'),
        tags=[
            html(
                '<a class="chip tag" href="{u}">#{t} <small>{n}</small></a>',
                u=url("/browse", tag=t),
                t=t,
                n=n,
            )
            for t, n in tags
        ],
        recent=note_list(recent, replacements=replacements),
        activity=activity or [Markup('<li class="muted">No commits yet.</li>')],
        sync=sync_card(web.store),
        conflicts=conflict_html,
    )
    return web.render(request, title="Overview", body=body, active="overview")


def _facet(title: str, items: list[tuple[str, int, str, bool]]) -> Markup:
    lis = [
        html(
            '<li><a href="{u}" class="{c}"><span>{l}</span><small>{n}</small></a></li>',
            u=u,
            c="on" if on else "",
            l=label,
            n=n,
        )
        for label, n, u, on in items
    ]
    return html('<section class="facet"><h3>{t}</h3><ul>{lis}</ul></section>', t=title, lis=lis)


MAX_PAGE = 10**9  # far past any store; SQLite's offsets are 64-bit, a URL's number is not bounded


def _page_number(value: str | None) -> int:
    try:
        return min(MAX_PAGE, max(1, int(value or 1)))
    except ValueError:
        return 1


def browse_page(
    index: Index,
    *,
    project: str | None,
    kind: str | None,
    tag: str | None,
    only_global: bool,
    page: int,
    size: int = PAGE_SIZE,
) -> tuple[list[Hit], int]:
    """One page of notes matching the filters, newest first, and how many match in all."""
    return index.page(
        project=project, type=kind, tag=tag, only_global=only_global, offset=(page - 1) * size, size=size
    )


def pager(page: int, pages: int, link: Any) -> Markup:
    """Newer / older page links around "page N of M" (`link(n)` is the address of page n)."""
    if pages <= 1:
        return Markup("")

    def step(n: int, label: str, rel: str) -> Markup:
        if n < 1 or n > pages or n == page:
            return html('<span class="btn small ghost" aria-disabled="true">{l}</span>', l=label)
        return html('<a class="btn small ghost" href="{u}" rel="{r}">{l}</a>', u=link(n), r=rel, l=label)

    return html(
        '<nav class="pager" aria-label="Pages">{first}{prev}<span class="pager-at">Page {page} of {pages}</span>'
        "{next}{last}</nav>",
        first=step(1, "« Newest", "first"),
        prev=step(page - 1, "‹ Newer", "prev"),
        page=page,
        pages=pages,
        next=step(page + 1, "Older ›", "next"),
        last=step(pages, "Oldest »", "last"),
    )


def browse(request: Request) -> HTMLResponse:
    """Notes filtered by project, type and tag, newest first, a page at a time."""
    web = web_of(request)
    q = request.query_params
    project = q.get("project") or None
    kind = q.get("type") or None
    tag = q.get("tag") or None
    only_global = q.get("scope") == "global"
    page = _page_number(q.get("page"))
    with web.index() as index:
        counts = index.counts()
        tags = index.tags()[:40]
        hits, total = browse_page(
            index, project=project, kind=kind, tag=tag, only_global=only_global, page=page
        )
        replacements = replacements_of(index, hits)
    pages = max(1, -(-total // PAGE_SIZE))
    scope = "global" if only_global else None
    projects = [
        (
            name,
            n,
            url(
                "/browse",
                project=None if name == "(global)" else name,
                scope="global" if name == "(global)" else None,
                type=kind,
                tag=tag,
            ),
            (name == project) or (only_global and name == "(global)"),
        )
        for name, n in sorted(counts["by_project"].items())
    ]
    types = [
        (
            type_label(t),
            counts["by_type"].get(t, 0),
            url("/browse", project=project, scope=scope, type=t, tag=tag),
            t == kind,
        )
        for t in NOTE_TYPES
    ]
    tag_items = [
        (f"#{t}", n, url("/browse", project=project, scope=scope, type=kind, tag=t), t == tag)
        for t, n in tags
    ]
    filters = [
        f
        for f in (
            project and f"project {project}",
            only_global and "global notes",
            kind,
            tag and f"#{tag}",
        )
        if f
    ]
    heading = "All notes" if not filters else "Notes: " + ", ".join(str(f) for f in filters)
    clear = Markup('<a class="btn small ghost" href="/browse">Clear filters</a>') if filters else ""
    first = (page - 1) * PAGE_SIZE + 1
    shown = (
        html("{a}–{b} of {n}", a=f"{first:,}", b=f"{first + len(hits) - 1:,}", n=f"{total:,}")
        if hits
        else html("0 of {n}", n=f"{total:,}")
    )

    def link(n: int) -> str:
        return url("/browse", project=project, scope=scope, type=kind, tag=tag, page=n if n > 1 else None)

    nav = pager(page, pages, link)
    body = html(
        """<header class="page-head"><h1>{heading}</h1><p class="lede"><span id="shown">{shown}</span> {clear}</p></header>
<div class="with-facets">
  <input type="checkbox" id="facet-toggle" class="toggle-box" aria-label="Show the filters">
  <label for="facet-toggle" class="btn small ghost facet-button">Filters</label>
  <aside class="facets">{projects}{types}{tags}</aside>
  <section class="listing">{nav}{list}{nav}</section>
</div>""",
        heading=heading,
        shown=shown,
        clear=clear,
        projects=_facet("Projects", projects),
        types=_facet("Types", types),
        tags=_facet("Tags", tag_items),
        list=note_list(hits, empty=_empty_browse(total, page, pages, bool(filters)), replacements=replacements),
        nav=nav,
    )
    return web.render(request, title="Browse", body=body, active="browse")


def _empty_browse(total: int, page: int, pages: int, filtered: bool) -> str:
    """Why a browse page lists nothing: a page past the last one, no note matching, or no note at all."""
    if total and page > pages:
        return f"There is no page {page}: the last one is page {pages}."
    if filtered:
        return "No notes match these filters."
    return "No notes yet: write one with New note, or `anamnesis new`."


def _options(values: Iterable[tuple[str, str]], selected: str | None) -> Markup:
    return join(
        html(
            '<option value="{v}"{s}>{l}</option>',
            v=v,
            l=label,
            s=Markup(" selected") if v == (selected or "") else "",
        )
        for v, label in values
    )


def search(request: Request) -> HTMLResponse:
    """Search: the same ranking and snippets as `anamnesis search`."""
    web = web_of(request)
    q = request.query_params
    query = q.get("q", "").strip()
    project = q.get("project") or None
    kind = q.get("type") or None
    tag = q.get("tag") or None
    with web.index() as index:
        counts = index.counts()
        hits = run_search(index, query, project=project, type=kind, tag=tag, limit=50) if query else []
        replacements = replacements_of(index, hits)
    projects = [("", "All projects")] + [(p, p) for p in sorted(counts["by_project"]) if p != "(global)"]
    types = [("", "All types")] + [(t, type_label(t)) for t in NOTE_TYPES]
    if not query:
        results = Markup(
            '<p class="muted">Type words to search titles, tags and bodies. '
            'Plain words or a question work; <code>"a phrase"</code>, <code>NOT word</code> to exclude, <code>pref*</code> for a prefix.</p>'
        )
    else:
        results = html(
            '<p class="lede">{n} for <strong>{q}</strong></p>{list}',
            n=plural(len(hits), "result"),
            q=query,
            list=note_list(
                hits,
                snippets=True,
                empty="Nothing matches. Try fewer or other words.",
                replacements=replacements,
            ),
        )
    body = html(
        """<header class="page-head"><h1>Search</h1></header>
<form class="search-form" action="/search" method="get" role="search">
  <input type="search" name="q" value="{q}" placeholder="What do you remember?" autofocus aria-label="Query">
  <select name="project" aria-label="Project">{projects}</select>
  <select name="type" aria-label="Type">{types}</select>
  <input type="text" name="tag" value="{tag}" placeholder="tag" aria-label="Tag" class="narrow">
  <button class="btn" type="submit">Search</button>
</form>
<section class="results">{results}</section>""",
        q=query,
        projects=_options(projects, project),
        types=_options(types, kind),
        tag=tag or "",
        results=results,
    )
    return web.render(request, title=f"Search: {query}" if query else "Search", body=body, active="search")


def create_url(source: Note, missing: Unresolved | str) -> str:
    """The new-note form, filled in to answer a link from `source` that names no note yet."""
    if isinstance(missing, str):
        missing = Unresolved(missing, "wikilink")
    at = None
    if missing.kind == "markdown":
        at = posixpath.normpath(posixpath.join(posixpath.dirname(source.path), unquote(missing.target)))
    return url(
        "/new",
        title=missing.title,
        type=source.type if source.type not in GLOBAL_TYPES else None,
        project=source.project,
        at=at,
        linked_from=source.path,
    )


def _note_row(graph: LinkGraph, path: str) -> Markup:
    key = graph.notes.get(path)
    return html(
        '<li><a href="{u}">{t}</a> <code class="path">{p}</code></li>',
        u=note_url(path),
        t=(key.title if key else "") or path,
        p=path,
    )


def links_section(note: Note, graph: LinkGraph) -> Markup:
    """Linked from (backlinks), links to, and links to notes not written yet (with a create button)."""
    back = sorted(graph.backlinks_of(note.path), key=lambda p: (graph.notes[p].title.lower(), p))
    out = sorted(graph.links_of(note.path), key=lambda p: (graph.notes[p].title.lower(), p))
    missing = graph.unresolved_of(note.path)
    back_html = (
        html('<ul class="plain link-list">{i}</ul>', i=[_note_row(graph, p) for p in back])
        if back
        else Markup('<p class="muted">No note links here yet.</p>')
    )
    out_html = (
        html('<ul class="plain link-list">{i}</ul>', i=[_note_row(graph, p) for p in out])
        if out
        else Markup('<p class="muted">This note links to no other note.</p>')
    )
    missing_html = (
        html(
            '<section class="card links missing-links" id="not-written"><h2>Not written yet <small class="muted">{n}</small></h2>'
            '<p class="muted">Links in this note to notes that do not exist. Create one and the link works.</p>'
            '<ul class="plain link-list">{i}</ul></section>',
            n=len(missing),
            i=[
                html(
                    '<li><span class="wikilink missing">{t}</span> <a class="btn small" href="{u}">Create “{title}”</a></li>',
                    t=m.target,
                    u=create_url(note, m),
                    title=m.title,
                )
                for m in missing
            ],
        )
        if missing
        else ""
    )
    return html(
        """<div class="grid two link-cards">
<section class="card links" id="backlinks"><h2>Linked from <small class="muted">{nb}</small></h2>{back}</section>
<section class="card links" id="outlinks"><h2>Links to <small class="muted">{no}</small></h2>{out}</section>
</div>{missing}""",
        nb=len(back),
        no=len(out),
        back=back_html,
        out=out_html,
        missing=missing_html,
    )


def hit_of(index: Index, path: str) -> Hit | None:
    """The index's row for the note at `path` (with who supersedes it), or None."""
    return index.hit_at(path)


def supersession_banner(hit: Hit | None, known: Replacements) -> Markup:
    """ "Superseded by …" (with links) and "Supersedes …" for a note page."""
    if hit is None:
        return Markup("")
    parts = []
    if hit.superseded_by:
        parts.append(
            html(
                '<div class="alert warn superseded-banner" id="superseded"><strong>Superseded.</strong> '
                "What holds now is in {links}. Search ranks this note below it.</div>",
                links=note_links(hit.superseded_by, known),
            )
        )
    if hit.supersedes:
        parts.append(
            html(
                '<p class="supersedes muted" id="supersedes">Supersedes {links}.</p>',
                links=note_links(hit.supersedes, known),
            )
        )
    return join(parts)


def _front_matter_table(meta: dict[str, Any]) -> Markup:
    rows = []
    for key, value in meta.items():
        if key == "tags":
            shown: Markup | str = tag_chips(value) if value else "—"
        elif key == "project":
            shown = project_chip(value)
        elif isinstance(value, (dict, list)):
            shown = html("<code>{v}</code>", v=json.dumps(value, ensure_ascii=False, default=str))
        else:
            shown = str(value) if value not in (None, "") else "—"
        rows.append(html("<tr><th>{k}</th><td>{v}</td></tr>", k=key, v=shown))
    return html('<table class="kv">{rows}</table>', rows=rows)


def conflict_view(web: Any, note: Note, base: str) -> Markup:
    """A conflicted note's body: the text both sides agree on as markdown, and each conflict as
    its versions side by side, labelled by machine, with the buttons that keep one or all.

    The blocks come from `conflicts.parse_blocks`; the buttons post to the resolve page, which
    resolves through `conflicts.resolve_note` as `anamnesis resolve` does.
    """
    graph_resolver = None
    with web.index(fresh=False) as index:
        graph_resolver = web.link_graph(index).resolver
    me = web.machine

    def render(text: str) -> Markup:
        return render_markdown(text, source=note.path, resolver=graph_resolver)

    action = note_url(note.path, "conflicts")

    def keep_button(keep: str, label: str, ghost: bool = False) -> Markup:
        return resolve_form(action, web.csrf, base, keep, label, ghost=ghost, small=True)

    pieces = parse_blocks(note.body)
    blocks = [p for p in pieces if isinstance(p, Block)]
    machines = list(dict.fromkeys(name for b in blocks for name in b.machines))
    out: list[Markup] = []
    plain: list[str] = []

    def flush() -> None:
        if plain:
            out.append(html('<div class="markdown">{r}</div>', r=render("".join(plain))))
            plain.clear()

    for number, piece in enumerate(pieces):
        if isinstance(piece, Stray):
            flush()
            out.append(
                html(
                    '<pre class="raw stray" title="a conflict marker outside a complete block">{t}</pre>',
                    t=piece,
                )
            )
        elif isinstance(piece, Block):
            flush()
            sides = []
            for section in piece.sections:
                names = label_names(section.label) or [section.label or "unnamed"]
                who = join((html("<code>{n}</code>", n=n) for n in names), " + ")
                mine = Markup(' <span class="badge">this machine</span>') if me in names else ""
                text = section.text
                shown = (
                    html('<pre class="raw">{t}</pre>', t=text)
                    if piece.front_matter
                    else html('<div class="markdown">{r}</div>', r=render(text))
                    if text.strip()
                    else Markup('<p class="muted empty">(removed this text)</p>')
                )
                sides.append(
                    html(
                        """<section class="conflict-side" data-label="{label}"><h3>{who}{mine}</h3>{shown}
{keep}</section>""",
                        label=section.label,
                        who=who,
                        mine=mine,
                        shown=shown,
                        keep=keep_button(KEEP_PREFIX + section.label, f"Keep {section.label}'s version"),
                    )
                )
            where = "front matter" if piece.front_matter else f"line {piece.line}" if piece.line else ""
            out.append(
                html(
                    """<div class="conflict-block" id="conflict-{n}"><div class="conflict-head"><strong>Conflict</strong>
<span>{count}{where}</span></div><div class="conflict-sides">{sides}</div></div>""",
                    n=number,
                    count=plural(len(piece.sections), "version"),
                    where=f" · {where}" if where else "",
                    sides=sides,
                )
            )
        else:
            plain.append(piece)
    flush()
    every = " Keeping a machine's version keeps it in every conflict of this note." if len(blocks) > 1 else ""
    head = html(
        """<div class="alert warn conflict-banner" id="conflict-banner"><strong>Unresolved sync conflict.</strong>
<span>{machines} changed the same lines; each version is shown below, labelled by machine.{every}</span></div>
<div class="conflict-actions">{all}<a class="btn small ghost" href="{edit}">Compare and edit by hand</a></div>""",
        machines=join((html("<code>{m}</code>", m=m) for m in machines), " and ")
        if machines
        else Markup("Two machines"),
        every=every,
        all=keep_button("both", "Keep all versions" if len(machines) > 2 else "Keep both", ghost=True),
        edit=action,
    )
    return html('<div class="conflicted-body">{h}{b}</div>', h=head, b=join(out))


def note_page(request: Request) -> HTMLResponse:
    """One note: its body, links both ways, supersession, and what can be done with it."""
    web = web_of(request)
    relpath = request.path_params["path"]
    note = load_note(web.store, relpath)
    with web.index(fresh=False) as index:
        graph = web.link_graph(index)
        hit = hit_of(index, note.path)
        known = notes_by_id(index, [*(hit.superseded_by if hit else []), *(hit.supersedes if hit else [])])
    base = text_sha(working_text(web.store, relpath))
    if note.conflicted:
        rendered = conflict_view(web, note, base)
    else:
        rendered = html(
            '<div class="markdown">{r}</div>',
            r=render_markdown(
                note.body, source=note.path, resolver=graph.resolver, create=lambda t: create_url(note, t)
            ),
        )
    problems = (
        html('<div class="alert"><strong>Problems:</strong> {p}</div>', p="; ".join(note.problems))
        if note.problems and not note.conflicted
        else ""
    )
    delete = html(
        """<form method="post" action="{a}" class="inline" data-confirm="Delete this note? The deletion is committed; its text stays in the git history.">{csrf}
<input type="hidden" name="base" value="{b}"><button class="btn ghost danger" type="submit">Delete</button></form>""",
        a=note_url(note.path, "delete"),
        csrf=csrf_field(web.csrf),
        b=base,
    )
    body = html(
        """<article class="note">
<header class="page-head note-head">
  <div class="crumbs">{project} {type} <code class="path">{path}</code></div>
  <h1>{title}</h1>
  <div class="note-meta">{tags}<span class="spacer"></span>updated {updated} on <code>{machine}</code></div>
  <div class="actions note-actions">
    <a class="btn" href="{edit}">Edit</a>
    <a class="btn ghost" href="{hist}">History</a>
    <a class="btn ghost" href="{move}">Move / rename</a>
    <a class="btn ghost" href="{map}">Map around it</a>
    {delete}
  </div>
</header>
{supersession}{problems}
{rendered}
{links}
<details class="card front-matter"><summary>Front matter</summary>{meta}</details>
</article>""",
        project=project_chip(note.project),
        type=type_chip(note.type),
        path=note.path,
        title=note.title,
        tags=tag_chips(note.tags),
        updated=when(note.updated),
        machine=note.machine or "?",
        edit=note_url(note.path, "edit"),
        hist=note_url(note.path, "history"),
        move=note_url(note.path, "move"),
        map=url("/map", note=note.path),
        delete=delete,
        supersession=supersession_banner(hit, known),
        problems=problems,
        rendered=rendered,
        links=links_section(note, graph),
        meta=_front_matter_table(note.metadata()),
    )
    return web.render(request, title=note.title, body=body, active="browse")


def fleet(request: Request) -> HTMLResponse:
    """Every machine that wrote to this memory, and this machine's peers and last sync."""
    web = web_of(request)
    machines = machine_activity(web.store)
    summary = bridge.last_sync(web.store)
    last = summary["last_sync"] if summary else None
    own_sync = str((last or {}).get("at") or "")
    links = _fleet_links(
        machines,
        web.machine,
        [str(p.get("name")) for p in bridge.peers(web.store)],
        [str(p["machine"]) for p in bridge.pushers(web.store)],
    )
    rows = []
    for m in machines:
        mine = m.machine == web.machine
        rows.append(
            html(
                """<tr><td><span class="machine-dot"></span><code>{m}</code>{me}</td><td class="num">{n}</td>
<td>{first}</td><td>{last}</td><td>{sync}</td><td>{peers}</td><td class="msg">{msg}</td></tr>""",
                m=m.machine,
                me=Markup(' <span class="badge">this machine</span>') if mine else "",
                n=m.commits,
                first=when(m.first),
                last=when(m.last),
                sync=when(own_sync if mine and own_sync else m.last_sync),
                peers=join(
                    (
                        html('<code class="chip" title="{t}">{p}</code>', p=label, t=title)
                        for label, title in links[m.machine]
                    ),
                    " ",
                )
                or Markup('<span class="muted">—</span>'),
                msg=short_message(m.last_message, m.machine),
            )
        )
    body = html(
        """<header class="page-head"><h1>Fleet</h1>
<p class="lede">Every machine that has written to this memory, read from the git history (commits are
authored <code>anamnesis@&lt;machine&gt;</code>). This machine's last sync and peers come from its own
sync log, settings and the refs other machines push to; for the others, from their sync commits. Under
<em>Syncs with</em>: a name is a peer it fetches from; <code>→ M</code>: it pushes into M's store;
<code>← M</code>: M pushes into its store.</p></header>
<section class="card"><div class="table-scroll"><table class="table">
<thead><tr><th>Machine</th><th class="num">Commits</th><th>First seen</th><th>Last write</th><th>Last sync</th>
<th>Syncs with</th><th>Last change</th></tr></thead>
<tbody>{rows}</tbody></table></div></section>
<section class="card"><h2>This machine's sync</h2>{sync}</section>""",
        rows=rows or [Markup('<tr><td colspan="7" class="muted">No commits yet.</td></tr>')],
        sync=sync_card(web.store),
    )
    return web.render(request, title="Fleet", body=body, active="fleet")


def _fleet_links(
    machines: list[MachineActivity], me: str, peers: list[str], pushers: list[str]
) -> dict[str, list[tuple[str, str]]]:
    """Per machine, (label, title) of the machines it syncs with.

    This machine's come from now: its configured peers and the machines that
    push here. The others' from the history: the sources their sync merges
    named (a peer, or `incoming/M`: M pushed into its store), the merges of
    other machines that name them as `incoming/...` (they push there), and
    whether they push here.
    """
    pushes_to: dict[str, set[str]] = {m.machine: set() for m in machines}
    pushed_by: dict[str, set[str]] = {m.machine: set() for m in machines}
    fetches: dict[str, set[str]] = {m.machine: set() for m in machines}
    for m in machines:
        for source in m.peers:
            if source.startswith("incoming/"):
                sender = refs.incoming_machine(source)
                pushed_by[m.machine].add(sender)
                pushes_to.setdefault(sender, set()).add(m.machine)
            else:
                fetches[m.machine].add(source)
    pushed_by[me] = set(pushers)
    fetches[me] = set(peers)
    for sender in pushers:
        pushes_to.setdefault(sender, set()).add(me)
    return {
        m.machine: [(name, "a peer: its syncs fetch from it") for name in sorted(fetches[m.machine])]
        + [
            (f"→ {name}", f"pushes into {name}'s store")
            for name in sorted(pushes_to.get(m.machine, set()) - fetches[m.machine])
        ]
        + [(f"← {name}", f"{name} pushes into its store") for name in sorted(pushed_by[m.machine])]
        for m in machines
    }


def memory_map(request: Request) -> HTMLResponse:
    """The page that draws the memory map, or the map around one note (`?note=PATH`);
    the data comes from /api/graph."""
    web = web_of(request)
    around = request.query_params.get("note") or ""
    if around:
        note = load_note(web.store, around)
        heading = html(
            '<h1>Around <a href="{u}">{t}</a></h1><a class="btn small ghost" href="/map">Whole map</a>',
            u=note_url(note.path),
            t=note.title,
        )
        key = html(
            '<ul class="map-key" aria-label="Line styles"><li><span class="k-line link"></span>links</li>'
            '<li><span class="k-line tag"></span>shares tags</li></ul>'
        )
        title = f"Map around {note.title}"
    else:
        heading, key, title = Markup("<h1>Memory map</h1>"), Markup(""), "Memory map"
    body = html(
        """<div class="map-wrap">
<header class="map-bar">
  {heading}
  <div class="map-find">
    <input type="search" id="map-find" placeholder="Find a note…" aria-label="Find a note on the map"
      autocomplete="off" aria-controls="map-results" aria-autocomplete="list">
    <ul id="map-results" class="suggest" role="listbox" aria-label="Notes found" hidden></ul>
  </div>
  <div class="map-tools">
    <button class="btn small ghost" id="map-zoom-in" type="button" aria-label="Zoom in">+</button>
    <button class="btn small ghost" id="map-zoom-out" type="button" aria-label="Zoom out">−</button>
    <button class="btn small ghost" id="map-fit" type="button">Fit</button>
    <button class="btn small ghost" id="map-legend-toggle" type="button" aria-pressed="true"
      aria-controls="map-legend">Legend</button>
  </div>
  {key}
  <span class="muted" id="map-stats">Loading…</span>
</header>
<div class="map-stage"><canvas id="map" data-note="{around}" aria-label="Memory map: notes as dots, links as lines"></canvas>
<div id="map-tip" class="map-tip" hidden></div>
<ul id="map-legend" class="map-legend"></ul></div>
</div>""",
        heading=heading,
        key=key,
        around=around,
    )
    return web.render(request, title=title, body=body, active="map", scripts=("/static/map.js",), wide=True)


def graph_api(request: Request) -> JSONResponse:
    """Nodes and edges of the memory map (or of one note's neighbourhood, `?note=PATH`), as JSON."""
    web = web_of(request)
    around = request.query_params.get("note") or ""
    with web.index() as index:
        graph = web.link_graph(index)
        if around:
            return JSONResponse(neighbourhood(index.list_notes(limit=None), graph, around))
        data = web.cached_graph(
            index.generation(), lambda: build_graph(web.store, index.list_notes(limit=None), graph)
        )
    return JSONResponse(data)


def titles_api(request: Request) -> JSONResponse:
    """Notes whose title matches `q` (words at the start first), for `[[` completion in the editor."""
    web = web_of(request)
    typed = " ".join(request.query_params.get("q", "").split())[:100]
    with web.index(fresh=False) as index:
        rows = index.titles_like(typed)
    return JSONResponse(
        [
            {"id": note_id, "title": title or path, "path": path, "project": project or "global"}
            for note_id, title, path, project in rows
        ]
    )


def _homely(path: Path | str) -> str:
    """A local path with the user's home folder shown as ~, as people write it (URLs unchanged)."""
    if isinstance(path, str) and not path.startswith("/"):
        return path
    try:
        return "~/" + Path(path).absolute().relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)
