"""The FTS5 index against real files: code words, stemming, filters, increments, bad files."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from anamnesis.index import open_index
from anamnesis.paths import Store
from anamnesis.search import search
from anamnesis.store import create_note


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
    assert search_paths(store, "config loader") == [c.path] or c.path in search_paths(store, "config loader")
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

    from anamnesis.errors import UsageError

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
    create_note(store, type="semantic", title="Odd", body="and or not")
    with open_index(store) as index:
        for text in ('AND OR NOT "(', "-only", "a* -b", "NEAR(x y) ^ : ;", '"unbalanced'):
            search(index, text)  # never an FTS5 syntax error


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
