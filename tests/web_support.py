"""Helpers for the dashboard tests: seeded stores, the real `anamnesis web` process, Chromium."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from procs import read_printed, stop_process

from anamnesis.base.paths import Store

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCRIPT_NOTE_BODY = (
    'Hello <script>window.__pwned = 1; alert("x")</script>\n\n'
    '<img src=x onerror="window.__pwned=2">\n\n'
    "[click](javascript:window.__pwned=3)\n"
)
API = "github.com/acme/api"
WEB = "github.com/acme/web"
LAPTOP = "laptop-7f3a"
DESKTOP = "desktop-91bc"


@dataclass
class Seeded:
    """Paths of the notes a seeded store holds, by role."""

    pool: str
    lint: str
    british: str
    session: str
    script: str
    deploy: str


def seed_store(store: Store) -> Seeded:
    """A small store: notes in two projects and global, links between them, a hostile note."""
    from anamnesis.store.operations import create_note

    pool = create_note(
        store,
        type="semantic",
        title="Use pg_bouncer in transaction mode",
        body="The API's connection pool runs **pg_bouncer** in transaction mode.\n\n"
        "See [[Lint before pushing]] and keep `pool_size = 20`.\n",
        project=API,
        tags=["postgres", "database"],
    )
    lint = create_note(
        store,
        type="procedural",
        title="Lint before pushing",
        body="1. Run `make lint`\n2. Run `make test`\n\nRelated: [pool settings](../facts/"
        + pool.path.rsplit("/", 1)[1]
        + ")\n",
        project=API,
        tags=["ci", "database"],
    )
    british = create_note(
        store,
        type="preference",
        title="Answer in British English",
        body="Spell colour with a u.\n",
        tags=["style"],
    )
    session = create_note(
        store,
        type="episodic",
        title="Fixed the flaky login test",
        body="The login test raced the session cookie; waiting for the redirect fixed it.\n",
        project=WEB,
        tags=["tests", "ci"],
    )
    script = create_note(
        store, type="semantic", title="Hostile note", body=SCRIPT_NOTE_BODY, project=WEB, tags=["security"]
    )
    deploy = create_note(
        store,
        type="semantic",
        title="Deploy target",
        body="The deploy target for the API:\n\nDeploy to **staging** first, then production.\n\n"
        "Rollback with `make rollback`.\n",
        project=API,
        tags=["deploy"],
    )
    return Seeded(pool.path, lint.path, british.path, session.path, script.path, deploy.path)


def new_machine(home: Path, machine: str) -> Store:
    """An initialised store whose machine id is `machine`."""
    from anamnesis.base.paths import open_store
    from anamnesis.base.settings import load_settings, save_settings
    from anamnesis.store.operations import init_store

    store = open_store(home)
    store.home.mkdir(parents=True, exist_ok=True)
    settings = load_settings(store)
    settings["machine_id"] = machine
    save_settings(store, settings)
    init_store(store)
    return store


@dataclass
class Fleet:
    """Two machines syncing through a bare hub, with one real same-line conflict on the laptop."""

    laptop: Store
    desktop: Store
    hub: Path
    notes: Seeded
    conflict: str


def make_fleet(root: Path) -> Fleet:
    """Real stores and real syncs: the laptop seeds, the desktop joins; both edit one line."""
    from anamnesis.store.operations import create_note, update_note
    from anamnesis.sync import engine as sync
    from anamnesis.sync.peers import add_peer

    hub = root / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
    laptop = new_machine(root / LAPTOP, LAPTOP)
    desktop = new_machine(root / DESKTOP, DESKTOP)
    notes = seed_store(laptop)
    add_peer(laptop, "hub", str(hub))
    sync.sync(laptop)
    sync.join(desktop, str(hub), "hub")
    create_note(
        desktop,
        type="procedural",
        title="Rotate the API keys",
        body="Rotate keys every 90 days: `make rotate-keys`. See [[Deploy target]].\n",
        project=API,
        tags=["security", "deploy"],
    )
    update_note(
        desktop,
        notes.deploy,
        body="The deploy target for the API:\n\n"
        "Deploy to **staging-us** first, then production.\n\nRollback with `make rollback`.\n",
    )
    sync.sync(desktop)
    update_note(
        laptop,
        notes.deploy,
        body="The deploy target for the API:\n\n"
        "Deploy to **staging-eu** first, then production.\n\nRollback with `make rollback`.\n",
    )
    result = sync.sync(laptop)
    assert result.conflicts == [notes.deploy], result.to_dict()
    return Fleet(laptop, desktop, hub, notes, notes.deploy)


def tags_in(fragment: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every start tag in an HTML fragment with its attributes, as a browser's parser sees them."""
    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, attrs))

    Collector().feed(fragment)
    return found


def seed_many(store: Store, count: int, projects: int = 12, seed: int = 7) -> None:
    """`count` notes in one commit (fast: written directly, like an import), with links and tags."""
    import random

    from anamnesis.base import repo
    from anamnesis.base.fsutil import atomic_write_text
    from anamnesis.base.notes import NOTE_TYPES, Note, note_relpath, render_note
    from anamnesis.search.index import open_index

    rng = random.Random(seed)
    words = (
        "cache deploy schema index token retry queue worker lint build docker pool migration auth "
        "cookie session latency backup replica shard webhook config parser router logging metrics"
    ).split()
    names = [f"github.com/acme/service-{i:02d}" for i in range(projects)]
    titles: list[str] = []
    for i in range(count):
        kind = NOTE_TYPES[i % 3]
        project = names[rng.randrange(projects)] if i % 10 else None
        title = f"{rng.choice(words).title()} {rng.choice(words)} note {i}"
        links = " ".join(f"[[{rng.choice(titles)}]]" for _ in range(rng.randrange(3))) if titles else ""
        body = f"About {rng.choice(words)} and {rng.choice(words)}. {links}\n"
        note_id = f"{i:010d}"[-10:].replace("0", "a")
        note = Note(
            path=note_relpath(kind, title, note_id, project),
            id=note_id,
            type=kind,
            title=title,
            body=body,
            project=project,
            tags=rng.sample(words, 2),
            created="2026-01-01T00:00:00Z",
            updated=f"2026-01-{1 + i % 28:02d}T00:00:00Z",
            machine=f"machine-{i % 3}",
            source="bench",
        )
        atomic_write_text(store.memory / note.path, render_note(note))
        titles.append(title)
    repo.commit_all(store, "bench-machine: import many notes")
    with open_index(store) as index:
        index.refresh()


