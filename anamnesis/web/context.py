"""What every dashboard view needs: the store, the index, the CSRF token, the page frame.

One `Web` object lives on `app.state.web`. Views are plain functions of the
request that call the core. The dashboard's own writes also take `write_lock`,
so two browser tabs saving at once queue up here rather than in the store
lock; changes from other processes are caught by the core's `expected_text`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse

from anamnesis.base.errors import AnamnesisError, ExitCode
from anamnesis.base.paths import Store
from anamnesis.base.settings import machine_id
from anamnesis.search import PeriodicRefresh
from anamnesis.store import MAX_NOTE_BYTES, LinkGraph, NoteKey
from anamnesis.web.html import Markup, page

if TYPE_CHECKING:
    from anamnesis.search import Index
    from anamnesis.store import LinkGraph

REFRESH_EVERY = 3.0  # seconds between index refreshes triggered by page views
MESSAGES = {
    "created": "Note created and committed.",
    "saved": "Saved and committed.",
    "unchanged": "Nothing changed.",
    "restored": "Restored the old version as a new commit.",
    "resolved": "Conflict resolved and committed.",
    "deleted": "Note deleted and committed. Its text stays in the git history.",
    "moved": "Moved and committed; links to it in other notes were updated.",
}
KEEP_REPORTS = 20  # sync / reindex reports kept for the page a POST redirects to


Action = Literal["sync", "reindex"]  # what the dashboard's buttons run


@dataclass
class Report:
    """The outcome of a sync or reindex, shown by GET /actions/report/<key> after the POST."""

    kind: Action
    ok: bool
    summary: str
    data: dict[str, Any] = field(default_factory=dict)


class CsrfError(AnamnesisError):
    """A write without the right CSRF token: refused."""

    exit_code = ExitCode.USAGE


class Web:
    """The dashboard's state for one run."""

    def __init__(self, store: Store, csrf: str) -> None:
        self.store = store
        self.csrf = csrf
        self.write_lock = threading.Lock()
        self._refresh = PeriodicRefresh(store, REFRESH_EVERY)
        self._machine: str | None = None
        self._links: tuple[str, LinkGraph] | None = None
        self._links_lock = threading.Lock()
        self._graph: tuple[str, dict[str, Any]] | None = None
        self.reports: OrderedDict[str, Report] = OrderedDict()

    @property
    def machine(self) -> str:
        if self._machine is None:
            self._machine = machine_id(self.store)
        return self._machine

    def index(self, fresh: bool = True) -> Index:
        """The open index, brought up to date with hand edits every few seconds."""
        return self._refresh.open(fresh)

    def link_graph(self, index: Index) -> LinkGraph:
        """Every note's links, backlinks and links to no note, rebuilt when the index changed."""
        key = index.generation()
        with self._links_lock:
            if self._links is not None and self._links[0] == key:
                return self._links[1]
            graph = LinkGraph((NoteKey(p, i, t), b) for p, i, t, b in index.keys_and_bodies())
            self._links = (key, graph)
            return graph

    def cached_graph(self, key: str, build: Any) -> dict[str, Any]:
        """The memory map's data for index generation `key`, built once by `build()`."""
        cached = self._graph
        if cached is not None and cached[0] == key:
            return cached[1]
        data: dict[str, Any] = build()
        self._graph = (key, data)
        return data

    def keep_report(self, report: Report) -> str:
        """Keep a sync/reindex outcome for the page the POST redirects to; its key."""
        key = secrets.token_urlsafe(9)
        self.reports[key] = report
        while len(self.reports) > KEEP_REPORTS:
            self.reports.popitem(last=False)
        return key

    def conflict_count(self) -> int:
        with self.index(fresh=False) as index:
            return int(index.counts().get("conflicted", 0))

    def render(
        self,
        request: Request,
        *,
        title: str,
        body: Markup,
        active: str = "",
        status: int = 200,
        flash: Markup | str = "",
        scripts: tuple[str, ...] = (),
        wide: bool = False,
    ) -> HTMLResponse:
        """A full page around `body`; `?msg=` shows one of the fixed messages above."""
        if not flash:
            flash = MESSAGES.get(request.query_params.get("msg", ""), "")
        document = page(
            title=title,
            body=body,
            active=active,
            csrf=self.csrf,
            machine=self.machine,
            conflicts=self.conflict_count(),
            flash=flash,
            scripts=scripts,
            wide=wide,
        )
        return HTMLResponse(document, status_code=status)


def web_of(request: Request) -> Web:
    """The `Web` of the app serving this request."""
    web: Web = request.app.state.web
    return web


# A form field may hold a whole note: URL-encoded, each byte of it can take three (a line of CJK,
# three bytes a character in UTF-8, takes nine a character), so the note size limit times three.
FORM_FIELD_MAX = 3 * MAX_NOTE_BYTES + 64_000


async def checked_form(request: Request) -> FormData:
    """The posted form, after checking its CSRF token (field `_csrf` or header X-CSRF-Token)."""
    web = web_of(request)
    form = await request.form(max_part_size=FORM_FIELD_MAX)
    given = str(form.get("_csrf") or request.headers.get("x-csrf-token") or "")
    if not given or not hmac.compare_digest(given.encode(), web.csrf.encode()):
        raise CsrfError(
            "this form is stale or was not sent by the dashboard (CSRF check failed); reload the page"
        )
    return form


def text_sha(text: str) -> str:
    """A short fingerprint of a note's text, to detect that it changed since a form was shown."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
