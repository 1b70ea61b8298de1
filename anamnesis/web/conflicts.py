"""The conflicts pages: every conflicted note, each machine's version, keep one / all / edit.

Listing, reading and resolving conflicts is the conflicts module's job: the
list is `list_conflicts` and keeping a version (or all) is
`resolve_conflict`, exactly what `anamnesis conflicts` / `anamnesis
resolve` run. An edited resolution is saved through `store.save_note`. Either
way the file must not have changed since the page showed it.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from anamnesis.base.errors import AnamnesisError, NoteChanged, NoteNotFound, UsageError
from anamnesis.base.lock import store_lock
from anamnesis.base.notes import (
    front_matter_problem,
    has_conflict_markers,
    now_iso,
    parse_note,
    split_front_matter,
)
from anamnesis.base.settings import machine_id
from anamnesis.store import (
    KEEP_PREFIX,
    Block,
    block_labels,
    label_names,
    list_conflicts,
    parse_blocks,
    safe_path,
    save_note,
    working_text,
)
from anamnesis.store import (
    resolve_note as resolve_conflict,
)
from anamnesis.web.context import Web, checked_form, text_sha, web_of
from anamnesis.web.html import Markup, csrf_field, escape, html, join, note_url, resolve_form

KEEP = ("ours", "theirs", "both")


def _suffix(path: str) -> str:
    return note_url(path)[len("/note/") :]


def side_view(text: str, label: str) -> Markup:
    """The note's body as machine `label` wrote it, its version in each conflict highlighted."""
    _fm, body = split_front_matter(text)
    out = []
    for piece in parse_blocks(body):
        if isinstance(piece, Block):
            chosen = [s for s in piece.sections if s.label == label]
            where = " (front matter)" if piece.front_matter else ""
            out.append(
                html(
                    '<mark class="pick" title="{w}">{t}</mark>',
                    w=f"{label}'s version{where}" if chosen else f"no version from {label} here",
                    t="".join(line for s in chosen for line in s.lines) or "(nothing)\n",
                )
            )
        else:
            out.append(escape(piece))
    return html('<pre class="raw side-text">{t}</pre>', t=join(out))


def conflicts_page(request: Request) -> HTMLResponse:
    """Every conflicted note (the list `anamnesis conflicts` prints), each with a link to resolve it."""
    web = web_of(request)
    found = list_conflicts(web.store)
    if found:
        items = [
            html(
                """<li class="note-item"><div class="note-item-head">
<a class="note-title" href="{u}">{t}</a><span class="badge warn">conflict</span></div>
<div class="note-meta"><code class="path">{p}</code><span class="spacer"></span>{who}
<a class="btn small" href="{r}">Resolve</a></div></li>""",
                u=note_url(c.path),
                t=c.title,
                p=c.path,
                who=join(
                    (
                        html('<span class="chip">{a}</span>', a=" ↔ ".join(labels))
                        for labels in dict.fromkeys(tuple(labels) for labels in c.labels)
                    ),
                    " ",
                ),
                r="/conflicts/" + _suffix(c.path),
            )
            for c in found
        ]
        content = html('<section class="card"><ul class="note-list">{items}</ul></section>', items=items)
    else:
        content = Markup(
            '<div class="card empty-state"><p class="ok">No conflicts.</p><p class="muted">When machines '
            "change the same lines of a note, sync keeps every version in the note between conflict "
            "markers and lists it here.</p></div>"
        )
    body = html(
        """<header class="page-head"><h1>Conflicts</h1>
<p class="lede">Notes that machines changed in the same place. Keep one machine's version, all of them, or
edit the note to combine them.</p></header>
{content}""",
        content=content,
    )
    return web.render(request, title="Conflicts", body=body, active="conflicts")


