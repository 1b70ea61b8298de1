"""Pages that change notes: create, edit, per-note history and restore.

Every write goes through the core (`store.create_note`, `store.update_note`,
`history.restore_version`): under the lock, atomic, indexed, committed. A form
carries a fingerprint of the text it was built from; if the file changed on
disk since, the write is refused and the user sees both versions.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from anamnesis.errors import AnamnesisError, NoteNotFound
from anamnesis.notes import NOTE_TYPES, Note
from anamnesis.web.context import Web, checked_form, text_sha, web_of
from anamnesis.web.html import Markup, csrf_field, html, join, note_url, when
from anamnesis.web.views import TYPE_LABELS, _options, strip_machine

STALE = "changed on disk since it was read"


def _suffix(path: str) -> str:
    return note_url(path)[len("/note/") :]


def _type_options(selected: str) -> Markup:
    return _options([(t, TYPE_LABELS[t]) for t in NOTE_TYPES], selected)


def _tags_of(text: str) -> list[str]:
    return [t for t in (part.strip().lstrip("#") for part in text.replace(",", " ").split()) if t]


def _form(
    web: Web,
    *,
    action: str,
    title: str,
    kind: str,
    tags: str,
    body: str,
    project: str | None = None,
    projects: list[str] | None = None,
    base: str = "",
    submit: str = "Save",
    cancel: str = "/",
) -> Markup:
    project_field = ""
    if projects is not None:
        project_field = html(
            """<label><span>Project <small class="muted">(empty = global)</small></span>
<input type="text" name="project" value="{p}" list="projects" autocomplete="off">
<datalist id="projects">{opts}</datalist></label>""",
            p=project or "",
            opts=[html('<option value="{v}">', v=p) for p in projects],
        )
    return html(
        """<form class="editor" method="post" action="{action}">{csrf}
<input type="hidden" name="base" value="{base}">
<div class="row">
  <label class="grow">Title<input type="text" name="title" value="{title}" required maxlength="200"></label>
  <label>Type<select name="type">{types}</select></label>
