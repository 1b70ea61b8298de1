// Anamnesis dashboard: small progressive enhancements. Every page works without this file.
"use strict";

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

// The editor's live preview: the server renders the body exactly as the note page would.
function setUpPreview(textarea) {
  const preview = document.getElementById("preview");
  if (!preview) return;
  let timer = 0;
  let sent = 0;
  const update = async () => {
    const mine = ++sent;
    const data = new URLSearchParams({ body: textarea.value, source: textarea.dataset.source || "" });
    try {
      const response = await fetch("/api/preview", {
        method: "POST",
        headers: { "X-CSRF-Token": csrfToken(), accept: "application/json" },
        body: data,
        credentials: "same-origin",
      });
      if (!response.ok || mine !== sent) return;
      const result = await response.json();
      // Sanitized on the server (raw HTML off, nh3), and the page's CSP runs no inline code.
      preview.innerHTML = result.html || '<p class="muted">The note as it will look.</p>';
      preview.dataset.rendered = String(mine);
    } catch (error) {
      // offline or stopped: the preview just stays as it was
    }
  };
  textarea.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(update, 200);
  });
}

// Where the caret of a textarea is, in page pixels (a mirror element with the same text and style).
function caretPoint(textarea) {
  const style = getComputedStyle(textarea);
  const mirror = document.createElement("div");
  for (const prop of ["fontFamily", "fontSize", "fontWeight", "lineHeight", "letterSpacing", "paddingTop",
    "paddingRight", "paddingBottom", "paddingLeft", "borderTopWidth", "borderLeftWidth", "boxSizing", "tabSize"]) {
    mirror.style[prop] = style[prop];
  }
  mirror.style.position = "absolute";
  mirror.style.visibility = "hidden";
  mirror.style.whiteSpace = "pre-wrap";
  mirror.style.overflowWrap = "break-word";
  mirror.style.width = textarea.clientWidth + "px";
  mirror.textContent = textarea.value.slice(0, textarea.selectionStart);
  const mark = document.createElement("span");
  mark.textContent = "\u200b";
  mirror.append(mark);
  document.body.append(mirror);
  const top = mark.offsetTop - textarea.scrollTop;
  const left = mark.offsetLeft - textarea.scrollLeft;
  const lineHeight = parseFloat(style.lineHeight) || 20;
  mirror.remove();
  return { top: top + lineHeight, left };
}

// "[[" in the editor offers notes by title and inserts [[id|Title]]: the id keeps working when
// the note is renamed or moved.
function setUpWikilinks(textarea) {
  const list = document.getElementById("wikilink-suggest");
  const form = textarea.form;
  if (!list || !form) return;
  let items = [];
  let active = 0;
  let start = -1;
  let timer = 0;
  let asked = 0;

  const close = () => { list.hidden = true; items = []; start = -1; textarea.removeAttribute("aria-activedescendant"); };
  const show = () => {
    list.textContent = "";
    items.forEach((item, i) => {
      const li = document.createElement("li");
      li.id = "wikilink-option-" + i;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", i === active ? "true" : "false");
      li.textContent = item.title;
      const where = document.createElement("small");
      where.textContent = item.project;
      li.append(where);
      li.addEventListener("mousedown", (event) => { event.preventDefault(); choose(i); });
      list.append(li);
    });
    if (!items.length) { close(); return; }
    const point = caretPoint(textarea);
    const box = textarea.getBoundingClientRect();
    const formBox = form.getBoundingClientRect();
    list.style.top = (box.top - formBox.top + Math.min(point.top, textarea.clientHeight) + 4) + "px";
    list.style.left = "0px";
    list.hidden = false;
    // Placed once shown, by its real width: its right edge stays inside the form and the window
    // (on a phone the list is most of the screen wide, and the page must never scroll sideways).
    const room = Math.min(formBox.width, document.documentElement.clientWidth - formBox.left);
    const left = Math.min(box.left - formBox.left + point.left, room - list.offsetWidth);
    list.style.left = Math.max(0, left) + "px";
    textarea.setAttribute("aria-activedescendant", "wikilink-option-" + active);
  };
  const choose = (i) => {
    const item = items[i];
    if (!item || start < 0) return;
    const target = item.id || item.path;
    const link = "[[" + target + "|" + item.title + "]]";
    const before = textarea.value.slice(0, start);
    let after = textarea.value.slice(textarea.selectionStart);
    if (after.startsWith("]]")) after = after.slice(2);
    textarea.value = before + link + after;
    const caret = before.length + link.length;
    textarea.setSelectionRange(caret, caret);
    close();
    textarea.dispatchEvent(new Event("input", { bubbles: true }));
    textarea.focus();
  };
  const lookup = () => {
    const upto = textarea.value.slice(0, textarea.selectionStart);
    const match = /\[\[([^\[\]\n|#]{0,80})$/.exec(upto);
    if (!match) { close(); return; }
    start = match.index;
    const query = match[1];
    const mine = ++asked;
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        const response = await fetch("/api/titles?q=" + encodeURIComponent(query), { credentials: "same-origin" });
        if (!response.ok || mine !== asked) return;
        items = await response.json();
        active = 0;
        show();
      } catch (error) { close(); }
    }, 80);
  };
  textarea.addEventListener("input", lookup);
  textarea.addEventListener("click", lookup);
  textarea.addEventListener("blur", () => setTimeout(close, 150));
  textarea.addEventListener("keydown", (event) => {
    if (list.hidden) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      active = (active + (event.key === "ArrowDown" ? 1 : items.length - 1)) % items.length;
      show();
    } else if (event.key === "Enter" || event.key === "Tab") {
      event.preventDefault();
      choose(active);
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  // Forms that change history ask first.
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }

  // Long actions (sync, reindex): show that something is happening, prevent double submits.
  for (const form of document.querySelectorAll("form.busy-on-submit")) {
    form.addEventListener("submit", () => {
      form.classList.add("busy");
      const button = form.querySelector("button");
      if (button) {
        button.dataset.label = button.textContent;
        button.textContent = "Working…";
        setTimeout(() => { button.disabled = true; }, 0);
      }
    });
  }

  // The phone menu: Escape closes it.
  const menu = document.getElementById("nav-toggle");
  if (menu) {
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && menu.checked) menu.checked = false;
    });
  }

  // Ctrl/Cmd+S saves the editor form.
  const editor = document.querySelector("form.editor");
  if (editor) {
    document.addEventListener("keydown", (event) => {
      if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "s") {
        event.preventDefault();
        editor.requestSubmit();
      }
    });
  }

  const body = document.querySelector("textarea[data-wikilinks]");
  if (body) {
    setUpPreview(body);
    setUpWikilinks(body);
  }

  // "/" focuses the search box (unless typing somewhere already).
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    const typing = target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement
      || target instanceof HTMLSelectElement;
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey) {
      const box = document.querySelector(".search-form input[type=search]")
        || document.querySelector(".side-search input");
      if (box) { event.preventDefault(); box.focus(); }
    }
  });
});
