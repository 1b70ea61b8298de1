"""The FTS5 index against real files: code words, stemming, filters, increments, bad files."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from anamnesis.base.paths import Store
from anamnesis.search.engine import search
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note


def write(store: Store, relpath: str, text: str | bytes) -> Path:
    path = store.memory / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def search_paths(store: Store, query: str, **filters: object) -> list[str]:
    with open_index(store) as index:
        index.refresh()
        return [h.path for h in search(index, query, **filters)]  # type: ignore[arg-type]


def test_code_words_and_stemming_are_found(store: Store) -> None:
    a = create_note(
        store,
        type="semantic",
        title="Config loading",
        body="We call parse_config() early. Edit src/app/main.py and set pg_bouncer.pool_size=20.",
        project="github.com/acme/api",
    )
    b = create_note(store, type="procedural", title="Deploying", body="The deployment runs nightly.")
    c = create_note(store, type="semantic", title="Loader", body="The ConfigLoader class reads YAML.")
    create_note(
        store, type="semantic", title="Unrelated", body="parse and config appear apart here, main too."
    )
    assert search_paths(store, "parse_config") == [a.path]
    assert search_paths(store, "pg_bouncer.pool_size") == [a.path]
    assert search_paths(store, "src/app/main.py") == [a.path]
    assert search_paths(store, "deploy") == [b.path]  # stemmed: deployment, deploying
    assert search_paths(store, "deployed") == [b.path]
    assert search_paths(store, "config loader")[0] == c.path  # ConfigLoader is split; the note naming it ranks first
    assert search_paths(store, "ConfigLoader") == [c.path]
    assert c.path in search_paths(store, "loader")


def test_title_outranks_tags_outranks_body(store: Store) -> None:
    body_hit = create_note(store, type="semantic", title="Other", body="kafka " + "filler words " * 30)
    tag_hit = create_note(store, type="semantic", title="Queue", body="filler words " * 30, tags=["kafka"])
    title_hit = create_note(store, type="semantic", title="Kafka consumers", body="filler words " * 30)
    assert search_paths(store, "kafka") == [title_hit.path, tag_hit.path, body_hit.path]


def test_filters_by_project_type_tag_and_date(store: Store) -> None:
    a = create_note(store, type="semantic", title="Redis one", body="redis", project="p1", tags=["cache"])
    b = create_note(store, type="procedural", title="Redis two", body="redis", project="p2")
    assert search_paths(store, "redis", project="p1") == [a.path]
    assert search_paths(store, "redis", type="procedural") == [b.path]
    assert search_paths(store, "redis", tag="cache") == [a.path]
    assert set(search_paths(store, "redis", since="1d")) == {a.path, b.path}
    assert search_paths(store, "redis", until="2000-01-01") == []


def test_date_filters_read_dates_strictly_and_until_includes_its_day(store: Store) -> None:
    import pytest

    from anamnesis.base.errors import UsageError

    a = create_note(store, type="semantic", title="Redis one", body="redis")
    today = a.updated[:10]
    assert search_paths(store, "redis", until=today) == [a.path]
    assert search_paths(store, "redis", since=today) == [a.path]
    assert search_paths(store, "redis", since=today.replace("-", "")) == [a.path]
    assert search_paths(store, "redis", since=today + "T00:00:00+02:00") == [a.path]
    for bad in ("2026-11-01garbage", "99999999999d", "10000000y", "yesterday"):
        with pytest.raises(UsageError):
            search_paths(store, "redis", since=bad)


def test_snippets_mark_the_match(store: Store) -> None:
    create_note(store, type="semantic", title="T", body="alpha beta gamma delta needle epsilon")
    with open_index(store) as index:
        hit = search(index, "needle")[0]
    assert "**needle**" in hit.snippet_text()
    assert ("needle", True) in hit.snippet_parts()


def test_query_syntax_is_safe(store: Store) -> None:
    odd = create_note(store, type="semantic", title="Odd", body="and or not")
    create_note(store, type="semantic", title="Other", body="nothing alike")
    # FTS5 operators and stray quotes are read as plain words: no syntax error, and the words match.
    assert search_paths(store, 'AND OR NOT "(') == [odd.path]
    assert search_paths(store, '"and or"') == [odd.path]
    for text in ("-only", "NEAR(x y) ^ : ;", '"unbalanced'):
        assert search_paths(store, text) == []


def test_incremental_refresh_reads_only_changes(store: Store) -> None:
    notes = [create_note(store, type="semantic", title=f"n{i}", body=f"word{i}") for i in range(5)]
    with open_index(store) as index:
        assert index.refresh().changed == 0
        path = store.memory / notes[0].path
        path.write_text(path.read_text().replace("word0", "changedword"))
        (store.memory / notes[1].path).unlink()
        write(store, "global/facts/hand.md", "# Hand written\nhandword\n")
        report = index.refresh()
        assert (report.added, report.updated, report.removed) == (1, 1, 1)
        assert [h.path for h in search(index, "changedword")] == [notes[0].path]
        assert search(index, "word1") == []
        assert [h.title for h in search(index, "handword")] == ["Hand written"]


def test_refresh_of_named_paths_only(store: Store) -> None:
    note = create_note(store, type="semantic", title="n", body="before")
    path = store.memory / note.path
    path.write_text(path.read_text().replace("before", "after"))
    other = write(store, "global/facts/other.md", "# other\nunseen\n")
    with open_index(store) as index:
        report = index.refresh([note.path])
        assert report.updated == 1
        assert search(index, "after") and not search(index, "unseen")
        other.unlink()
        assert index.refresh(["global/facts/other.md"]).removed == 0


def test_malformed_files_are_reported_and_the_rest_stay_searchable(store: Store, tmp_path: Path) -> None:
    good = create_note(store, type="semantic", title="Good", body="searchable goodword")
    write(store, "global/facts/broken-yaml.md", "---\ntitle: [oops\n---\nbrokenword\n")
    write(store, "global/facts/no-front.md", "just some nofrontword text\n")
    write(store, "global/facts/binary.md", b"\x89PNG\r\n\x1a\n\0\0\0binary")
    write(store, "global/facts/latin1.md", "---\ntitle: caf\xe9\n---\nlatinword caf\xe9\n".encode("latin-1"))
    big = "---\ntitle: Big\n---\n" + ("bigword filler text here\n" * 220_000)
    write(store, "global/facts/big.md", big)
    outside = tmp_path / "secret.md"
    outside.write_text("# secret\nsecretword\n")
    os.symlink(outside, store.memory / "global" / "facts" / "link.md")
    with open_index(store) as index:
        report = index.refresh()
        problems = dict(report.problems)
        assert "not valid YAML" in problems["global/facts/broken-yaml.md"]
        assert "no front matter" in problems["global/facts/no-front.md"]
        assert "binary" in problems["global/facts/binary.md"]
        assert "UTF-8" in problems["global/facts/latin1.md"]
        assert "MB" in problems["global/facts/big.md"]
        assert "symlink" in problems["global/facts/link.md"]
        assert [h.path for h in search(index, "goodword")] == [good.path]
        for word in ("brokenword", "nofrontword", "latinword", "bigword"):
            assert search(index, word), word
        assert search(index, "secretword") == []
        assert len(index.problems()) == 6


def test_corrupt_or_old_index_is_rebuilt_automatically(store: Store) -> None:
    create_note(store, type="semantic", title="Survivor", body="survivorword")
    store.index_path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{store.index_path}{suffix}").unlink(missing_ok=True)
    with open_index(store) as index:
        assert index.rebuilt
        assert search(index, "survivorword")
    conn = sqlite3.connect(store.index_path)
    conn.execute("UPDATE meta SET value='0' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with open_index(store) as index:
        assert index.rebuilt and search(index, "survivorword")
    store.index_path.unlink()
    with open_index(store) as index:
        assert index.rebuilt and search(index, "survivorword")


def test_an_index_of_the_previous_schema_is_upgraded_in_place(store: Store) -> None:
    create_note(store, type="semantic", title="Kept", body="keptword")
    conn = sqlite3.connect(store.index_path)
    conn.execute("DROP INDEX notes_stat")  # what schema 2 had
    conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with open_index(store) as index:
        assert not index.rebuilt  # migrated, not built again
        assert index.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "3"
        plan = index.conn.execute("EXPLAIN QUERY PLAN SELECT path, size, mtime_ns FROM notes").fetchall()
        assert "COVERING INDEX notes_stat" in str(plan)
        assert search(index, "keptword")


def test_same_second_rewrite_with_same_size_is_not_missed(store: Store) -> None:
    path = write(store, "global/facts/fast.md", "# fast\naaaa\n")
    with open_index(store) as index:
        index.refresh()
        stat = path.stat()
        path.write_text("# fast\nbbbb\n")
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
        index.refresh()
        assert search(index, "bbbb")


def test_find_ref_and_counts(store: Store) -> None:
    note = create_note(store, type="procedural", title="Release steps", body="x", project="p")
    with open_index(store) as index:
        assert index.find_ref(note.id) == [note.path]
        assert index.find_ref(note.id[:5]) == [note.path]
        assert index.find_ref(note.path.rsplit("/", 1)[1]) == [note.path]
        assert index.find_ref("release") == [note.path]  # the leading words of the file name
        assert index.find_ref("release-steps") == [note.path]
        assert index.find_ref("r") == [] and index.find_ref("rel") == []  # not any name starting so
        counts = index.counts()
    assert (
        counts["notes"] == 1 and counts["by_type"] == {"procedural": 1} and counts["by_project"] == {"p": 1}
    )
    assert time.time() - counts["refreshed"] < 60


def test_a_file_name_that_is_not_utf8_is_reported_and_the_rest_indexed(store: Store) -> None:
    good = create_note(store, type="semantic", title="Fine", body="fineword")
    (store.memory / "global").mkdir(exist_ok=True)
    with open(os.fsencode(str(store.memory / "global")) + b"/bad\xff.md", "wb") as handle:
        handle.write(b"# bad name\nbadnameword\n")
    with open_index(store) as index:
        report = index.refresh()
        assert any("not valid UTF-8" in problem for _, problem in report.problems)
        assert [h.path for h in search(index, "fineword")] == [good.path]
        assert index.refresh().changed == 0  # stable: not re-reported as new on every scan
        assert any("not valid UTF-8" in problem for _, problem in index.problems())


# -- speed work of issue 12: one build, a parser that agrees with YAML, errors by class, watch --


def test_a_new_index_is_built_once_by_reindex(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    import anamnesis.search.index as index_module
    from anamnesis.search.index import Index

    for i in range(12):
        create_note(store, type="semantic", title=f"Note {i}", body=f"body {i} rebuildword")
    store.index_path.unlink()
    parsed: list[str] = []
    real = index_module.parse_note

    def counting(text: str, path: str) -> object:
        parsed.append(path)
        return real(text, path)

    monkeypatch.setattr(index_module, "parse_note", counting)
    with Index(store) as index:  # what `anamnesis reindex` opens: no index.db yet
        assert index.rebuilt and index.empty
        report = index.rebuild()
        assert report.added == 12 and report.rebuilt
        assert len(parsed) == 12  # every note parsed once, not once to fill and once to rebuild
        parsed.clear()
        assert index.rebuild().added == 12  # a rebuild of a filled index starts over, once
        assert len(parsed) == 12
        assert len(search(index, "rebuildword", limit=50)) == 12


@pytest.mark.parametrize(
    "front",
    [
        "priority: 3\npinned: true\nratio: 0.5\nnothing: null\ntilde: ~",
        "count: 0x1F\nold: 0o17\nbig: 1_000\nneg: -4\nexp: 1e3\ninf: .inf\nnan_is: .nan",
        "flag: yes\nother: Off\nupper: TRUE\nword: True story",
        "created: 2026-11-26T09:14:03Z\nday: 2026-11-26\nspaced: 2026-11-26 09:14:03.5 +02:00",
        "tags:\n- 42\n- true\n- kafka\n- 2026-01-02\nsupersedes:\n- 123\n- abc",
        "title: 'It''s quoted: 3'\nid: 0012\nversion: 1.10\ntime: 12:30\nsexa: 190:20:30",
        "title: No, really\nproject: github.com/acme/api\nempty:\nlist: []",
    ],
)
def test_fast_front_matter_reads_what_yaml_reads(front: str) -> None:
    import yaml

    from anamnesis.base.notes import fast_front_matter

    fast = fast_front_matter(front)
    expected = yaml.safe_load(front)
    if fast is None:  # handed to YAML itself: nothing can differ
        return
    assert fast == expected or repr(fast) == repr(expected)  # (a NaN is not equal to itself)


def test_fast_front_matter_handles_numbers_and_booleans_itself() -> None:
    """The fast path, not YAML, reads the scalars hand-written notes carry."""
    from anamnesis.base.notes import fast_front_matter

    assert fast_front_matter("id: abc\npriority: 3\npinned: true\nupdated: 2026-11-26") == {
        "id": "abc",
        "priority": 3,
        "pinned": True,
        "updated": __import__("datetime").date(2026, 11, 26),
    }


def test_reading_modules_start_without_yaml() -> None:
    """`search` and `list` import the index and search but parse no note when nothing changed:
    YAML and python-frontmatter (~30 ms) are not imported for them."""
    import subprocess
    import sys

    code = (
        "import sys, anamnesis.search.index, anamnesis.search, anamnesis.search.catalog;"
        "print(sorted(m for m in ('yaml', 'frontmatter') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_camel_case_parts_go_to_the_code_column() -> None:
    from anamnesis.search.index import code_words

    text = "Use HttpClient and parseJSONData, not x2Y; IPAddress stays. Sentence Case is prose."
    assert code_words(text).split("\n") == ["Http Client", "parse JSON Data", "x 2 Y"]
    assert code_words("no identifiers here. None at all") == ""


def test_a_busy_index_raises_index_locked(store: Store) -> None:
    from anamnesis.base.errors import IndexLocked, LockTimeout

    create_note(store, type="semantic", title="Busy", body="busy body")
    holder = sqlite3.connect(str(store.index_path), isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with open_index(store) as index:
            index.conn.execute("PRAGMA busy_timeout=50")
            with pytest.raises(IndexLocked) as caught:
                index.refresh()
            assert isinstance(caught.value, LockTimeout) and caught.value.exit_code == 5
            assert "busy" in str(caught.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_damaged_index_raises_index_corrupt(store: Store) -> None:
    from anamnesis.base.errors import IndexCorrupt

    for i in range(40):
        create_note(store, type="semantic", title=f"Damaged {i}", body="filler text " * 200)
    with open_index(store) as index:
        index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    probe = sqlite3.connect(str(store.index_path))
    page_size = probe.execute("PRAGMA page_size").fetchone()[0]
    root = probe.execute("SELECT rootpage FROM sqlite_master WHERE name = 'notes'").fetchone()[0]
    probe.close()
    with store.index_path.open("r+b") as handle:  # the notes table's root page only: meta stays readable
        handle.seek((root - 1) * page_size)
        handle.write(b"\xff" * page_size)
    with pytest.raises(IndexCorrupt) as caught, open_index(store) as index:
        index.list_notes(limit=None)
        search(index, "filler")
    assert "anamnesis reindex" in str(caught.value)


def _wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_watch_vouches_for_the_index_only_while_it_sees_every_change(store: Store) -> None:
    from anamnesis.sync.freshness import catch_up, watch_vouches
    from anamnesis.sync.watch import Watcher, WatchOptions

    note = create_note(store, type="semantic", title="Watched", body="first version")
    with open_index(store) as index:
        index.refresh()
        assert not watch_vouches(index)  # no watch: every reader scans
    before = write(store, "global/facts/before-watch.md", "---\ntitle: Before\n---\nbeforewatchword\n")
    os.utime(before, (time.time() - 60, time.time() - 60))
    watcher = Watcher(
        store,
        sync=lambda reason: None,
        options=WatchOptions(discovery=False, initial_sync=False, interval=3600),
    )
    watcher.start()
    try:
        with open_index(store) as index:
            assert not watch_vouches(index)  # the last full scan is older than the watcher
            assert catch_up(index).added == 1  # so it scans, and finds the edit made before watch ran
            assert watch_vouches(index)
            assert catch_up(index).changed == 0
            # a hand edit while watch runs: watch sees it, the next reader scans and finds it
            (store.memory / note.path).write_text((store.memory / note.path).read_text() + "\nhandeditword\n")
            assert _wait_for(lambda: not watch_vouches(index))
            assert catch_up(index).updated == 1
            assert [h.path for h in search(index, "handeditword")] == [note.path]
            # (an editor's save can be several events: one after the scan began means one more scan)
            assert _wait_for(lambda: catch_up(index) is not None and watch_vouches(index))
            added = write(store, "global/facts/new-by-hand.md", "---\ntitle: New\n---\nnewbyhandword\n")
            assert _wait_for(lambda: not watch_vouches(index))
            catch_up(index)
            assert [h.path for h in search(index, "newbyhandword")] == ["global/facts/new-by-hand.md"]
            added.unlink()
            assert _wait_for(lambda: not watch_vouches(index))
            assert catch_up(index).removed == 1
    finally:
        watcher.stop()
    with open_index(store) as index:
        index.refresh()
        assert not watch_vouches(index)  # a stopped watch vouches for nothing


def test_a_copied_heartbeat_vouches_for_nothing(store: Store) -> None:
    """Watch must be this store's: a fresh heartbeat with a live pid but no watch lock held is not enough."""
    import json

    from anamnesis.sync.freshness import watch_vouches

    create_note(store, type="semantic", title="Lonely", body="text")
    store.state_dir.mkdir(parents=True, exist_ok=True)
    now = time.time()
    beat = {"pid": os.getpid(), "started": now - 100, "beat": now, "stopped": False, "watching": now - 100}
    (store.state_dir / "watch.json").write_text(json.dumps(beat))
    with open_index(store) as index:
        index.refresh()
        assert not watch_vouches(index)


def test_a_change_during_a_scan_keeps_the_index_marked_behind(store: Store) -> None:
    from anamnesis.search.index import BEHIND_NAME, _clear_behind, mark_behind

    store.state_dir.mkdir(parents=True, exist_ok=True)
    marker = store.state_dir / BEHIND_NAME
    mark_behind(store)
    seen = marker.stat().st_size
    mark_behind(store)  # a change the scan may have missed
    _clear_behind(store, seen)
    assert marker.exists()
    _clear_behind(store, marker.stat().st_size)
    assert not marker.exists()
    assert [p.name for p in store.state_dir.iterdir() if p.name.startswith(BEHIND_NAME)] == []
