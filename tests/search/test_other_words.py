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
from anamnesis.search.query import parse_query
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


def test_the_parser_sets_function_words_apart() -> None:
    query = parse_query("where does the tool look for its settings?")
    assert [t.text for t in query.terms] == ["tool", "look", "settings"]
    assert [t.text for t in query.function_terms] == ["where", "does", "the", "for", "its"]
    only = parse_query("how to")
    assert [t.text for t in only.terms] == ["how", "to"] and not only.function_terms


def test_a_question_sharing_only_function_words_with_its_note_is_found(store: Store) -> None:
    fill(store)
    panel = create_note(
        store, type="semantic", title="Breaker box", body="It hangs behind the shelf, up on the garage wall."
    )
    plants = create_note(store, type="semantic", title="House plants", body="Water the ferns in the house weekly.")
    found = ranked(store, "where is the fuse panel up in our house?")
    assert found[0] == plants.path  # a content word still comes first
    assert panel.path in found  # found by "up" alone: better than a short list


def test_a_note_holding_the_content_words_ranks_above_notes_with_only_function_words(store: Store) -> None:
    fill(store)
    answer = create_note(store, type="semantic", title="Breaker box", body="The breaker box is in the garage.")
    chatty = create_note(
        store, type="semantic", title="Attic", body="Where is it? Up there, where it always was, up in the attic."
    )
    found = ranked(store, "where is the breaker box up in the garage")
    assert found[0] == answer.path
    assert chatty.path in found[1:]  # it holds "where" and "up" twice, and still comes after


def test_function_words_never_answer_alone(store: Store) -> None:
    fill(store)
    create_note(store, type="semantic", title="Attic", body="Where is it? Up there, where it always was.")
    # off-topic: no content word of the question is in any note, so nothing, as before
    assert ranked(store, "where is the capital of France up north?") == []
    # a query of function words only is still searched for them: there is nothing else to go by
    assert ranked(store, "where is it") != []


def test_a_word_most_notes_hold_does_not_make_every_note_a_candidate(store: Store) -> None:
    fill(store)
    zebra = create_note(store, type="semantic", title="Zebra", body="The zebra crossing is by the gate.")
    # "the" is in most notes: BM25 gives it no weight, and it is not asked for
    assert ranked(store, "the zebra") == [zebra.path]
    assert ranked(store, "was the zebra there") == [zebra.path]


def test_function_words_respect_filters_and_exclusions(store: Store) -> None:
    fill(store)
    create_note(store, type="semantic", title="Panel", body="Up on the wall, behind the shelf.", project="github.com/a/b")
    shed = create_note(store, type="semantic", title="Shed", body="Up on the roof of the shed.")
    plants = create_note(store, type="semantic", title="House plants", body="Water the ferns in the house weekly.")
    assert ranked(store, "fuse panel up in our house", project="github.com/x/y") == []
    found = ranked(store, "fuse panel up in our house NOT roof")
    assert found[0] == plants.path and shed.path not in found


def test_a_spelled_out_long_form_finds_the_short_one(store: Store) -> None:
    fill(store)
    rule = create_note(store, type="procedural", title="Reviews", body="Every MR needs two approvals.")
    query = parse_query("who approves a merge request")
    assert ("merge request" in [t.text for t in query.terms]) and query.terms[-1].joined
    assert ranked(store, "who approves a merge request")[0] == rule.path
    # the words are still searched one by one, and a short keyword query still wants them all
    both = create_note(store, type="semantic", title="Merge queue", body="A merge of one request at a time.")
    assert ranked(store, "merge request")[0] == both.path


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
