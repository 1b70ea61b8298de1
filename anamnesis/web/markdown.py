"""Note bodies as safe HTML: markdown-it with raw HTML off, then nh3 on the output.

Notes come from other machines and from agents, so a note is untrusted input:
raw HTML in it is shown as text, links can only be http(s)/mailto or
relative, and the sanitizer removes anything that slipped through. Links to
other notes (`[[wikilinks]]`, relative `.md` links) become dashboard links.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from anamnesis.store import WIKILINK_RE, LinkResolver
from anamnesis.web.html import Markup, escape, html, note_url

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span", "strong", "sub",
    "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "span": {"class"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
}
URL_SCHEMES = {"http", "https", "mailto"}


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    if not state.src.startswith("[[", state.pos):
        return False
    match = WIKILINK_RE.match(state.src, state.pos)
    if match is None or match.end() > state.posMax:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        target = match.group(1).strip()
        token.meta = {"target": target, "label": (match.group(3) or "").strip() or target}
    state.pos = match.end()
    return True


def _render_wikilink(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    meta = tokens[idx].meta
    resolver: LinkResolver | None = env.get("resolver")
    path = resolver.wikilink(meta["target"]) if resolver else None
    if path is None:
        create = env.get("create")
        if create is not None:
            return html(
                '<a class="wikilink missing" href="{h}" title="no such note yet: create it">{l}</a>',
                h=create(meta["target"]),
                l=meta["label"],
            )
        return html('<span class="wikilink missing" title="no such note">{l}</span>', l=meta["label"])
    return html('<a class="wikilink" href="{h}">{l}</a>', h=note_url(path), l=meta["label"])


def _render_link_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    resolver: LinkResolver | None = env.get("resolver")
    source = env.get("source")
    if resolver is not None and source and href.lower().split("#", 1)[0].endswith(".md"):
        target = resolver.markdown(source, href)
        if target is not None:
            token.attrSet("href", note_url(target))
            token.attrSet("class", "notelink")
    return renderer.renderToken(tokens, idx, options, env)


def _make_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)
    md.add_render_rule("wikilink", _render_wikilink)
    md.add_render_rule("link_open", _render_link_open)
    return md


_PARSER = _make_parser()


def sanitize(fragment: str) -> Markup:
    """Strip everything but plain formatting tags and safe links from an HTML fragment."""
    return Markup(
        nh3.clean(
            fragment,
            tags=ALLOWED_TAGS,
            attributes={k: set(v) for k, v in ALLOWED_ATTRIBUTES.items()},
            url_schemes=URL_SCHEMES,
            link_rel="noopener noreferrer",
            strip_comments=True,
        )
    )


def render_markdown(
    body: str,
    *,
    source: str | None = None,
    resolver: LinkResolver | None = None,
    create: Callable[[str], str] | None = None,
) -> Markup:
    """A note body as sanitized HTML; links to notes point into the dashboard.

    `create(target)`, when given, is the address that creates the note a
    wikilink names when there is no such note yet.
    """
    env: dict[str, Any] = {"source": source, "resolver": resolver, "create": create}
    return sanitize(_PARSER.render(body, env))


def render_plain(text: str) -> Markup:
    """Text that must not be interpreted at all, in a <pre>."""
    return html('<pre class="raw">{t}</pre>', t=escape(text))
