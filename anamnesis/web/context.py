"""What every dashboard view needs: the store, the index, the CSRF token, the page frame.

One `Web` object lives on `app.state.web`. Views are plain functions of the
request that call the core. The dashboard's own writes also take `write_lock`,
so two browser tabs saving at once queue up here rather than in the store
lock; changes from other processes are caught by the core's `expected_text`.
"""

from __future__ import annotations

import hmac
import threading
import time
from typing import TYPE_CHECKING

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse

from anamnesis.errors import AnamnesisError
from anamnesis.paths import Store
from anamnesis.web.html import Markup, page

if TYPE_CHECKING:
    from anamnesis.index import Index

REFRESH_EVERY = 3.0  # seconds between index refreshes triggered by page views
MESSAGES = {
    "created": "Note created and committed.",
    "saved": "Saved and committed.",
    "unchanged": "Nothing changed.",
    "restored": "Restored the old version as a new commit.",
    "resolved": "Conflict resolved and committed.",
}


class CsrfError(AnamnesisError):
    """A write without the right CSRF token: refused."""

    exit_code = 2


class Web:
    """The dashboard's state for one run."""

    def __init__(self, store: Store, csrf: str) -> None:
        self.store = store
        self.csrf = csrf
        self.write_lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._refreshed = 0.0
        self._machine: str | None = None

    @property
    def machine(self) -> str:
        if self._machine is None:
            from anamnesis.settings import machine_id

            self._machine = machine_id(self.store)
        return self._machine

    def index(self, fresh: bool = True) -> Index:
        """The open index, brought up to date with hand edits every few seconds."""
        from anamnesis.index import open_index

        index = open_index(self.store)
        if fresh and time.monotonic() - self._refreshed > REFRESH_EVERY and self._refresh_lock.acquire(False):
            try:
                index.refresh()
                self._refreshed = time.monotonic()
            finally:
                self._refresh_lock.release()
        return index

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


async def checked_form(request: Request) -> FormData:
    """The posted form, after checking its CSRF token (field `_csrf` or header X-CSRF-Token)."""
    web = web_of(request)
    form = await request.form()
    given = str(form.get("_csrf") or request.headers.get("x-csrf-token") or "")
    if not given or not hmac.compare_digest(given.encode(), web.csrf.encode()):
        raise CsrfError(
            "this form is stale or was not sent by the dashboard (CSRF check failed); reload the page"
        )
    return form


def text_sha(text: str) -> str:
    """A short fingerprint of a note's text, to detect that it changed since a form was shown."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
