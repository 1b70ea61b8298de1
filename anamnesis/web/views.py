"""Read-only pages: overview, browse, search, a note, the fleet, the memory map."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse

from anamnesis.index import Hit
from anamnesis.links import LinkResolver, NoteKey
from anamnesis.notes import NOTE_TYPES
from anamnesis.web import bridge
from anamnesis.web.context import web_of
from anamnesis.web.html import Markup, escape, html, join, note_url, tag_chips, url, when
from anamnesis.web.markdown import render_markdown

TYPE_LABELS = {"semantic": "fact", "procedural": "how-to", "episodic": "session", "preference": "preference"}
BROWSE_LIMIT = 500


def strip_machine(message: str, machine: str) -> str:
    """A commit message without the `<machine>:` prefix the page already shows."""
    head, sep, rest = message.partition(":")
    return rest.strip() if sep and head.strip() == machine else message


def short_message(message: str, machine: str) -> str:
    """A commit message for a narrow column: no machine prefix, note paths cut to their file name."""
    return re.sub(r"\S+/([^/\s]+\.md)\b", r"\1", strip_machine(message, machine))


def type_chip(kind: str) -> Markup:
    return html(
        '<a class="chip type type-{k}" href="{u}">{label}</a>',
        k=kind,
        u=url("/browse", type=kind),
        label=TYPE_LABELS.get(kind, kind),
    )


def project_chip(project: str | None) -> Markup:
    if not project:
        return Markup('<span class="chip project global">global</span>')
    return html('<a class="chip project" href="{u}">{p}</a>', u=url("/browse", project=project), p=project)


def conflict_badge(conflicted: bool) -> Markup:
    return Markup('<span class="badge warn">conflict</span>') if conflicted else Markup("")


def superseded_badge(hit: Hit) -> Markup:
    """'superseded', naming the ids of the notes that replace this one."""
    if not hit.superseded_by:
        return Markup("")
    return html(
        '<span class="badge" title="replaced by {ids}">superseded</span>', ids=", ".join(hit.superseded_by)
    )


def snippet_html(hit: Hit) -> Markup:
    parts = [html("<mark>{t}</mark>", t=t) if is_match else escape(t) for t, is_match in hit.snippet_parts()]
    return join(parts)


def note_list(hits: Iterable[Hit], *, snippets: bool = False, empty: str = "No notes here yet.") -> Markup:
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
                badge=join([conflict_badge(hit.conflicted), superseded_badge(hit)]),
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
    """This machine's last syncs (from its sync log) and its peers with their last success."""
    summary = bridge.last_sync(store)
    rows = []
    if summary is None:
        rows.append(Markup('<tr><td colspan="2" class="muted">This machine has not synced yet.</td></tr>'))
    else:
        for key, label in (
            ("last_sync", "Last sync"),
            ("last_ok", "Last success"),
            ("last_error", "Last problem"),
        ):
            entry = summary.get(key)
            if entry or key != "last_error":
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
            '<table class="table"><thead><tr><th>Peer</th><th>URL</th><th>Kind</th><th>Last success</th>'
            "<th>Last error</th></tr></thead><tbody>{r}</tbody></table>",
            r=peer_rows,
        )
        if peer_rows
        else Markup('<p class="muted">No peers configured (<code>anamnesis peers add NAME URL</code>).</p>')
    )
    return html(
        '<table class="kv">{rows}</table><h3 class="sub">Peers</h3>{peers}', rows=rows, peers=peers_html
    )


