"""The dashboard's gate, over real HTTP against a real `anamnesis web` process.

No token → 401; a foreign Host → refused (DNS rebinding); writes need the
CSRF token and a same-origin request; a note's `<script>` is shown as text;
paths cannot leave the store; a concurrent change on disk is not overwritten.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import RunCli
from web_support import SCRIPT_NOTE_BODY, Dashboard, Seeded, dashboard, seed_store, tags_in

from anamnesis.base.git import git_out
from anamnesis.base.listen import allowed_hosts, is_loopback
from anamnesis.base.paths import Store
from anamnesis.web.security import csrf_for
from anamnesis.web.server import exposure_warning

# One dashboard (the module-scoped `served`) for the whole file: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group("web-security-dashboard")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dashboard, Store, Seeded]]:
    from anamnesis.base.paths import open_store
    from anamnesis.store.operations import init_store

    home = tmp_path_factory.mktemp("websec") / "home"
    store = open_store(home)
    init_store(store)
    seeded = seed_store(store)
    with dashboard(home) as running:
        yield running, store, seeded


def client(running: Dashboard, *, token: bool = True, **kwargs: object) -> httpx.Client:
    cookies = {f"anamnesis_{running.port}": running.token} if token else {}
    return httpx.Client(base_url=running.base, cookies=cookies, follow_redirects=False, timeout=10, **kwargs)  # type: ignore[arg-type]


def commits(store: Store) -> int:
    return int(git_out(store.memory, "rev-list", "--count", "HEAD"))


def test_binds_loopback_by_default(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, _seeded = served
    assert running.url.startswith("http://127.0.0.1:")
    assert re.fullmatch(r"[A-Za-z0-9_-]{24,}", running.token)


@pytest.mark.parametrize("path", ["/", "/browse", "/static/app.css", "/api/graph", "/map", "/nonexistent"])
def test_no_token_is_401(served: tuple[Dashboard, Store, Seeded], path: str) -> None:
    running, _store, _seeded = served
    with client(running, token=False) as http:
        response = http.get(path)
    assert response.status_code == 401
    assert "token" in response.text.lower()
    assert "Answer in British English" not in response.text


def test_wrong_token_is_401(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, _seeded = served
    with httpx.Client(
        base_url=running.base, cookies={f"anamnesis_{running.port}": "nope"}, timeout=10
    ) as http:
        assert http.get("/").status_code == 401
        wrong = running.token[:-1] + ("x" if running.token[-1] != "x" else "y")  # never the real token
        assert http.get("/?token=" + wrong).status_code == 401
        assert http.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_token_in_url_becomes_a_strict_httponly_cookie(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, _seeded = served
    with client(running, token=False) as http:
        response = http.get(f"/search?q=pool&token={running.token}")
        assert response.status_code == 303
        assert response.headers["location"] == "/search?q=pool"  # the token leaves the address bar
        cookie = response.headers["set-cookie"]
        assert f"anamnesis_{running.port}={running.token}" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        follow = http.get("/search?q=pool")
        assert follow.status_code == 200
        assert "Use pg_bouncer in transaction mode" in follow.text


def test_the_token_redirect_stays_on_the_dashboard(served: tuple[Dashboard, Store, Seeded]) -> None:
    # "Location: /\\evil.example/" is "//evil.example/" to a browser: another site.
    running, _store, _seeded = served
    for target in ("//evil.example/", "/\\evil.example/", "/\\/evil.example/"):
        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as conn:
            conn.sendall(
                f"GET {target}?token={running.token} HTTP/1.1\r\nHost: 127.0.0.1:{running.port}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            reply = b""
            while chunk := conn.recv(65536):
                reply += chunk
        location = re.search(rb"(?im)^location: (.*)\r$", reply)
        assert location is not None, reply
        assert location.group(1) == b"/evil.example/", target


def test_bearer_token_works_for_scripts(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, _seeded = served
    with client(running, token=False, headers={"Authorization": f"Bearer {running.token}"}) as http:
        assert http.get("/api/graph").status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "attacker.localhost:{port}", ""]
)
def test_foreign_host_header_is_refused(served: tuple[Dashboard, Store, Seeded], host: str) -> None:
    running, _store, _seeded = served
    with client(running) as http:
        response = http.get("/", headers={"Host": host.format(port=running.port)})
    assert response.status_code == 421
    assert "Answer in British English" not in response.text


def test_own_host_names_are_served(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, _seeded = served
    with client(running) as http:
        for host in (f"127.0.0.1:{running.port}", f"localhost:{running.port}"):
            assert http.get("/", headers={"Host": host}).status_code == 200


def test_every_response_carries_a_strict_csp(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, _seeded = served
    with client(running) as http:
        for path in ("/", "/static/app.js", "/api/graph"):
            response = http.get(path)
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
            assert "frame-ancestors 'none'" in csp
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["referrer-policy"] == "same-origin"


def test_script_in_a_note_renders_inert(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, seeded = served
    assert "<script>" in SCRIPT_NOTE_BODY
    with client(running) as http:
        page = http.get("/note/" + seeded.script).text
    body = page.split('<div class="markdown">', 1)[1].split("</div>", 1)[0]
    assert "&lt;script&gt;" in body  # shown as text
    tags = tags_in(body)
    assert {tag for tag, _attrs in tags} == {"p"}, tags  # no script, no img, no link
    assert all(not attrs for _tag, attrs in tags)
    assert tags_in(page).count(("script", [("src", "/static/app.js"), ("defer", None)])) == 1
    assert [t for t in tags_in(page) if t[0] == "script"] == [
        ("script", [("src", "/static/app.js"), ("defer", None)])
    ]


def test_post_without_csrf_token_is_refused(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, _seeded = served
    before = commits(store)
    with client(running) as http:
        response = http.post("/new", data={"title": "Sneaky", "type": "semantic", "body": "x"})
        assert response.status_code == 403
        response = http.post(
            "/new", data={"title": "Sneaky", "type": "semantic", "body": "x", "_csrf": "0" * 40}
        )
        assert response.status_code == 403
    assert commits(store) == before


def test_cross_site_post_is_refused_even_with_the_csrf_token(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, _seeded = served
    before = commits(store)
    form = {"title": "Sneaky", "type": "semantic", "body": "x", "_csrf": csrf_for(running.token)}
    with client(running) as http:
        assert http.post("/new", data=form, headers={"Origin": "http://evil.example"}).status_code == 403
        assert http.post("/new", data=form, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert http.post("/new", data=form, headers={"Origin": "null"}).status_code == 403
    assert commits(store) == before


def test_exposed_dashboard_accepts_writes_from_its_own_ip_origin(store: Store) -> None:
    # Exposed with --host 0.0.0.0, the browser reaches it by an IP address; its forms send that
    # Origin, which is the dashboard's own and must not be taken for a cross-site request.
    from starlette.testclient import TestClient

    from anamnesis.web.app import create_app

    app = create_app(store, token="t0k", host="0.0.0.0", port=8123)
    own = {"Origin": "http://192.0.2.7:8123", "Sec-Fetch-Site": "same-origin", "Accept": "application/json"}
    with TestClient(app, base_url="http://192.0.2.7:8123") as http:
        http.cookies.set("anamnesis_8123", "t0k")
        form = {"_csrf": csrf_for("t0k")}
        assert http.post("/actions/reindex", data=form, headers=own).json()["ok"]
        other = dict(own, Origin="http://192.0.2.8:8123")
        other.pop("Sec-Fetch-Site")
        assert http.post("/actions/reindex", data=form, headers=other).status_code == 403


def test_get_never_writes(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, seeded = served
    before = commits(store)
    with client(running) as http:
        assert http.get("/new?title=x&body=y").status_code == 200
        assert http.get("/actions/sync").status_code == 405
        assert http.get("/restore/" + seeded.pool + "?commit=HEAD").status_code == 405
    assert commits(store) == before


def test_post_with_csrf_creates_a_committed_note(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, store, _seeded = served
    before = commits(store)
    form = {
        "title": "Created over HTTP",
        "type": "procedural",
        "project": "github.com/acme/api",
        "tags": "http, test",
        "body": "Made by the security test.",
        "_csrf": csrf_for(running.token),
    }
    with client(running) as http:
        response = http.post("/new", data=form, headers={"Origin": running.base})
    assert response.status_code == 303
    path = response.headers["location"].split("/note/", 1)[1].split("?", 1)[0]
    assert path.startswith("projects/github.com-acme-api/howto/created-over-http-")
    assert (store.memory / path).read_text().count("Made by the security test.") == 1
    assert commits(store) == before + 1


@pytest.mark.parametrize(
    "path",
    [
        "/note/..%2Fsettings.json",
        "/note/%2e%2e/%2e%2e/etc/passwd",
        "/note/.git/config",
        "/edit/..%2F..%2Fx.md",
    ],
)
def test_paths_cannot_leave_the_store(served: tuple[Dashboard, Store, Seeded], path: str) -> None:
    running, _store, _seeded = served
    with client(running) as http:
        response = http.get(path)
    assert response.status_code in (400, 404)
    assert "machine_id" not in response.text and "[core]" not in response.text


def test_a_symlinked_folder_cannot_reach_the_git_folder(served: tuple[Dashboard, Store, Seeded]) -> None:
    # A folder symlink inside memory/ (made by hand, or synced from a peer) pointing at .git
    # resolved inside the store, so /note/ showed .git/config and /edit/ offered to rewrite it.
    running, store, _seeded = served
    (store.memory / "dotgit").symlink_to(".git")
    try:
        with client(running) as http:
            for path in ("/note/dotgit/config", "/edit/dotgit/config", "/history/dotgit/config"):
                response = http.get(path)
                assert response.status_code in (400, 404), path  # not a note's name, or through a link
                assert "repositoryformatversion" not in response.text
    finally:
        (store.memory / "dotgit").unlink()


def test_writing_outside_the_store_is_refused(
    served: tuple[Dashboard, Store, Seeded], tmp_path: Path
) -> None:
    running, store, _seeded = served
    before = commits(store)
    form = {
        "title": "x",
        "type": "semantic",
        "tags": "",
        "body": "x",
        "base": "",
        "_csrf": csrf_for(running.token),
    }
    with client(running) as http:
        response = http.post("/edit/..%2F..%2Fescape.md", data=form)
    assert response.status_code in (400, 404)
    assert not (store.home / "escape.md").exists() and not (store.home.parent / "escape.md").exists()
    assert commits(store) == before


def test_edit_of_a_note_changed_on_disk_is_not_overwritten(served: tuple[Dashboard, Store, Seeded]) -> None:
    from anamnesis.store.operations import update_note

    running, store, seeded = served
    with client(running) as http:
        form_page = http.get("/edit/" + seeded.session).text
        base = re.search(r'name="base" value="([0-9a-f]+)"', form_page)
        assert base is not None
        update_note(store, seeded.session, body="Changed by another machine meanwhile.\n")
        response = http.post(
            "/edit/" + seeded.session,
            data={
                "title": "Fixed the flaky login test",
                "type": "episodic",
                "tags": "tests ci",
                "body": "My edit from the browser.",
                "base": base.group(1),
                "_csrf": csrf_for(running.token),
            },
        )
    assert response.status_code == 409
    assert "changed on disk" in response.text
    assert "My edit from the browser." in response.text  # the user's text is kept in the form
    text = (store.memory / seeded.session).read_text()
    assert "Changed by another machine meanwhile." in text
    assert "My edit from the browser." not in text


def test_edit_of_a_note_deleted_meanwhile_keeps_the_users_text(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    from anamnesis.store.operations import create_note, delete_note

    running, store, _seeded = served
    note = create_note(store, type="semantic", title="Short-lived", body="Soon gone.\n")
    with client(running) as http:
        base = re.search(r'name="base" value="([0-9a-f]+)"', http.get("/edit/" + note.path).text)
        assert base is not None
        delete_note(store, note.path)  # e.g. a sync brought another machine's delete
        response = http.post(
            "/edit/" + note.path,
            data={
                "title": "Short-lived",
                "type": "semantic",
                "tags": "",
                "body": "A long edit typed in the browser.",
                "base": base.group(1),
                "_csrf": csrf_for(running.token),
            },
        )
    assert response.status_code == 409
    assert "deleted" in response.text
    assert "A long edit typed in the browser." in response.text  # not lost with a bare 404
    assert not (store.memory / note.path).exists()


def test_allowed_hosts_for_loopback_and_exposed_binds() -> None:
    assert allowed_hosts("127.0.0.1", 8000) == {"127.0.0.1:8000", "localhost:8000"}
    assert "[::1]:8000" in allowed_hosts("::1", 8000)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


def test_exposing_the_dashboard_warns_loudly() -> None:
    assert exposure_warning("127.0.0.1") is None
    warning = exposure_warning("0.0.0.0")
    assert warning is not None and "WARNING" in warning and "token" in warning


def test_cli_reports_a_busy_port_in_one_line(store: Store, run_cli: RunCli) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = run_cli("web", "--no-open", "--port", str(port), timeout=30)
    assert proc.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_without_a_store_says_how_to_make_one(home: Path, run_cli: RunCli) -> None:
    proc = run_cli("web", "--no-open", timeout=30)
    assert proc.returncode == 3
    assert "anamnesis init" in proc.stderr


def test_move_delete_create_at_and_preview_need_csrf_and_stay_inside_the_store(
    served: tuple[Dashboard, Store, Seeded],
) -> None:
    from anamnesis.web.context import text_sha

    running, store, seeded = served
    before = commits(store)
    base = text_sha((store.memory / seeded.british).read_text())
    csrf = csrf_for(running.token)
    with client(running) as http:
        assert http.post("/delete/" + seeded.british, data={"base": base}).status_code == 403
        assert http.get("/delete/" + seeded.british).status_code == 405
        assert (
            http.post("/move/" + seeded.british, data={"base": base, "new_path": "global/x.md"}).status_code
            == 403
        )
        assert http.post("/api/preview", data={"body": "x"}).status_code == 403
        for target in (
            "../escape.md",
            "../../escape.md",
            ".git/hooks/x.md",
            "global/x.txt",
            "/tmp/escape.md",
        ):
            response = http.post(
                "/move/" + seeded.british, data={"base": base, "new_path": target, "_csrf": csrf}
            )
            assert response.status_code == 400, target
        form = {"title": "At", "type": "semantic", "body": "x", "at": "../../escape.md", "_csrf": csrf}
        assert http.post("/new", data=form).status_code == 400
        preview = http.post(
            "/api/preview", data={"body": "<script>x()</script> [[Lint before pushing]]", "_csrf": csrf}
        )
        assert preview.status_code == 200
        rendered = preview.json()["html"]
        assert "<script>" not in rendered and "&lt;script&gt;" in rendered and 'class="wikilink"' in rendered
    assert (store.memory / seeded.british).exists()
    assert not (store.home / "escape.md").exists() and not (store.home.parent / "escape.md").exists()
    assert not (store.memory / "global" / "x.txt").exists()
    assert commits(store) == before


def test_files_that_are_not_notes_have_no_note_pages(served: tuple[Dashboard, Store, Seeded]) -> None:
    # An alias file's edit form wrote front matter into it, and .gitattributes had Edit and Delete.
    running, store, _seeded = served
    alias = store.memory / "aliases" / "github.com-acme-old.alias"
    alias.parent.mkdir(exist_ok=True)
    alias.write_text("github.com/acme/new\n")
    (store.memory / ".gitattributes").write_text("*.md text\n")
    try:
        with client(running) as http:
            for path in ("aliases/github.com-acme-old.alias", ".gitattributes"):
                for page in ("note", "edit", "history", "move"):
                    response = http.get(f"/{page}/{path}")
                    assert response.status_code == 404, (page, path, response.status_code)
            form = {"_csrf": csrf_for(running.token), "title": "x", "type": "semantic", "tags": "", "body": "x", "base": ""}
            response = http.post("/edit/aliases/github.com-acme-old.alias", data=form)
            assert response.status_code == 404
        assert alias.read_text() == "github.com/acme/new\n"
    finally:
        alias.unlink()
        (store.memory / ".gitattributes").unlink()


def test_a_page_number_past_any_store_is_an_empty_page(served: tuple[Dashboard, Store, Seeded]) -> None:
    running, _store, _seeded = served
    with client(running) as http:
        response = http.get("/browse?page=999999999999999999999")
    assert response.status_code == 200
