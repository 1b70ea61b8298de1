"""Pages that change notes: create, edit, move, delete, per-note history and restore.

Every write goes through the core (`store.create_note`, `store.save_note`,
`store.move_note`, `store.delete_note`, `restore_version`): under the
lock, atomic, indexed, committed, and every successful POST redirects. A form
carries a fingerprint of the text it was built from; if the file changed on
disk since, the write is refused and the user sees both versions.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from anamnesis.base.errors import AnamnesisError, DiskFull, NoteChanged, NoteNotFound, UsageError
from anamnesis.base.notes import NOTE_TYPES, Note, front_matter_problem, normalize_tags, now_iso, parse_note
from anamnesis.base.text import plural
from anamnesis.store import (
    check_commit,
    check_project_key,
    check_writable,
    create_note,
    delete_note,
    describe_change,
    entry_title,
    load_note,
    move_note,
    note_history,
    redact_tags,
    restore_version,
    retype,
    safe_path,
    save_edited_text,
    save_note,
    working_text,
)
from anamnesis.web.context import Web, checked_form, text_sha, web_of
from anamnesis.web.html import Markup, csrf_field, html, join, note_url, when
from anamnesis.web.markdown import render_markdown
from anamnesis.web.views import _options, type_label

STALE = "changed on disk since it was read"


def _status(exc: AnamnesisError) -> int:
    """The HTTP status of a refused write: a full disk (507), a repo left mid-rebase or on another
    branch (409, with sync's message), anything else the form can fix (400)."""
    if isinstance(exc, DiskFull):
        return 507
    return 409 if exc.exit_code == 12 else 400


def _type_options(selected: str) -> Markup:
    return _options([(t, type_label(t)) for t in NOTE_TYPES], selected)


def preview_html(web: Web, text: str, source: str | None = None) -> Markup:
    """A body rendered as the note page renders it (links resolved against every note)."""
    with web.index(fresh=False) as index:
        resolver = web.link_graph(index).resolver
    return render_markdown(text, source=source, resolver=resolver)


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
    at: str = "",
    source: str | None = None,
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
    at_field = (
        html(
            '<p class="muted at">Saved as <code class="path">{a}</code>, where a link expects it.</p>'
            '<input type="hidden" name="at" value="{a}">',
            a=at,
        )
        if at
        else ""
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
{at}
<div class="write-preview">
<label class="write"><span>Body <small class="muted">(markdown; type <kbd>[[</kbd> to link a note)</small></span>
<textarea name="body" rows="18" spellcheck="true" data-wikilinks data-source="{source}"
  aria-describedby="preview-title">{body}</textarea></label>
<section class="preview" aria-labelledby="preview-title"><h3 class="sub" id="preview-title">Preview</h3>
<div class="markdown" id="preview" aria-live="polite">{preview}</div></section>
</div>
<ul id="wikilink-suggest" class="suggest" role="listbox" aria-label="Notes to link" hidden></ul>
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
        at=at_field,
        source=source or "",
        body=body,
        preview=preview_html(web, body, source)
        if body.strip()
        else Markup('<p class="muted">The note as it will look.</p>'),
        submit=submit,
        cancel=cancel,
    )


def _known_projects(web: Web) -> list[str]:
    with web.index(fresh=False) as index:
        return sorted(p for p in index.counts()["by_project"] if p != "(global)")


def _linked_from(web: Web, relpath: str) -> str:
    """A first line for a note made from a link in note `relpath`: a link back to it."""
    try:
        source = load_note(web.store, relpath)
    except AnamnesisError:
        return ""
    return f"Linked from [[{source.id or source.path}|{source.title}]].\n"


def new_page(request: Request) -> HTMLResponse:
    """The form for a new note (prefilled from the query: title, type, project, tags, at, linked_from)."""
    web = web_of(request)
    q = request.query_params
    kind = q.get("type") if q.get("type") in NOTE_TYPES else "semantic"
    linked_from = q.get("linked_from") or ""
    form = _form(
        web,
        action="/new",
        title=q.get("title", ""),
        kind=kind or "semantic",
        tags=q.get("tags", ""),
        body=_linked_from(web, linked_from) if linked_from else "",
        project=q.get("project"),
        projects=_known_projects(web),
        submit="Create note",
        at=q.get("at", ""),
        cancel=note_url(linked_from) if linked_from else "/",
    )
    body = html('<header class="page-head"><h1>New note</h1></header>{form}', form=form)
    return web.render(request, title="New note", body=body, active="new")


async def new_post(request: Request) -> Response:
    """Create the note through the core and show it."""
    web = web_of(request)
    form = await checked_form(request)
    title = str(form.get("title") or "").strip()
    kind = str(form.get("type") or "semantic")
    project = str(form.get("project") or "").strip() or None
    tags = normalize_tags(redact_tags([str(form.get("tags") or "")]))
    text = str(form.get("body") or "").replace("\r\n", "\n")
    at = str(form.get("at") or "").strip()

    def create() -> Note:
        key = check_project_key(project) if project else None  # the rule the CLI and MCP apply: a key, no path
        with web.write_lock:  # `at`: where a relative link expects the note
            return create_note(
                web.store, type=kind, title=title, body=text, project=key, tags=tags, source="web", path=at or None
            )

    try:
        note = await run_in_threadpool(create)
    except AnamnesisError as exc:
        page = await run_in_threadpool(
            lambda: _form(
                web,
                action="/new",
                title=title,
                kind=kind,
                tags=" ".join(tags),
                body=text,
                project=project,
                projects=_known_projects(web),
                submit="Create note",
                at=at,
            )
        )
        body = html('<header class="page-head"><h1>New note</h1></header>{form}', form=page)
        return web.render(
            request,
            title="New note",
            body=body,
            active="new",
            status=_status(exc),
            flash=html('<span class="error">{e}</span>', e=str(exc)),
        )
    return RedirectResponse(note_url(note.path) + "?msg=created", status_code=303)


def _read(web: Web, relpath: str) -> tuple[Note, str]:
    note = load_note(web.store, relpath)
    return note, working_text(web.store, relpath)


def _raw_form(web: Web, *, action: str, text: str, base: str, cancel: str) -> Markup:
    """The whole file in one box: for a note whose front matter is broken, which the fields of the
    usual form would paper over (a title made from the file name, the broken lines in the body)."""
    return html(
        """<form class="editor" method="post" action="{action}">{csrf}
<input type="hidden" name="base" value="{base}"><input type="hidden" name="mode" value="raw">
<label class="write"><span>The whole file <small class="muted">(front matter between the
<code>---</code> lines, then the body)</small></span>
<textarea name="raw" rows="24" spellcheck="false">{text}</textarea></label>
<div class="actions"><button class="btn" type="submit">Save</button>
<a class="btn ghost" href="{cancel}">Cancel</a><span class="muted hint">Ctrl+S saves</span></div>
</form>""",
        action=action,
        csrf=csrf_field(web.csrf),
        base=base,
        text=text,
        cancel=cancel,
    )


def _broken_note_page(request: Request, web: Web, relpath: str, text: str, base: str, problem: str,
                      status: int = 200) -> HTMLResponse:
    form = _raw_form(web, action=note_url(relpath, "edit"), text=text, base=base, cancel=note_url(relpath))
    body = html(
        '<header class="page-head"><div class="crumbs"><code class="path">{p}</code></div><h1>Edit note</h1></header>{form}',
        p=relpath,
        form=form,
    )
    return web.render(
        request,
        title="Edit",
        body=body,
        active="browse",
        status=status,
        flash=html('<span class="error">{m}</span>', m=problem),
    )


def edit_page(request: Request) -> HTMLResponse:
    """The edit form, carrying a fingerprint of the text it shows."""
    web = web_of(request)
    relpath = request.path_params["path"]
    note, text = _read(web, relpath)
    broken = front_matter_problem(note)
    if broken is not None:
        return _broken_note_page(
            request, web, relpath, text, text_sha(text),
            f"This note's front matter is not right ({broken}): its whole text is below. Fix it there and save.",
        )
    form = _form(
        web,
        action=note_url(relpath, "edit"),
        title=note.title,
        kind=note.type,
        tags=" ".join(note.tags),
        body=note.body,
        base=text_sha(text),
        cancel=note_url(relpath),
        source=relpath,
    )
    body = html(
        '<header class="page-head"><div class="crumbs"><code class="path">{p}</code></div><h1>Edit note</h1></header>{form}',
        p=relpath,
        form=form,
    )
    return web.render(request, title=f"Edit {note.title}", body=body, active="browse")


async def edit_post(request: Request) -> Response:
    """Save the edit through the core unless the file changed since the form was shown.

    Committed as "<machine>: edit <path>", the words `anamnesis edit` uses.
    """
    web = web_of(request)
    relpath = request.path_params["path"]
    form = await checked_form(request)
    if form.get("mode") == "raw":
        return await _save_raw(request, web, relpath, str(form.get("raw") or ""), str(form.get("base") or ""))
    title = str(form.get("title") or "")
    kind = str(form.get("type") or "semantic")
    tags_text = str(form.get("tags") or "")
    text = str(form.get("body") or "").replace("\r\n", "\n")
    base = str(form.get("base") or "")

    def save() -> str:
        with web.write_lock:
            note, current = _read(web, relpath)
            if text_sha(current) != base:
                raise NoteChanged(f"{relpath} {STALE}")
            if (note.title, note.type, note.tags, note.body.rstrip("\n")) == (
                title.strip(),
                kind,
                normalize_tags(redact_tags([tags_text])),
                text.rstrip("\n"),
            ):
                return "unchanged"
            if not text.strip():
                raise UsageError("empty body; nothing was written (to delete a note, use Delete on its page)")
            machine = check_writable(web.store)
            note.title = title.strip()
            note.body = text
            note.tags = normalize_tags(redact_tags([tags_text]))
            retype(note, kind)
            note.updated = now_iso()
            note.machine = machine
            save_note(web.store, note, message=f"{machine}: edit {relpath}", expected_text=current)
            return "saved"

    try:
        outcome = await run_in_threadpool(save)
    except AnamnesisError as exc:
        # Not `_read`: if the note was deleted meanwhile that raises again and the user's text is lost.
        current = await run_in_threadpool(working_text, web.store, relpath)
        gone = isinstance(exc, NoteNotFound)
        stale = isinstance(exc, NoteChanged) or gone
        form_html = await run_in_threadpool(
            lambda: _form(
                web,
                action=note_url(relpath, "edit"),
                title=title,
                kind=kind,
                tags=tags_text,
                body=text,
                base=text_sha(current) if stale else base,
                cancel=note_url(relpath),
                source=relpath,
            )
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
            status=409 if stale else _status(exc),
            flash=html('<span class="error">{m}</span>', m=message),
        )
    return RedirectResponse(note_url(relpath) + f"?msg={outcome}", status_code=303)


async def _save_raw(request: Request, web: Web, relpath: str, raw: str, base: str) -> Response:
    """Save the whole text typed in the raw form, once its front matter is right; else show it again."""
    raw = raw.replace("\r\n", "\n")

    def save() -> str:
        with web.write_lock:
            _note, current = _read(web, relpath)
            if text_sha(current) != base:
                raise NoteChanged(f"{relpath} {STALE}")
            broken = front_matter_problem(parse_note(raw.removeprefix("\ufeff"), relpath))
            if broken is not None:
                raise UsageError(f"the front matter is still not right: {broken}; nothing was written")
            if raw == current:
                return "unchanged"
            save_edited_text(web.store, relpath, raw.encode("utf-8"), expected=safe_path(web.store, relpath).read_bytes())
            return "saved"

    try:
        outcome = await run_in_threadpool(save)
    except AnamnesisError as exc:
        stale = isinstance(exc, (NoteChanged, NoteNotFound))
        current = await run_in_threadpool(working_text, web.store, relpath)
        return await run_in_threadpool(
            _broken_note_page, request, web, relpath, raw, text_sha(current) if stale else base,
            f"{exc} (your text is still in the box)", 409 if stale else _status(exc),
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
    web = web_of(request)
    relpath = request.path_params["path"]
    note, current = _read(web, relpath)
    versions = note_history(web.store, relpath)
    base = text_sha(current)
    items = []
    for i, version in enumerate(versions):
        change = describe_change(web.store, version, note.title) if i < MAX_DIFFS else None
        restore: Markup | str = ""
        if i > 0 and not version.deleted:
            restore = html(
                """<form method="post" action="{a}" class="inline restore" data-confirm="Restore this version? It becomes a new commit; nothing is lost.">{csrf}
<input type="hidden" name="commit" value="{c}"><input type="hidden" name="base" value="{b}">
<button class="btn small" type="submit">Restore this version</button></form>""",
                a=note_url(relpath, "restore"),
                csrf=csrf_field(web.csrf),
                c=version.commit,
                b=base,
            )
        changes = (
            html(
                '<details class="v-changes"{open}><summary>What changed</summary>{diff}</details>{replaced}',
                open=Markup(" open") if i == 0 else "",
                diff=_diff_html(change.diff),
                replaced=join(
                    html(
                        '<details class="v-changes v-replaced"><summary>Against {who}’s version</summary>{d}</details>',
                        who=who,
                        d=_diff_html(lines),
                    )
                    for who, lines in change.replaced
                ),
            )
            if change is not None
            else Markup('<p class="muted small">Older than the diffs shown here.</p>')
        )
        items.append(
            html(
                """<li class="version">
<div class="v-head"><span class="v-when">{d}</span><code class="who">{m}</code>
<span class="v-msg">{msg}</span><code class="sha">{short}</code>{current}{restore}</div>
{changes}</li>""",
                d=when(version.date),
                m=version.machine,
                msg=change.title if change is not None else entry_title(version, note.title),
                short=version.short,
                current=Markup('<span class="badge">current</span>') if i == 0 else "",
                restore=restore,
                changes=changes,
            )
        )
    body = html(
        """<header class="page-head"><div class="crumbs"><code class="path">{p}</code></div>
<h1>History of “<a href="{u}">{t}</a>”</h1>
<p class="lede">{n}, newest first. <em>Restore this version</em> saves an old version again as a new
commit: nothing is lost.</p></header>
<ol class="versions">{items}</ol>""",
        p=relpath,
        u=note_url(relpath),
        t=note.title,
        n=plural(len(versions), "version"),
        items=items or [Markup('<li class="muted">This note is not committed yet.</li>')],
    )
    return web.render(request, title=f"History of {note.title}", body=body, active="browse")


async def restore_post(request: Request) -> Response:
    """Restore an old version through `restore_version` (a new commit)."""
    web = web_of(request)
    relpath = request.path_params["path"]
    form = await checked_form(request)
    commit = str(form.get("commit") or "")
    base = str(form.get("base") or "")

    def restore() -> None:
        check_commit(commit)
        with web.write_lock:
            _note, current = _read(web, relpath)
            if text_sha(current) != base:
                raise NoteChanged(f"{relpath} {STALE}; reload the history and try again")
            restore_version(web.store, relpath, commit, expected_text=current)

    await run_in_threadpool(restore)
    return RedirectResponse(note_url(relpath) + "?msg=restored", status_code=303)


MAX_PREVIEW = 1_000_000


async def preview_api(request: Request) -> Response:
    """The editor's live preview: the posted body rendered as the note page renders it (no write)."""
    web = web_of(request)
    form = await checked_form(request)
    text = str(form.get("body") or "")[:MAX_PREVIEW].replace("\r\n", "\n")
    source = str(form.get("source") or "") or None
    rendered = await run_in_threadpool(preview_html, web, text, source)
    return JSONResponse({"html": str(rendered)})


async def delete_post(request: Request) -> Response:
    """Delete a note through `store.delete_note` (what `anamnesis rm` runs), unless it changed meanwhile."""
    web = web_of(request)
    relpath = request.path_params["path"]
    form = await checked_form(request)
    base = str(form.get("base") or "")

    def delete() -> None:
        with web.write_lock:
            _note, current = _read(web, relpath)
            if text_sha(current) != base:
                raise NoteChanged(f"{relpath} {STALE}; reload the note and try again")
            delete_note(web.store, relpath)

    await run_in_threadpool(delete)
    return RedirectResponse("/browse?msg=deleted", status_code=303)


def _folders(web: Web) -> list[str]:
    """Folders that hold notes, for the move form's suggestions."""
    with web.index(fresh=False) as index:
        paths = index.paths()
    return sorted({p.rsplit("/", 1)[0] + "/" for p in paths if "/" in p})


def _move_form(web: Web, relpath: str, note: Note, base: str, new_path: str, backlinks: int) -> Markup:
    folders = _folders(web)
    return html(
        """<form class="editor move" method="post" action="{a}">{csrf}
<input type="hidden" name="base" value="{b}">
<label><span>New path <small class="muted">(inside memory/, ends in .md)</small></span>
<input type="text" name="new_path" value="{n}" required list="folders" autocomplete="off" spellcheck="false">
<datalist id="folders">{opts}</datalist></label>
<p class="muted">The note keeps its id <code>{id}</code>, its text and its history. {links}</p>
<div class="actions"><button class="btn" type="submit">Move</button>
<a class="btn ghost" href="{cancel}">Cancel</a></div>
</form>""",
        a=note_url(relpath, "move"),
        csrf=csrf_field(web.csrf),
        b=base,
        n=new_path,
        opts=[html('<option value="{v}">', v=f) for f in folders],
        id=note.id or "—",
        links=f"{plural(backlinks, 'note links', 'notes link')} here; links by path or file name are "
        "rewritten to the new path in the same commit (links by id or title need no change)."
        if backlinks
        else "No note links here.",
        cancel=note_url(relpath),
    )


def _move_body(web: Web, relpath: str, new_path: str | None = None) -> Markup:
    note, current = _read(web, relpath)
    with web.index(fresh=False) as index:
        backlinks = len(web.link_graph(index).backlinks_of(relpath))
    return html(
        """<header class="page-head"><div class="crumbs"><code class="path">{p}</code></div>
<h1>Move or rename “<a href="{u}">{t}</a>”</h1></header>{form}""",
        p=relpath,
        u=note_url(relpath),
        t=note.title,
        form=_move_form(web, relpath, note, text_sha(current), new_path or relpath, backlinks),
    )


def move_page(request: Request) -> HTMLResponse:
    """The form that moves or renames a note."""
    web = web_of(request)
    relpath = request.path_params["path"]
    body = _move_body(web, relpath)
    return web.render(request, title="Move a note", body=body, active="browse")


async def move_post(request: Request) -> Response:
    """Move the note through `store.move_note` (id kept, links rewritten, one commit)."""
    web = web_of(request)
    relpath = request.path_params["path"]
    form = await checked_form(request)
    base = str(form.get("base") or "")
    new_path = str(form.get("new_path") or "").strip()

    def move() -> str:
        with web.write_lock:
            _note, current = _read(web, relpath)
            if text_sha(current) != base:
                raise NoteChanged(f"{relpath} {STALE}; reload and try again")
            return move_note(web.store, relpath, new_path).note.path

    try:
        moved = await run_in_threadpool(move)
    except (UsageError, DiskFull) as exc:
        body = await run_in_threadpool(_move_body, web, relpath, new_path)
        return web.render(
            request,
            title="Move a note",
            body=body,
            active="browse",
            status=_status(exc),
            flash=html('<span class="error">{e}</span>', e=str(exc)),
        )
    return RedirectResponse(note_url(moved) + "?msg=moved", status_code=303)