def overview(request: Request) -> HTMLResponse:
    """Counts, recent activity, sync state and open conflicts at a glance."""
    from anamnesis import history

    web = web_of(request)
    with web.index() as index:
        counts = index.counts()
        recent = index.recent(limit=8)
        conflicted = index.conflicted()
        tags = index.tags()[:24]
    commits = history.commits(web.store, limit=8)
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
    type_rows = [(TYPE_LABELS.get(t, t), n, url("/browse", type=t)) for t, n in counts["by_type"].items()]
    stats = html(
        """<div class="stats">
<a class="stat" href="/browse"><span class="stat-n">{notes}</span><span class="stat-l">notes</span></a>
<a class="stat" href="/browse"><span class="stat-n">{projects}</span><span class="stat-l">projects</span></a>
<a class="stat" href="/fleet"><span class="stat-n">{machines}</span><span class="stat-l">machines</span></a>
<a class="stat {ccls}" href="/conflicts"><span class="stat-n">{conflicts}</span><span class="stat-l">conflicts</span></a>
</div>""",
        notes=counts["notes"],
        projects=len([p for p in counts["by_project"] if p != "(global)"]),
        machines=len({c.machine for c in history.commits(web.store, limit=2000)}),
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
        note_list(conflicted[:5])
        if conflicted
        else Markup('<p class="muted ok">No conflicts. Every note is clean.</p>')
    )
    body = html(
        """<header class="page-head"><h1>Overview</h1>
<p class="lede">The memory on <code>{machine}</code> — {notes} notes in <code>{home}</code></p></header>
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
        notes=counts["notes"],
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
        recent=note_list(recent),
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


def browse(request: Request) -> HTMLResponse:
    """Notes filtered by project, type and tag, newest first."""
    web = web_of(request)
    q = request.query_params
    project = q.get("project") or None
    kind = q.get("type") or None
    tag = q.get("tag") or None
    only_global = q.get("scope") == "global"
    with web.index() as index:
        counts = index.counts()
        tags = index.tags()[:40]
        hits = index.list_notes(
            project=project, type=kind, tag=tag, limit=None if only_global else BROWSE_LIMIT
        )
    if only_global:
        hits = [h for h in hits if not h.project][:BROWSE_LIMIT]
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
            TYPE_LABELS.get(t, t),
            counts["by_type"].get(t, 0),
            url("/browse", project=project, type=t, tag=tag),
            t == kind,
        )
        for t in NOTE_TYPES
    ]
    tag_items = [(f"#{t}", n, url("/browse", project=project, type=kind, tag=t), t == tag) for t, n in tags]
    filters = [
        f
        for f in (
            project and f"project {project}",
            only_global and "global notes",
            kind and TYPE_LABELS.get(kind, kind),
            tag and f"#{tag}",
        )
        if f
    ]
    heading = "All notes" if not filters else "Notes: " + ", ".join(str(f) for f in filters)
    clear = Markup('<a class="btn small ghost" href="/browse">Clear filters</a>') if filters else ""
    more = (
        html(
            '<p class="muted">Showing the {n} most recent; narrow the filters to see others.</p>',
            n=BROWSE_LIMIT,
        )
        if len(hits) >= BROWSE_LIMIT
        else ""
    )
    body = html(
        """<header class="page-head"><h1>{heading}</h1><p class="lede">{n} shown {clear}</p></header>
<div class="with-facets">
  <aside class="facets">{projects}{types}{tags}</aside>
  <section>{list}{more}</section>
</div>""",
        heading=heading,
        n=len(hits),
        clear=clear,
        projects=_facet("Projects", projects),
        types=_facet("Types", types),
        tags=_facet("Tags", tag_items),
        list=note_list(hits, empty="No notes match these filters."),
        more=more,
    )
    return web.render(request, title="Browse", body=body, active="browse")


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
    from anamnesis.search import search as run_search

    web = web_of(request)
    q = request.query_params
    query = q.get("q", "").strip()
    project = q.get("project") or None
    kind = q.get("type") or None
    tag = q.get("tag") or None
    with web.index() as index:
        counts = index.counts()
        hits = run_search(index, query, project=project, type=kind, tag=tag, limit=50) if query else []
    projects = [("", "All projects")] + [(p, p) for p in sorted(counts["by_project"]) if p != "(global)"]
    types = [("", "All types")] + [(t, TYPE_LABELS[t]) for t in NOTE_TYPES]
    if not query:
        results = Markup(
            '<p class="muted">Type words to search titles, tags and bodies. '
            'Plain words or a question work; <code>"a phrase"</code>, <code>NOT word</code> to exclude, <code>pref*</code> for a prefix.</p>'
        )
    else:
        results = html(
            '<p class="lede">{n} result{s} for <strong>{q}</strong></p>{list}',
            n=len(hits),
            s="" if len(hits) == 1 else "s",
            q=query,
            list=note_list(hits, snippets=True, empty="Nothing matches. Try fewer or other words."),
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


def link_resolver(web_index: Any) -> LinkResolver:
    """A resolver over every indexed note (for links in rendered bodies)."""
    hits = web_index.list_notes(limit=None)
    return LinkResolver(NoteKey(h.path, h.id, h.title) for h in hits)


def _front_matter_table(meta: dict[str, Any]) -> Markup:
    rows = []
    for key, value in meta.items():
        if key == "tags":
            shown: Markup | str = tag_chips(value) if value else "—"
        elif key == "project":
            shown = project_chip(value)
        elif isinstance(value, (dict, list)):
            import json

            shown = html("<code>{v}</code>", v=json.dumps(value, ensure_ascii=False, default=str))
        else:
            shown = str(value) if value not in (None, "") else "—"
        rows.append(html("<tr><th>{k}</th><td>{v}</td></tr>", k=key, v=shown))
    return html('<table class="kv">{rows}</table>', rows=rows)


def note_page(request: Request) -> HTMLResponse:
    """One note: rendered body, its front matter, links to edit and history."""
    from anamnesis.store import load_note

    web = web_of(request)
    relpath = request.path_params["path"]
    note = load_note(web.store, relpath)
    with web.index(fresh=False) as index:
        resolver = link_resolver(index)
    rendered = render_markdown(note.body, source=note.path, resolver=resolver)
    banner = ""
    if note.conflicted:
        banner = html(
            '<div class="alert warn"><strong>This note has an unresolved sync conflict.</strong> '
            'Both versions are kept in it between conflict markers. <a class="btn small" href="{u}">Resolve it</a></div>',
            u="/conflicts/" + note_url(note.path)[len("/note/") :],
        )
    problems = (
        html('<div class="alert"><strong>Problems:</strong> {p}</div>', p="; ".join(note.problems))
        if note.problems
        else ""
    )
    body = html(
        """<article class="note">
<header class="page-head note-head">
  <div class="crumbs">{project} {type} <code class="path">{path}</code></div>
  <h1>{title}</h1>
  <div class="note-meta">{tags}<span class="spacer"></span>updated {updated} on <code>{machine}</code></div>
  <div class="actions">
    <a class="btn" href="{edit}">Edit</a>
    <a class="btn ghost" href="{hist}">History</a>
  </div>
</header>
{banner}{problems}
<div class="markdown">{rendered}</div>
<details class="card front-matter"><summary>Front matter</summary>{meta}</details>
</article>""",
        project=project_chip(note.project),
        type=type_chip(note.type),
        path=note.path,
        title=note.title,
        tags=tag_chips(note.tags),
        updated=when(note.updated),
        machine=note.machine or "?",
        edit="/edit/" + note_url(note.path)[len("/note/") :],
        hist="/history/" + note_url(note.path)[len("/note/") :],
        banner=banner,
        problems=problems,
        rendered=rendered,
        meta=_front_matter_table(note.metadata()),
    )
    return web.render(request, title=note.title, body=body, active="browse")


def fleet(request: Request) -> HTMLResponse:
    """Every machine that wrote to this memory, and this machine's peers and last sync."""
    from anamnesis import history

    web = web_of(request)
    machines = history.machines(web.store)
    summary = bridge.last_sync(web.store) or {}
    own_sync = str((summary.get("last_sync") or {}).get("at") or "")
    own_peers = {str(p.get("name")) for p in bridge.peers(web.store)}
    rows = []
    for m in machines:
        mine = m.machine == web.machine
        peers = sorted((m.peers | own_peers) if mine else m.peers)
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
                    (html('<code class="chip">{p}</code>', p=p.removeprefix("incoming/")) for p in peers), " "
                )
                or Markup('<span class="muted">—</span>'),
                msg=short_message(m.last_message, m.machine),
            )
        )
    body = html(
        """<header class="page-head"><h1>Fleet</h1>
<p class="lede">Every machine that has written to this memory, read from the git history (commits are
authored <code>anamnesis@&lt;machine&gt;</code>). This machine's last sync and peers come from its own
sync log and settings; for the others, from their sync commits.</p></header>
<section class="card"><table class="table">
<thead><tr><th>Machine</th><th class="num">Commits</th><th>First seen</th><th>Last write</th><th>Last sync</th>
<th>Peers</th><th>Last change</th></tr></thead>
<tbody>{rows}</tbody></table></section>
<section class="card"><h2>This machine's sync</h2>{sync}</section>""",
        rows=rows or [Markup('<tr><td colspan="7" class="muted">No commits yet.</td></tr>')],
        sync=sync_card(web.store),
    )
    return web.render(request, title="Fleet", body=body, active="fleet")


