"""Keyword search for questions put in other words: function words, spelled-out short forms, replacements.

A question phrased in other words than its note often shares none of its content words. Keyword
search (no model) still finds it through the query's function words ("where", "up", "once"),
which count only for notes no content word found, only when the content words leave room, and
never on their own; through the long form of a short one ("merge request" finds "MR"); and
through the note a replacement supersedes.
"""

from __future__ import annotations

from typing import Any

from anamnesis.base.paths import Store
from anamnesis.search.engine import search
from anamnesis.search.index import open_index
from anamnesis.search.ranking import KeywordRanker
from anamnesis.store.operations import create_note


def ranked(store: Store, text: str, **options: Any) -> list[str]:
    with open_index(store) as index:
        index.refresh()
        return [hit.path for hit in search(index, text, ranker=KeywordRanker(), **options)]


def fill(store: Store) -> None:
    """Notes that hold "the" (like most notes) but none of the rarer function words used below."""
    bodies = [
        "Postgres 16 runs on db1; the replica is db2.",
        "Deploys go out with make deploy from the main branch.",
        "The staging certificates renew with certbot every month.",
        "Redis keeps the sessions for a day.",
        "Run the tests with pytest -q before pushing.",
    ]
    for i, body in enumerate(bodies):
        create_note(store, type="semantic", title=f"Fact {i}", body=body)


def test_a_replacement_found_by_fewer_words_ranks_as_high_as_the_note_it_replaced(store: Store) -> None:
    old = create_note(
        store,
        type="semantic",
        title="Where the tool reads its settings",
        body="The tool reads its settings file from ~/.toolrc at start.",
    )
    create_note(store, type="semantic", title="Tool file formats", body="The tool writes a lock file next to each archive.")
    new = create_note(
        store,
        type="semantic",
        title="Settings moved",
        body="Since 0.7 they live in ~/.config/tool/config.toml.",
        supersedes=[old.id],
    )
    found = ranked(store, "where does the tool read its settings file")
    assert found[0] == new.path
    assert found.index(old.path) > found.index(new.path)