@dataclass
class Dashboard:
    """A running `anamnesis web` process."""

    proc: subprocess.Popen[str]
    url: str  # with ?token=

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def stop(self) -> None:
        stop_process(self.proc, signal.SIGINT, grace=10)


@contextmanager
def dashboard(home: Path, *args: str) -> Iterator[Dashboard]:
    """Start the real CLI (`python -m anamnesis web --no-open --port 0`) and yield its address."""
    env = dict(os.environ, ANAMNESIS_HOME=str(home), GIT_CONFIG_NOSYSTEM="1", PYTHONUNBUFFERED="1")
    env["HOME"] = str(home.parent)  # pages show the store as ~/<machine>/memory, not a temp path
    proc = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", "web", "--no-open", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    url = read_printed(proc, {"url": r"(http://\S+\?token=\S+)"}).get("url")
    running = Dashboard(proc, url) if url else None
    try:
        if running is None:
            proc.kill()
            _out, err = proc.communicate(timeout=10)
            raise AssertionError(f"anamnesis web did not print its address; stderr:\n{err}")
        _wait_listening(running)
        yield running
    finally:
        if running is not None:
            running.stop()
        elif proc.poll() is None:
            proc.kill()


def _wait_listening(running: Dashboard) -> None:
    import socket

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", running.port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the dashboard never accepted connections")


def chromium_candidates() -> list[str]:
    """Where to look for Chromium: ANAMNESIS_CHROMIUM if set, else Debian's path and PATH."""
    if os.environ.get("ANAMNESIS_CHROMIUM"):
        return [os.environ["ANAMNESIS_CHROMIUM"]]
    found = ["/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or ""]
    return [c for c in found if c]


def chromium_path() -> str | None:
    """The system Chromium (never a downloaded one), or None."""
    return next((c for c in chromium_candidates() if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def chromium_or_skip() -> str:
    """Chromium's path; missing means skip on a developer's machine but FAIL in CI (CI=true)."""
    path = chromium_path()
    if path:
        return path
    message = f"Chromium is not installed (looked for {', '.join(chromium_candidates())}); install Debian's chromium"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Playwright (the system browser, never a download)."""
    path = chromium_or_skip()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("the playwright Python package is missing")
        pytest.skip("the playwright Python package is missing")
    with sync_playwright() as pw:
        chrome = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield chrome
        finally:
            chrome.close()


# -- the browser suites' shared parts (test_web_e2e.py, test_web_daily.py) ----------------------

LAPTOP_VIEW = {"width": 1280, "height": 800}
PHONE_VIEW = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    with browser() as launched:
        yield launched


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: docs/screenshots with ANAMNESIS_SCREENSHOTS=1, else a scratch folder."""
    if os.environ.get("ANAMNESIS_SCREENSHOTS") == "1":
        folder = ROOT / "docs" / "screenshots"
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Dashboard]]:
    """Two really-syncing machines and a hub, with the laptop's dashboard running."""
    made = make_fleet(tmp_path_factory.mktemp("fleet"))
    with dashboard(made.laptop.home) as running:
        yield made, running


class Watched:
    """A page, with the script errors, CSP violations and dialogs it produced."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.expected_status: set[int] = set()
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("console", self._console)
        page.on("dialog", self._dialog)
        page.on("response", self._response)

    def _console(self, msg: Any) -> None:
        if "Failed to load resource" in msg.text:
            return  # judged by status in _response
        if msg.type == "error" or "Content Security Policy" in msg.text:
            self.errors.append(f"console: {msg.text}")

    def _response(self, response: Any) -> None:
        if response.status >= 400 and response.status not in self.expected_status:
            self.errors.append(f"HTTP {response.status} for {response.url}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.accept()

    def open(self, path: str) -> Any:
        response = self.page.goto(self.base + path)
        self.page.wait_for_load_state("networkidle")
        return response


@contextmanager
def session(
    chrome: Any, running: Dashboard, view: dict[str, int] = LAPTOP_VIEW, scheme: str = "light"
) -> Iterator[Watched]:
    """A fresh browser context that has opened the printed address (so it holds the cookie);
    no script error, CSP violation or failed request may happen in it."""
    context = chrome.new_context(viewport=view, color_scheme=scheme)
    try:
        watched = Watched(context.new_page(), running.base)
        watched.page.goto(running.url)
        assert "token=" not in watched.page.url  # the token is swapped for a cookie at once
        yield watched
        assert watched.errors == [], watched.errors
    finally:
        context.close()


def wait_map(watched: Watched) -> dict[str, Any]:
    watched.page.wait_for_selector("html[data-map-ready]", state="attached", timeout=30_000)
    info: dict[str, Any] = watched.page.evaluate(
        "({nodes: window.anamnesisMap.nodes, edges: window.anamnesisMap.edges,"
        " renderMs: window.anamnesisMap.renderMs, layoutMs: window.anamnesisMap.layoutMs})"
    )
    return info