def memory_map(request: Request) -> HTMLResponse:
    """The page that draws the memory map (the data comes from /api/graph)."""
    web = web_of(request)
    body = Markup(
        """<div class="map-wrap">
<header class="map-bar">
  <h1>Memory map</h1>
  <input type="search" id="map-filter" placeholder="Highlight notes…" aria-label="Highlight notes">
  <div class="map-tools">
    <button class="btn small ghost" id="map-zoom-in" type="button" aria-label="Zoom in">+</button>
    <button class="btn small ghost" id="map-zoom-out" type="button" aria-label="Zoom out">−</button>
    <button class="btn small ghost" id="map-fit" type="button">Fit</button>
  </div>
  <span class="muted" id="map-stats">Loading…</span>
</header>
<div class="map-stage"><canvas id="map" aria-label="Memory map: notes as dots, links as lines"></canvas>
<div id="map-tip" class="map-tip" hidden></div>
<ul id="map-legend" class="map-legend"></ul></div>
</div>"""
    )
    return web.render(
        request, title="Memory map", body=body, active="map", scripts=("/static/map.js",), wide=True
    )


def graph_api(request: Request) -> JSONResponse:
    """Nodes and edges of the memory map, as JSON."""
    from anamnesis.web.graph import build_graph

    web = web_of(request)
    with web.index() as index:
        hits = index.list_notes(limit=None)
    return JSONResponse(build_graph(web.store, hits))


def _homely(path: Path | str) -> str:
    """A local path with the user's home folder shown as ~, as people write it (URLs unchanged)."""
    if isinstance(path, str) and not path.startswith("/"):
        return path
    try:
        return "~/" + Path(path).absolute().relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)