</div>
<div class="row">{project}<label class="grow"><span>Tags <small class="muted">(space or comma separated)</small></span>
<input type="text" name="tags" value="{tags}"></label></div>
<label><span>Body <small class="muted">(markdown; [[wikilinks]] link notes)</small></span>
<textarea name="body" rows="18" spellcheck="true">{body}</textarea></label>
<div class="actions"><button class="btn" type="submit">{submit}</button>
<a class="btn ghost" href="{cancel}">Cancel</a><span class="muted hint">Ctrl+S saves</span></div>
</form>""",
        action=action,
        csrf=csrf_field(web.csrf),
        base=base,
        title=title,
        types=_type_options(kind),
        project=project_field,
        tags=tags,
        body=body,
        submit=submit,
        cancel=cancel,
    )


def _known_projects(web: Web) -> list[str]:
    with web.index(fresh=False) as index:
        return sorted(p for p in index.counts()["by_project"] if p != "(global)")


def new_page(request: Request) -> HTMLResponse:
    """The form for a new note."""
    web = web_of(request)
    q = request.query_params
    kind = q.get("type") if q.get("type") in NOTE_TYPES else "semantic"
    form = _form(
        web,
        action="/new",
        title=q.get("title", ""),
        kind=kind or "semantic",
        tags=q.get("tags", ""),
        body="",
        project=q.get("project"),
        projects=_known_projects(web),
        submit="Create note",
    )
    body = html('<header class="page-head"><h1>New note</h1></header>{form}', form=form)
    return web.render(request, title="New note", body=body, active="new")


async def new_post(request: Request) -> Response:
    """Create the note through the core and show it."""
    from anamnesis.store import create_note

    web = web_of(request)
    form = await checked_form(request)
    title = str(form.get("title") or "").strip()
    kind = str(form.get("type") or "semantic")
    project = str(form.get("project") or "").strip() or None
    tags = _tags_of(str(form.get("tags") or ""))
    text = str(form.get("body") or "").replace("\r\n", "\n")

    def create() -> Note:
        with web.write_lock:
            return create_note(
                web.store, type=kind, title=title, body=text, project=project, tags=tags, source="web"
            )

    try:
        note = await run_in_threadpool(create)
    except AnamnesisError as exc:
        page = _form(
            web,
            action="/new",
            title=title,
            kind=kind,
            tags=" ".join(tags),
            body=text,
            project=project,
            projects=await run_in_threadpool(_known_projects, web),
            submit="Create note",
        )
        body = html('<header class="page-head"><h1>New note</h1></header>{form}', form=page)
        return web.render(
            request,
            title="New note",
            body=body,
            active="new",
            status=400,
            flash=html('<span class="error">{e}</span>', e=str(exc)),
        )
    return RedirectResponse(note_url(note.path) + "?msg=created", status_code=303)


def _read(web: Web, relpath: str) -> tuple[Note, str]:
    from anamnesis.history import working_text
    from anamnesis.store import load_note

    note = load_note(web.store, relpath)
    return note, working_text(web.store, relpath)


def edit_page(request: Request) -> HTMLResponse:
    """The edit form, carrying a fingerprint of the text it shows."""
    web = web_of(request)
    relpath = request.path_params["path"]
    note, text = _read(web, relpath)
    form = _form(
        web,
        action="/edit/" + _suffix(relpath),
        title=note.title,
        kind=note.type,
        tags=" ".join(note.tags),
        body=note.body,
        base=text_sha(text),
        cancel=note_url(relpath),
    )
    body = html(
        '<header class="page-head"><div class="crumbs"><code class="path">{p}</code></div><h1>Edit note</h1></header>{form}',
        p=relpath,
        form=form,
    )
    return web.render(request, title=f"Edit {note.title}", body=body, active="browse")


async def edit_post(request: Request) -> Response:
    """Save the edit through the core unless the file changed since the form was shown."""
    from anamnesis.store import update_note

    web = web_of(request)
    relpath = request.path_params["path"]
    form = await checked_form(request)
    title = str(form.get("title") or "")
    kind = str(form.get("type") or "semantic")
    tags_text = str(form.get("tags") or "")
    text = str(form.get("body") or "").replace("\r\n", "\n")
    base = str(form.get("base") or "")

    def save() -> str:
        with web.write_lock:
            note, current = _read(web, relpath)
            if text_sha(current) != base:
                raise AnamnesisError(f"{relpath} {STALE}")
            if (note.title, note.type, note.tags, note.body.rstrip("\n")) == (
                title.strip(),
                kind,
                _tags_of(tags_text),
                text.rstrip("\n"),
            ):
                return "unchanged"
            update_note(
                web.store,
                relpath,
                title=title,
                body=text,
                tags=_tags_of(tags_text),
                type=kind,
                expected_text=current,
            )
            return "saved"

    try:
        outcome = await run_in_threadpool(save)
    except AnamnesisError as exc:
        from anamnesis.history import working_text

        # Not `_read`: if the note was deleted meanwhile that raises again and the user's text is lost.
        current = await run_in_threadpool(working_text, web.store, relpath)
        gone = isinstance(exc, NoteNotFound)
        stale = STALE in str(exc) or gone
        form_html = _form(
            web,
            action="/edit/" + _suffix(relpath),
            title=title,
            kind=kind,
            tags=tags_text,
            body=text,
            base=text_sha(current) if stale else base,
            cancel=note_url(relpath),
        )
        extra = (
            html(
                '<details class="card" open><summary>The version on disk now</summary><pre class="raw">{t}</pre></details>',
                t=current,
            )
            if stale and not gone
            else ""
        )
        message = (
            "This note was deleted on disk while you were editing (another machine or an agent). "
            "Your text is still in the form: copy it into a new note if you want to keep it."
            if gone
            else "This note changed on disk while you were editing (another machine, an editor or an agent). "
            "Nothing was overwritten: your text is still in the form; compare it with the version on disk "
            "below and save again."
            if stale
            else str(exc)
        )
        body = html(
            '<header class="page-head"><h1>Edit note</h1></header>{extra}{form}', extra=extra, form=form_html
        )
        return web.render(
            request,
            title="Edit",
            body=body,
            active="browse",
            status=409 if stale else 400,
            flash=html('<span class="error">{m}</span>', m=message),
        )
    return RedirectResponse(note_url(relpath) + f"?msg={outcome}", status_code=303)


def _diff_html(lines: list[str]) -> Markup:
    rows = []
    for line in lines:
        if line.startswith(("+++", "---")):
            cls = "meta"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "ctx"
        rows.append(html('<span class="d-{c}">{l}</span>', c=cls, l=line or " "))
    if not rows:
        return Markup('<p class="muted">No textual change.</p>')
    return html('<pre class="diff">{r}</pre>', r=join(rows))


MAX_DIFFS = 40


def history_page(request: Request) -> HTMLResponse:
    """Every version of a note with what each changed, and a restore button per version."""
    from anamnesis import history

    web = web_of(request)
    relpath = request.path_params["path"]
    note, current = _read(web, relpath)
    versions = history.note_history(web.store, relpath)
    base = text_sha(current)
    items = []
    for i, version in enumerate(versions):
        diff = _diff_html(history.change_diff(web.store, versions, i)) if i < MAX_DIFFS else Markup("")
        restore: Markup | str = ""
        if i > 0 and not version.deleted:
            restore = html(
                """<form method="post" action="{a}" class="inline" data-confirm="Restore this version? It becomes a new commit; nothing is lost.">{csrf}
