"""Small core behaviours sync relies on."""

from __future__ import annotations

from anamnesis.paths import Store
from anamnesis.store import delete_note


def test_deleting_a_note_that_was_never_committed(store: Store) -> None:
    path = store.memory / "global" / "facts" / "draft.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Draft\n\nwritten by hand, deleted before any sync\n")
    delete_note(store, "global/facts/draft.md")
    assert not path.exists()
