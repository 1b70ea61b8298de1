"""The sync and reindex buttons: the same core calls as `anamnesis sync` and `anamnesis reindex`."""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from anamnesis.errors import AnamnesisError
from anamnesis.web import bridge
from anamnesis.web.context import Web, checked_form, web_of
from anamnesis.web.html import Markup, html


def _value(value: Any) -> Markup:
    if isinstance(value, (dict, list)):
        if not value:
            return Markup('<span class="muted">none</span>')
        return html(
            '<pre class="raw small">{v}</pre>', v=json.dumps(value, indent=2, ensure_ascii=False, default=str)
        )
    return html("{v}", v=value)


def _report(title: str, ok: bool, summary: str, data: dict[str, Any]) -> Markup:
    rows = [
        html("<tr><th>{k}</th><td>{v}</td></tr>", k=k.replace("_", " "), v=_value(v)) for k, v in data.items()
    ]
    return html(
        """<header class="page-head"><h1>{title}</h1></header>
<div class="alert {cls}" id="action-result">{summary}</div>
<section class="card"><table class="kv">{rows}</table></section>
<p><a class="btn ghost" href="/">Back to the overview</a></p>""",
        title=title,
        cls="ok" if ok else "warn",
        summary=summary,
        rows=rows,
    )


def _sync(web: Web) -> tuple[bool, str, dict[str, Any]]:
    with web.write_lock:
        try:
            data = bridge.run_sync(web.store)
        except AnamnesisError as exc:
            return False, f"Sync failed: {exc}", {"exit_code": getattr(exc, "exit_code", 1)}
    summary = str(data.get("summary") or data.get("status") or data.get("message") or "Sync finished.")
    ok = not data.get("conflicts") and not data.get("errors") and data.get("ok", True) is not False
    return bool(ok), summary, data


def _reindex(web: Web) -> tuple[bool, str, dict[str, Any]]:
    from anamnesis.index import open_index

    with web.write_lock, open_index(web.store) as index:
        report = index.refresh()
    data = report.to_dict()
    summary = (
        f"Index up to date: {report.added} added, {report.updated} updated, {report.removed} removed, "
        f"{report.unchanged} unchanged in {report.seconds:.2f} s."
    )
    return not report.problems, summary, data


async def _run(request: Request, title: str, job: Any) -> Response:
    web = web_of(request)
    await checked_form(request)
    ok, summary, data = await run_in_threadpool(job, web)
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"ok": ok, "summary": summary, "result": data})
    page = await run_in_threadpool(
        lambda: web.render(request, title=title, body=_report(title, ok, summary, data), active="overview")
    )
    return page


async def sync_post(request: Request) -> Response:
    """Run a sync now and show its report."""
    return await _run(request, "Sync", _sync)


async def reindex_post(request: Request) -> Response:
    """Bring the index up to date with the files and show what changed."""
    return await _run(request, "Reindex", _reindex)