<input type="hidden" name="commit" value="{c}"><input type="hidden" name="base" value="{b}">
<button class="btn small" type="submit">Restore this version</button></form>""",
                a="/restore/" + _suffix(relpath),
                csrf=csrf_field(web.csrf),
                c=version.commit,
                b=base,
            )
        items.append(
            html(
                """<li class="version">
<details{open}><summary><span class="v-when">{d}</span><code class="who">{m}</code>
<span class="v-msg">{msg}</span><code class="sha">{short}</code>{current}</summary>
<div class="v-body">{restore}{diff}</div></details></li>""",
                open=Markup(" open") if i == 0 else "",
                d=when(version.date),
                m=version.machine,
                msg=strip_machine(version.message, version.machine).replace(version.path, "").strip()
                or version.message,
                short=version.short,
                current=Markup('<span class="badge">current</span>') if i == 0 else "",
                restore=restore,
                diff=diff,
            )
        )
    body = html(
        """<header class="page-head"><div class="crumbs"><code class="path">{p}</code></div>
<h1>History of “<a href="{u}">{t}</a>”</h1>
<p class="lede">{n} version{s}, newest first. Restoring an old version saves it again as a new commit.</p></header>
<ol class="versions">{items}</ol>""",
        p=relpath,
        u=note_url(relpath),
        t=note.title,
        n=len(versions),
        s="" if len(versions) == 1 else "s",
        items=items or [Markup('<li class="muted">This note is not committed yet.</li>')],
    )
    return web.render(request, title=f"History of {note.title}", body=body, active="browse")


async def restore_post(request: Request) -> Response:
    """Restore an old version through `history.restore_version` (a new commit)."""
    from anamnesis import history

    web = web_of(request)
    relpath = request.path_params["path"]
    form = await checked_form(request)
    commit = str(form.get("commit") or "")
    base = str(form.get("base") or "")

    def restore() -> None:
        history.check_commit(commit)
        with web.write_lock:
            _note, current = _read(web, relpath)
            if text_sha(current) != base:
                raise AnamnesisError(f"{relpath} {STALE}; reload the history and try again")
            history.restore_version(web.store, relpath, commit, expected_text=current)

    await run_in_threadpool(restore)
    return RedirectResponse(note_url(relpath) + "?msg=restored", status_code=303)
