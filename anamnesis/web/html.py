"""HTML building with escaping by default, and the page frame every view shares.

No template engine: pages are small, and a `Markup` type plus `html()` that
escapes every value it is not told is safe keeps the escaping in one place.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable
from urllib.parse import quote, urlencode


class Markup(str):
    """A string that is already safe HTML; `html()` inserts it unescaped."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """`value` as HTML text (Markup passes through, None is empty)."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("")
    return Markup(_html.escape(str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    """Concatenate fragments, escaping any that are not Markup."""
    return Markup(sep.join(escape(p) for p in parts))


def html(template: str, **values: object) -> Markup:
    """Fill `{name}` slots in a trusted template with escaped values.

    Lists and tuples of fragments are joined; Markup is inserted as is.
    """
    safe: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            safe[key] = join(value)
        else:
            safe[key] = escape(value)
    return Markup(template.format(**safe))


def note_url(path: str, page: str = "note") -> str:
    """The dashboard URL of a note (`page`: note, edit, history, move, delete, conflicts)."""
    return f"/{page}/" + quote(path, safe="/")


def url(path: str, **params: object) -> str:
    """`path` with the non-empty query parameters."""
    query = {k: str(v) for k, v in params.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(query) if query else "")


NAV = (
    ("overview", "/", "Overview"),
    ("browse", "/browse", "Browse"),
    ("search", "/search", "Search"),
    ("new", "/new", "New note"),
    ("map", "/map", "Memory map"),
    ("timeline", "/timeline", "Timeline"),
    ("fleet", "/fleet", "Fleet"),
    ("conflicts", "/conflicts", "Conflicts"),
)

ICONS = {
    "overview": "M3 12l9-8 9 8M5 10v10h5v-6h4v6h5V10",
    "browse": "M4 5h16M4 12h16M4 19h10",
    "search": "M11 4a7 7 0 1 0 0 14 7 7 0 0 0 0-14zM21 21l-5-5",
    "new": "M12 5v14M5 12h14",
    "map": "M6 6m-2 0a2 2 0 1 0 4 0a2 2 0 1 0-4 0M18 8m-2 0a2 2 0 1 0 4 0a2 2 0 1 0-4 0"
    "M12 18m-2 0a2 2 0 1 0 4 0a2 2 0 1 0-4 0M8 7l8 1M7 8l4 8M17 10l-4 6",
    "fleet": "M3 5h18v10H3zM8 19h8M12 15v4",
    "timeline": "M12 3v18M12 7h6M12 12h-6M12 17h6",
    "conflicts": "M12 3l9 16H3zM12 10v4M12 17v.5",
    "menu": "M4 7h16M4 12h16M4 17h16",
}


def icon(name: str) -> Markup:
    """A small inline SVG icon (stroke only, follows the text colour)."""
    return html(
        '<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path d="{d}"/></svg>',
        d=ICONS.get(name, ""),
    )


def csrf_field(csrf: str) -> Markup:
    """The hidden field every form that writes carries."""
    return html('<input type="hidden" name="_csrf" value="{v}">', v=csrf)


def page(
    *,
    title: str,
    body: Markup,
    active: str,
    csrf: str,
    machine: str,
    conflicts: int = 0,
    flash: Markup | str = "",
    scripts: Iterable[str] = (),
    wide: bool = False,
) -> Markup:
    """A whole HTML document: sidebar, flash message, the view's body."""
    nav = []
    for key, href, label in NAV:
        badge = (
            html('<span class="badge warn">{n}</span>', n=conflicts)
            if key == "conflicts" and conflicts
            else ""
        )
        nav.append(
            html(
                '<a href="{href}" class="{cls}"{cur}>{icon}<span>{label}</span>{badge}</a>',
                href=href,
                cls="nav-link active" if key == active else "nav-link",
                cur=Markup(' aria-current="page"') if key == active else "",
                icon=icon(key),
                label=label,
                badge=badge,
            )
        )
    flash_html = html('<div class="flash" role="status">{m}</div>', m=flash) if flash else ""
    extra = [html('<script src="{src}" defer></script>', src=src) for src in scripts]
    return html(
        """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="csrf-token" content="{csrf}">
<title>{title} · Anamnesis</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/app.css">
<script src="/static/app.js" defer></script>
{extra}
</head>
<body class="{body_cls}">
<aside class="sidebar">
  <input type="checkbox" id="nav-toggle" class="toggle-box" aria-label="Show the menu" aria-controls="side-menu">
  <div class="side-top">
    <a class="brand" href="/"><img src="/static/favicon.svg" alt="" width="22" height="22">Anamnesis</a>
    <form class="side-search" action="/search" method="get" role="search">
      <input type="search" name="q" placeholder="Search notes…" aria-label="Search notes" accesskey="k">
    </form>
    <label for="nav-toggle" class="menu-button" title="Menu">{menu_icon}<span>Menu</span>{menu_badge}</label>
  </div>
  <div class="side-menu" id="side-menu">
  <nav>{nav}</nav>
  <div class="side-foot">
    <div class="machine" title="this machine">{machine_icon}<span>{machine}</span></div>
    <div class="side-actions">
      <form method="post" action="/actions/sync" class="busy-on-submit">{csrf_field}
        <button type="submit" class="btn small">Sync now</button></form>
      <form method="post" action="/actions/reindex" class="busy-on-submit">{csrf_field}
        <button type="submit" class="btn small ghost">Reindex</button></form>
    </div>
  </div>
  </div>
</aside>
<main class="content">
{flash}
{body}
</main>
</body>
</html>
""",
        csrf=csrf,
        title=title,
        extra=extra,
        body_cls="wide" if wide else "",
        nav=nav,
        machine_icon=icon("fleet"),
        menu_icon=icon("menu"),
        menu_badge=html('<span class="badge warn">{n}</span>', n=conflicts) if conflicts else "",
        machine=machine,
        csrf_field=csrf_field(csrf),
        flash=flash_html,
        body=body,
    )


def tag_chips(tags: Iterable[str]) -> Markup:
    """Tags as links to the browse page."""
    return join(html('<a class="chip tag" href="{u}">#{t}</a>', u=url("/browse", tag=t), t=t) for t in tags)


def when(stamp: str) -> Markup:
    """An ISO timestamp shown short (date and minutes), full on hover."""
    if not stamp:
        return Markup('<span class="muted">—</span>')
    short = stamp.replace("T", " ")[:16]
    return html('<time datetime="{s}" title="{s}">{short}</time>', s=stamp, short=short)


def resolve_form(
    action: str, csrf: str, base: str, keep: str, label: str, *, ghost: bool = False, small: bool = False
) -> Markup:
    """A one-button form that settles a conflict by keeping `keep` (the note page and the resolve page)."""
    return html(
        """<form method="post" action="{a}" class="inline" data-confirm="{q}">{csrf}
<input type="hidden" name="base" value="{b}"><input type="hidden" name="action" value="{k}">
<button class="btn{size}{g}" type="submit">{l}</button></form>""",
        a=action,
        q=f"{label}? The other text stays in the note's history.",
        csrf=csrf_field(csrf),
        b=base,
        k=keep,
        size=" small" if small else "",
        g=" ghost" if ghost else "",
        l=label,
    )
