// Anamnesis dashboard: small progressive enhancements. Every page works without this file.
"use strict";

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
