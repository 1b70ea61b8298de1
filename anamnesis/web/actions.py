"""The sync and reindex buttons: the same core calls as `anamnesis sync` and `anamnesis reindex`.

Each POST runs the action once, keeps its report and redirects (303) to
`/actions/report/<key>`, so reloading the page shows the report again
instead of syncing again. Scripts asking for JSON get the report directly.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from anamnesis.base.errors import AnamnesisError
from anamnesis.base.notes import is_note_path
from anamnesis.base.text import plural
from anamnesis.search import open_index
from anamnesis.web import bridge
from anamnesis.web.context import Action, Report, Web, checked_form, web_of
from anamnesis.web.html import Markup, html, note_url


def _value(value: Any) -> Markup:
    if isinstance(value, (dict, list)):
        if not value:
            return Markup('<span class="muted">none</span>')
        return html(
            '<pre class="raw small">{v}</pre>', v=json.dumps(value, indent=2, ensure_ascii=False, default=str)
        )
    return html("{v}", v=value)


def _paths(paths: list[str]) -> Markup:
    if not paths:
        return Markup('<span class="muted">none</span>')
    items = [
        html('<li><a href="{u}">{p}</a></li>', u=note_url(p), p=p)
        if is_note_path(p)
        else html("<li><code>{p}</code></li>", p=p)
        for p in paths[:50]
    ]
    more = html('<li class="muted">… and {n} more</li>', n=len(paths) - 50) if len(paths) > 50 else ""
    return html('<ul class="plain paths">{i}{m}</ul>', i=items, m=more)


def _details(data: dict[str, Any]) -> Markup:
    rows = [
        html("<tr><th>{k}</th><td>{v}</td></tr>", k=k.replace("_", " "), v=_value(v)) for k, v in data.items()
    ]
    return html(
        '<details class="card"><summary>Full report</summary><table class="kv">{r}</table></details>', r=rows
    )


def _report(title: str, ok: bool, summary: str, data: dict[str, Any], sections: Markup | str = "") -> Markup:
    return html(
        """<header class="page-head"><h1>{title}</h1>
