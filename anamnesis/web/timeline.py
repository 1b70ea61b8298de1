"""The Timeline page: what happened, was decided and is still open, by day, across machines."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

from anamnesis.agents import Entry, build_timeline
from anamnesis.base.errors import UsageError
from anamnesis.store import check_project_key
from anamnesis.web.context import web_of
from anamnesis.web.html import Markup, html, join, note_url, url, when

SPANS = (("1d", "a day"), ("7d", "a week"), ("14d", "two weeks"), ("30d", "a month"))


def _items(label: str, items: list[str], cls: str) -> Markup:
    if not items:
        return Markup("")
    return html(
        '<div class="tl-{cls}"><span class="muted">{label}</span><ul>{items}</ul></div>',
        cls=cls,
        label=label,
        items=join(html("<li>{i}</li>", i=item) for item in items),
    )


def _entry(entry: Entry) -> Markup:
    what = "session" if entry.kind == "session" else f"{entry.change} {entry.type}"
    replaced = (
        html(' <span class="muted">replaces {t}</span>', t=", ".join(entry.supersedes))
        if entry.supersedes
        else ""
    )
    return html(
        """<li class="tl-entry tl-{kind}"><div class="tl-head">{when} <code class="chip">{machine}</code>
<span class="chip">{project}</span> <span class="badge">{what}</span> <a href="{href}">{title}</a>{replaced}</div>
{outcome}{decided}{open}</li>""",
        kind=entry.kind,
        when=when(entry.when),
        machine=entry.machine or "?",
        project=entry.project or "global",
        what=what,
        href=note_url(entry.path),
        title=entry.title,
        replaced=replaced,
        outcome=html('<p class="tl-outcome">{o}</p>', o=entry.outcome) if entry.outcome else "",
        decided=_items("decided", entry.decisions, "decided"),
        open=_items("open", entry.open_items, "open"),
    )


def timeline_page(request: Request) -> HTMLResponse:
    """GET /timeline?since=7d&project=KEY"""
    web = web_of(request)
    since = request.query_params.get("since") or "7d"
    project = (request.query_params.get("project") or "").strip() or None
    if project is not None:
        project = check_project_key(project)
    if len(since) > 40:
        raise UsageError("since is too long; use a span like 7d or a date")
    result = build_timeline(web.store, since=since, project=project)
    spans = join(
        html(
            '<a class="{cls}" href="{u}">{label}</a> ',
            cls="btn small" + ("" if value == since else " ghost"),
            u=url("/timeline", since=value, project=project or ""),
            label=label,
        )
        for value, label in SPANS
    )
    days = join(
        html(
            '<section class="card tl-day"><h2>{day}</h2><ul class="tl-list">{entries}</ul></section>',
            day=day,
            entries=join(_entry(e) for e in entries),
        )
        for day, entries in result.days
    )
    still = join(
        html(
            '<li>{item} <span class="chip">{p}</span> <span class="muted">since {s}</span></li>',
            item=i["item"],
            p=i["project"],
            s=i["since"],
        )
        for i in result.still_open
    )
    body = html(
        """<header class="page-head"><h1>Timeline</h1>
<p class="lede">What happened, what was decided and what is still open, day by day, on every machine
(from session notes and the notes added or changed){scope}.</p><p>{spans}</p></header>
<section class="card tl-still" id="still-open"><h2>Still open</h2>{still}</section>
{days}""",
        scope=html(" for <code>{p}</code>", p=project) if project else "",
        spans=spans,
        still=html("<ul>{s}</ul>", s=still)
        if result.still_open
        else Markup('<p class="muted">Nothing left open.</p>'),
        days=days
        or Markup('<section class="card"><p class="muted">Nothing happened in this span.</p></section>'),
    )
    return web.render(request, title="Timeline", body=body, active="timeline")
