"""The dashboard's ASGI app: routes, error pages, static files, and the security gate."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from anamnesis.base.errors import AnamnesisError, NoteChanged, NoteNotFound, OutsideStore, UsageError
from anamnesis.base.listen import allowed_hosts, is_loopback
from anamnesis.base.notes import is_note_path
from anamnesis.base.paths import Store
from anamnesis.web import actions, conflicts, edit, timeline, views
from anamnesis.web.context import CsrfError, Web, web_of
from anamnesis.web.html import html
from anamnesis.web.security import Guard, csrf_for

STATIC_DIR = Path(__file__).resolve().parent / "static"
MAX_BODY = (
    4_000_000  # a form with a whole note in it, URL-encoded (context.FORM_FIELD_MAX), and room to spare
)


def _status_for(exc: AnamnesisError) -> int:
    if isinstance(exc, NoteNotFound):
        return 404
    if isinstance(exc, CsrfError):
        return 403
    if isinstance(exc, (OutsideStore, UsageError)):
        return 400
    if isinstance(exc, NoteChanged):
        return 409
    return 500


async def _core_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AnamnesisError)
    status = _status_for(exc)
    body = html(
        '<header class="page-head"><h1>{t}</h1></header><div class="alert warn">{m}</div>'
        '<p><a class="btn ghost" href="/">Back to the overview</a></p>',
        t="Not found" if status == 404 else "That did not work",
        m=str(exc),
    )
    try:
        return web_of(request).render(request, title="Error", body=body, status=status)
    except Exception:
        return HTMLResponse(body, status_code=status)


HTTP_ERRORS = {
    404: ("Not found", "There is no page at this address. The note may have been moved or deleted."),
    405: ("Not allowed", "This address does not take that kind of request."),
}


async def _http_error(request: Request, exc: Exception) -> Response:
    """An HTTP error (unknown address, wrong method) as a page of the dashboard, with its layout."""
    assert isinstance(exc, HTTPException)
    title, text = HTTP_ERRORS.get(exc.status_code, ("That did not work", str(exc.detail)))
    body = html(
        '<header class="page-head"><h1>{t}</h1><p class="lede">{code} · <code>{path}</code></p></header>'
        '<div class="alert warn">{m}</div>'
        '<p class="actions"><a class="btn" href="/">Overview</a><a class="btn ghost" href="/browse">Browse notes</a>'
        '<a class="btn ghost" href="/search">Search</a></p>',
        t=title,
        code=exc.status_code,
        path=request.url.path,
        m=text,
    )
    headers = getattr(exc, "headers", None)
    try:
        response: Response = web_of(request).render(request, title=title, body=body, status=exc.status_code)
    except Exception:
        response = HTMLResponse(body, status_code=exc.status_code)
    if headers:
        response.headers.update(headers)
    return response


def _notes_only(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """A page about one note answers only for a note's path: an alias file, `.gitattributes` or a
    hidden folder's file is no note, and its form would write front matter into it."""

    def check(request: Request) -> None:
        relpath = str(request.path_params.get("path", ""))
        if not is_note_path(relpath):
            raise NoteNotFound(f"{relpath} is not a note (notes are .md files outside hidden folders)")

    if inspect.iscoroutinefunction(endpoint):  # Starlette awaits these and runs the others in threads

        async def guarded_async(request: Request) -> Any:
            check(request)
            return await endpoint(request)

        return guarded_async

    def guarded(request: Request) -> Any:
        check(request)
        return endpoint(request)

    return guarded


def create_app(store: Store, *, token: str, host: str = "127.0.0.1", port: int = 0) -> Starlette:
    """The dashboard for `store`, answering only to `host`:`port` and the holder of `token`."""
    web = Web(store, csrf_for(token))
    routes = [
        Route("/", views.overview),
        Route("/browse", views.browse),
        Route("/search", views.search),
        Route("/note/{path:path}", _notes_only(views.note_page)),
        Route("/new", edit.new_page, methods=["GET"]),
        Route("/new", edit.new_post, methods=["POST"]),
        Route("/edit/{path:path}", _notes_only(edit.edit_page), methods=["GET"]),
        Route("/edit/{path:path}", _notes_only(edit.edit_post), methods=["POST"]),
        Route("/history/{path:path}", _notes_only(edit.history_page)),
        Route("/restore/{path:path}", _notes_only(edit.restore_post), methods=["POST"]),
        Route("/move/{path:path}", _notes_only(edit.move_page), methods=["GET"]),
        Route("/move/{path:path}", _notes_only(edit.move_post), methods=["POST"]),
        Route("/delete/{path:path}", _notes_only(edit.delete_post), methods=["POST"]),
        Route("/fleet", views.fleet),
        Route("/conflicts", conflicts.conflicts_page),
        Route("/conflicts/{path:path}", conflicts.resolve_page, methods=["GET"]),
        Route("/conflicts/{path:path}", conflicts.resolve_post, methods=["POST"]),
        Route("/map", views.memory_map),
        Route("/timeline", timeline.timeline_page),
        Route("/api/graph", views.graph_api),
        Route("/api/titles", views.titles_api),
        Route("/api/preview", edit.preview_api, methods=["POST"]),
        Route("/actions/sync", actions.sync_post, methods=["POST"]),
        Route("/actions/reindex", actions.reindex_post, methods=["POST"]),
        Route("/actions/report/{key}", actions.report_page, methods=["GET"]),
        Route("/favicon.ico", lambda request: RedirectResponse("/static/favicon.svg", status_code=301)),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                Guard,  # type: ignore[arg-type]
                token=token,
                hosts=allowed_hosts(host, port),
                port=port,
                any_ip_host=not is_loopback(host),
            )
        ],
        exception_handlers={AnamnesisError: _core_error, HTTPException: _http_error},
        max_body_size=MAX_BODY,
    )
    app.state.web = web
    return app