<p class="lede">This report stays here: reloading the page does not run it again.</p></header>
<div class="alert {cls}" id="action-result">{summary}</div>
{sections}{details}
<p><a class="btn ghost" href="/">Back to the overview</a></p>""",
        title=title,
        cls="ok" if ok else "warn",
        summary=summary,
        sections=sections,
        details=_details(data),
    )


def sync_sections(data: dict[str, Any]) -> Markup:
    """The parts of a sync report a person reads: peers, conflicts, notes changed, local commits."""
    peer_rows = [
        html(
            "<tr><td><code>{n}</code></td><td>{s}</td><td class='num'>{r}</td><td class='num'>{t}</td>"
            "<td class='msg'>{d}</td></tr>",
            n=p.get("name", ""),
            s=p.get("status", ""),
            r=p.get("received", 0),
            t=p.get("sent", 0),
            d=p.get("detail", ""),
        )
        for p in data.get("peers") or []
    ]
    peers = (
        html(
            '<table class="table"><thead><tr><th>Peer</th><th>Status</th><th class="num">Received</th>'
            '<th class="num">Sent</th><th>Detail</th></tr></thead><tbody>{r}</tbody></table>',
            r=peer_rows,
        )
        if peer_rows
        else Markup(
            '<p class="muted">No peers configured: only what other machines pushed here was integrated.</p>'
        )
        if data.get("incoming")
        else Markup('<p class="muted">No peers configured: local changes were committed only.</p>')
    )
    incoming = [
        html(
            "<li><code>{m}</code> (pushes here): {n} integrated</li>",
            m=i["machine"],
            n=plural(i["received"], "commit"),
        )
        for i in data.get("incoming") or []
        if i.get("received")
    ]
    if incoming:
        peers = html('{p}<ul class="plain">{i}</ul>', p=peers, i=incoming)
    conflicts = [
        html(
            '<li><a class="btn small" href="{u}">Resolve {p}</a></li>', u="/conflicts/" + note_url(p)[6:], p=p
        )
        for p in data.get("conflicts") or []
    ] + [
        html(
            '<li><a class="btn small" href="{u}">Finish {p}</a> <span class="muted small">held back: a marker '
            "line outside a complete block (line {n}); not committed until it is whole</span></li>",
            u=note_url(h["path"], "conflicts"),
            p=h["path"],
            n=", ".join(str(line["line"]) for line in h.get("lines") or []),
        )
        for h in data.get("held_back") or []
        if isinstance(h, dict) and h.get("path")
    ]
    return html(
        """<section class="card"><h2>Peers</h2>{peers}</section>
{conflicts}
<div class="grid two"><section class="card"><h2>Notes changed</h2>{changed}</section>
<section class="card"><h2>Committed from this machine</h2>{committed}</section></div>""",
        peers=peers,
        conflicts=html(
            '<section class="card"><h2>Conflicts</h2><ul class="plain resolve-links">{c}</ul></section>',
            c=conflicts,
        )
        if conflicts
        else "",
        changed=_paths(list(data.get("changed") or [])),
        committed=_paths(list(data.get("committed") or [])),
    )


def sync_summary(data: dict[str, Any]) -> str:
    """One line about a sync: outcome, what moved, how long."""
    parts = [f"sent {data.get('sent', 0)}", f"received {plural(int(data.get('received') or 0), 'commit')}"]
    parts.append(f"{plural(len(data.get('changed') or []), 'note')} changed")
    if data.get("committed"):
        parts.append(f"{plural(len(data['committed']), 'local file')} committed")
    for key, noun in (("conflicts", "in conflict"), ("held_back", "held back (half resolved)")):
        count = len(data.get(key) or [])
        if count:
            parts.append(f"{plural(count, 'note')} {noun}")
    outcome = str(data.get("outcome") or "finished")
    return (
        f"{outcome[:1].upper()}{outcome[1:]}: {', '.join(parts)} in {float(data.get('seconds') or 0):.2f} s."
    )


def _sync(web: Web) -> tuple[bool, str, dict[str, Any]]:
    with web.write_lock:
        try:
            data = bridge.run_sync(web.store)
        except AnamnesisError as exc:
            return False, f"Sync failed: {exc}", {"exit_code": getattr(exc, "exit_code", 1)}
    return data.get("exit_code") == 0, sync_summary(data), data


def _reindex(web: Web) -> tuple[bool, str, dict[str, Any]]:
    with web.write_lock, open_index(web.store) as index:
        report = index.refresh()
    data = report.to_dict()
    summary = (
        f"Index up to date: {report.added} added, {report.updated} updated, {report.removed} removed, "
        f"{report.unchanged} unchanged in {report.seconds:.2f} s."
    )
    if report.problems:
        summary += (
            f" {plural(len(report.problems), 'file has', 'files have')} problems (see `anamnesis doctor`)."
        )
    return True, summary, data


TITLES: dict[Action, str] = {"sync": "Sync", "reindex": "Reindex"}


async def _run(request: Request, kind: Action, job: Any) -> Response:
    web = web_of(request)
    await checked_form(request)
    ok, summary, data = await run_in_threadpool(job, web)
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"ok": ok, "summary": summary, "result": data})
    key = web.keep_report(Report(kind, ok, summary, data))
    return RedirectResponse(f"/actions/report/{key}", status_code=303)


async def sync_post(request: Request) -> Response:
    """Run a sync now, then show its report (after a redirect)."""
    return await _run(request, "sync", _sync)


async def reindex_post(request: Request) -> Response:
    """Bring the index up to date with the files, then show what changed (after a redirect)."""
    return await _run(request, "reindex", _reindex)


def report_page(request: Request) -> HTMLResponse:
    """The report of a sync or reindex this dashboard ran (kept for the last few)."""
    web = web_of(request)
    report = web.reports.get(request.path_params["key"])
    if report is None:
        raise HTTPException(404)
    title = TITLES.get(report.kind, report.kind)
    sections = sync_sections(report.data) if report.kind == "sync" and "outcome" in report.data else ""
    body = _report(title, report.ok, report.summary, report.data, sections)
    return web.render(request, title=title, body=body, active="overview")