def resolve_page(
    request: Request, edited: str | None = None, error: str = "", status: int = 200
) -> HTMLResponse:
    """Each machine's version of one conflicted note, with the ways out (`edited`: the user's text, kept on an error)."""
    web = web_of(request)
    relpath = request.path_params["path"]
    if not safe_path(web.store, relpath).is_file():
        raise NoteNotFound(f"no note at {relpath}")
    text = working_text(web.store, relpath)
    flash = html('<span class="error">{e}</span>', e=error) if error else ""
    if not has_conflict_markers(text):
        body = html(
            '<header class="page-head"><h1>No conflict</h1></header><p><a href="{u}">{p}</a> has no conflict markers.</p>',
            u=note_url(relpath),
            p=relpath,
        )
        return web.render(
            request, title="No conflict", body=body, active="conflicts", status=status, flash=flash
        )
    base = text_sha(text)
    labels = list(dict.fromkeys(label for block in block_labels(split_front_matter(text)[1]) for label in block))
    me = machine_id(web.store)
    action = "/conflicts/" + _suffix(relpath)

    def keep_form(keep: str, label: str, ghost: bool = False) -> Markup:
        return resolve_form(action, web.csrf, base, keep, label, ghost=ghost)

    def side(label: str) -> Markup:
        names = label_names(label)
        if me in names:
            title, keep, button = "ours", "ours", f"Keep ours ({label})"
        elif len(labels) == 2 and any(me in label_names(other) for other in labels):
            title, keep, button = "theirs", "theirs", f"Keep theirs ({label})"
        else:
            title, keep, button = label, KEEP_PREFIX + label, f"Keep {label}"
        return html(
            """<section class="card side"><h2>{title} <small class="muted">{label}</small></h2>
{view}<div class="actions">{form}</div></section>""",
            title=title,
            label=label if title != label else "",
            view=side_view(text, label),
            form=keep_form(keep, button),
        )

    body = html(
        """<header class="page-head"><div class="crumbs"><code class="path">{p}</code></div>
<h1>Resolve a conflict</h1>
<p class="lede">Machines changed <a href="{u}">this note</a> in the same place; the highlighted text differs.
Keep one machine's version, keep them all (one after the other), or edit the text below.</p></header>
<div class="grid two sides">{sides}</div>
<div class="actions spread">{both}</div>
<section class="card"><h2>Edit</h2>
<form method="post" action="{a}" class="editor full">{csrf}
<input type="hidden" name="base" value="{base}"><input type="hidden" name="action" value="edit">
<textarea name="text" rows="20" spellcheck="false" aria-label="Note text">{text}</textarea>
<div class="actions"><button class="btn" type="submit">Save resolution</button>
<span class="muted hint">Remove every &lt;&lt;&lt;&lt;&lt;&lt;&lt; … ======= … &gt;&gt;&gt;&gt;&gt;&gt;&gt; line first.</span></div>
</form></section>""",
        p=relpath,
        u=note_url(relpath),
        sides=join([side(label) for label in labels]),
        both=keep_form("both", "Keep both" if len(labels) == 2 else "Keep all", ghost=True),
        a=action,
        csrf=csrf_field(web.csrf),
        base=base,
        text=text if edited is None else edited,
    )
    return web.render(
        request, title="Resolve a conflict", body=body, active="conflicts", status=status, flash=flash
    )


def resolve_note(web: Web, relpath: str, action: str, base: str, edited: str | None) -> None:
    """Resolve as `anamnesis resolve` does (or save the edited text), unless the file changed meanwhile."""
    if action not in (*KEEP, "edit") and not action.startswith(KEEP_PREFIX):
        raise UsageError(f"unknown resolution {action!r}")
    with web.write_lock, store_lock(web.store, "resolve"):
        current = working_text(web.store, relpath)
        if text_sha(current) != base:
            raise NoteChanged(f"{relpath} changed on disk since it was read; reload and try again")
        if not has_conflict_markers(current):
            # Not a way to write arbitrary files: only a note that has a conflict is resolved here.
            raise UsageError(f"{relpath} has no conflict to resolve")
        if action != "edit":
            resolve_conflict(web.store, relpath, action)
            return
        chosen = (edited or "").replace("\r\n", "\n")
        if has_conflict_markers(chosen):
            raise UsageError("the text still has conflict markers; remove them or keep a side")
        note = parse_note(chosen, relpath)
        broken = front_matter_problem(note)
        if broken is not None:  # saved, the fields would be made up and the broken lines moved into the body
            raise UsageError(f"the front matter is not right: {broken}; fix it, or keep a side")
        note.machine = machine_id(web.store)
        note.updated = now_iso()
        save_note(
            web.store,
            note,
            message=f"{note.machine}: resolve conflict in {relpath} (edited)",
            expected_text=current,
        )


async def resolve_post(request: Request) -> Response:
    """Apply ours / theirs / keep:MACHINE / both / edit and go to the resolved note."""
    web = web_of(request)
    relpath = request.path_params["path"]
    form = await checked_form(request)
    action = str(form.get("action") or "")
    base = str(form.get("base") or "")
    edited = form.get("text")
    try:
        await run_in_threadpool(
            resolve_note, web, relpath, action, base, str(edited) if edited is not None else None
        )
    except AnamnesisError as exc:
        if action != "edit" or edited is None or isinstance(exc, NoteNotFound):
            raise
        # Show the page again with the user's merge in the box: an error page would lose it
        # (pages are not cached, so Back does not bring the text back).
        status = 409 if isinstance(exc, NoteChanged) else 400
        return await run_in_threadpool(resolve_page, request, str(edited), str(exc), status)
    return RedirectResponse(note_url(relpath) + "?msg=resolved", status_code=303)
